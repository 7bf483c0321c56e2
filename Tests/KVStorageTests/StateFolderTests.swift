import Glibc
import KVSystem
import KVValues
import Testing

@testable import KVStorage

/// The state folder must be its user's alone, and the store never writes through a link planted in
/// it.
@Suite struct StateFolderTests {
    private func refusal(_ folder: String, fileSystem: any FileSystem = LinuxSystem()) -> String {
        do {
            let store = try Store(directory: folder, fileSystem: fileSystem)
            store.close()
            return "opened"
        } catch {
            guard case .invalidStateDirectory(let message) = error else { return "\(error)" }
            return message
        }
    }

    @Test(arguments: [0o777 as mode_t, 0o770, 0o702, 0o1777])
    func aStateFolderOthersCanWriteIsRefused(mode: mode_t) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        #expect(mkdir(folder.state, 0o700) == 0 && chmod(folder.state, mode) == 0)
        let message = refusal(folder.state)
        #expect(message.contains("the state folder \(folder.state) has mode 0\(String(mode, radix: 8))"), "\(message)")
        #expect(message.contains("chmod go-w"), "\(message)")
        #expect(folder.names().isEmpty, "nothing is written into a refused folder")
    }

    @Test func aStateFolderReadableByOthersIsAccepted() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        #expect(mkdir(folder.state, 0o755) == 0 && chmod(folder.state, 0o755) == 0)
        #expect(refusal(folder.state) == "opened")
    }

    @Test func aStateFolderOfAnotherUserIsRefused() throws {
        let fileSystem = SimulatedFileSystem()
        fileSystem.setStatus(of: "/data", owner: fileSystem.effectiveUserID + 1, permissions: 0o700)
        let message = refusal("/data", fileSystem: fileSystem)
        #expect(
            message.contains("the state folder /data belongs to uid \(fileSystem.effectiveUserID + 1)"), "\(message)")
        #expect(message.contains("--state-dir"), "\(message)")
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to give a folder to another user"))
    func aRealStateFolderOfAnotherUserIsRefused() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        #expect(mkdir(folder.state, 0o700) == 0 && chown(folder.state, 4_000_019, 4_000_019) == 0)
        let message = refusal(folder.state)
        #expect(message.contains("belongs to uid 4000019"), "\(message)")
    }

    @Test func aLinkAtTheTemporaryFileIsNotFollowedAndCompactionStillWorks() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let target = folder.path + "/target"
        let store = try Store(directory: folder.state)
        _ = try store.commit(domain("com.example.d"), .set(key("k"), .string("v"), ifRevision: nil))
        #expect(symlink(target, folder.file(".com.example.d.json.tmp")) == 0)
        store.close()  // compacts
        #expect(access(target, F_OK) != 0, "the store wrote through the link")
        #expect(folder.read("com.example.d.json")?.contains(#""k": "v""#) == true)
        #expect(!folder.names().contains(".com.example.d.json.tmp"))
        unlink(target)
    }

    @Test func aLinkInPlaceOfTheLockIsNotFollowed() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let target = folder.path + "/target"
        #expect(mkdir(folder.state, 0o700) == 0 && symlink(target, folder.file("kvd.lock")) == 0)
        let message = refusal(folder.state)
        #expect(access(target, F_OK) != 0, "the store created the lock through the link")
        #expect(message.contains("symbolic link"), "\(message)")
        unlink(target)
    }
}
