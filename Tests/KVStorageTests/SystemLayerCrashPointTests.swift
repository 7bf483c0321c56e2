import KVValues
import Testing

@testable import KVStorage

/// A reload of the system instance's drop-in files reaches a user's kvd as one batch, which it
/// saves as one new system layer (``SystemLayerFile``). After a crash at every disk operation of
/// saving the layer before the reload and then the one after it, in every way the unsynced data
/// could reach the disk, the saved layer is the old one or the new one, whole: never a part of the
/// reload, never unreadable (which would lift its locks).
@Suite struct SystemLayerCrashPointTests {
    static let directory = "/data/state"

    @Test func aReloadsLayerIsSavedWhollyOrNotAtAllAfterEveryCrash() throws {
        let a = domain("org.ex.browser")
        let b = domain("org.ex.mail")
        let old = SavedSystemLayer(
            revision: 5, values: [a: [key("homepage"): .string("a"), key("fontsize"): .integer(12)]],
            locks: [a: [key("homepage")]])
        let new = SavedSystemLayer(
            revision: 6,
            values: [
                a: [key("homepage"): .string("b"), key("fontsize"): .integer(14), key("theme"): .string("dark")],
                b: [key("server"): .string("mail.example")],
            ],
            locks: [a: [key("homepage"), key("fontsize")], b: [key("*")]])
        let fileSystem = SimulatedFileSystem(.with(folders: ["/data", Self.directory]))
        let file = SystemLayerFile(directory: Self.directory, fileSystem: fileSystem)
        try file.save(old)
        let oldSaved = fileSystem.operationCount
        try file.save(new)
        var failures: [String] = []
        let states = forEachCrashState(of: fileSystem) { point, label, disk in
            let loaded = Result { try SystemLayerFile(directory: Self.directory, fileSystem: disk).load() }
            switch loaded {
            case .success(let layer) where layer == old || layer == new: return
            case .success(nil) where point < oldSaved: return
            default: failures.append("crash after operation \(point) (\(label)): \(loaded)")
            }
        }
        #expect(fileSystem.operations.count > 6 && states > fileSystem.operations.count)
        #expect(failures.isEmpty, "\(failures.prefix(3).joined(separator: "\n"))")
    }
}
