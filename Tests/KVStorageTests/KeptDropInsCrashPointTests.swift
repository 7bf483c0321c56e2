import Glibc
import KVSystem
import KVValues
import Testing

@testable import KVStorage

/// The system instance keeps the last good content of every drop-in file in `STATE/kvd.drop-ins`
/// (``KeptDropInsFile``), so that a typo does not lift a lock at the next restart. After a crash at
/// every disk operation of saving a copy and then the next one, in every way the unsynced data
/// could reach the disk, the copy read is the old one or the new one, whole; never a part, never
/// unreadable (which would lift a bad file's locks). A full disk fails the save and leaves the old
/// copy as it was.
@Suite struct KeptDropInsCrashPointTests {
    static let directory = "/data/state"

    static let old: [String: KeptDropIn] = [
        "/etc/kvd/locks.d/60-good": KeptDropIn(locks: [domain("org.ex.keep"): [key("homepage"), key("proxy.*")]]),
        "/etc/kvd/defaults.d/10-base.json": KeptDropIn(values: [
            domain("org.ex.keep"): [key("theme"): .string("school"), key("zoom"): .integer(2)]
        ]),
    ]
    static let new: [String: KeptDropIn] = [
        "/etc/kvd/locks.d/60-good": KeptDropIn(
            locks: [domain("org.ex.keep"): [key("zoom")]],
            audience: DefaultsDocument.Audience(groups: ["students"], users: ["alice"])),
        "/etc/kvd/defaults.d/20-more.json": KeptDropIn(values: [
            domain("org.ex.other"): [key("list"): .array([.string("a"), .dictionary(["b": .bool(true)])])]
        ]),
    ]

    @Test func aCopyRoundTripsAndOneFailingItsChecksIsRefused() throws {
        #expect(try KeptDropInsFile.decodeForTests(KeptDropInsFile.encode(Self.new)) == Self.new)
        var torn = KeptDropInsFile.encode(Self.new)
        torn.removeLast(3)
        #expect(throws: (any Error).self) { try KeptDropInsFile.decodeForTests(torn) }
        var flipped = KeptDropInsFile.encode(Self.new)
        flipped[flipped.count / 2] ^= 0x01
        #expect(throws: (any Error).self) { try KeptDropInsFile.decodeForTests(flipped) }
    }

    @Test func aCopyIsSavedWhollyOrNotAtAllAfterEveryCrash() throws {
        let fileSystem = SimulatedFileSystem(.with(folders: ["/data", Self.directory]))
        let file = KeptDropInsFile(directory: Self.directory, fileSystem: fileSystem)
        try file.save(Self.old)
        let oldSaved = fileSystem.operationCount
        try file.save(Self.new)
        var failures: [String] = []
        let states = forEachCrashState(of: fileSystem) { point, label, disk in
            let loaded = Result { try KeptDropInsFile(directory: Self.directory, fileSystem: disk).load() }
            switch loaded {
            case .success(let kept) where kept == Self.old || kept == Self.new: return
            case .success(nil) where point < oldSaved: return
            default: failures.append("crash after operation \(point) (\(label)): \(loaded)")
            }
        }
        #expect(fileSystem.operations.count > 6 && states > fileSystem.operations.count)
        #expect(failures.isEmpty, "\(failures.prefix(3).joined(separator: "\n"))")
    }

    @Test func aFullDiskFailsTheSaveAndLeavesTheOldCopy() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        mkdir(folder.state, 0o700)
        let fileSystem = RecordingFileSystem()
        let file = KeptDropInsFile(directory: folder.state, fileSystem: fileSystem)
        try file.save(Self.old)
        fileSystem.fail { operation, _ in ["write", "fsync"].contains(operation) ? ENOSPC : nil }
        #expect(throws: StorageError.self) { try file.save(Self.new) }
        fileSystem.fail { _, _ in nil }
        #expect(try file.load() == Self.old)
        #expect(folder.names() == [KeptDropInsFile.fileName], "the temporary file was removed: \(folder.names())")
    }
}

extension KeptDropInsFile {
    /// What ``load()`` makes of `bytes`.
    static func decodeForTests(_ bytes: [UInt8]) throws -> [String: KeptDropIn] {
        let directory = "/data/state"
        let fileSystem = SimulatedFileSystem(.with(folders: ["/data", directory]))
        let fd = try fileSystem.open(directory + "/" + fileName, [.write, .create], permissions: 0o600)
        try fileSystem.write(fd, bytes)
        fileSystem.close(fd)
        return try KeptDropInsFile(directory: directory, fileSystem: fileSystem).load() ?? [:]
    }
}
