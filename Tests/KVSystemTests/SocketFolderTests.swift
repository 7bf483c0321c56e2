import Glibc
import KVSystem
import Testing

/// The one socket-folder check every kvd program makes, on folders made for each test in a private
/// parent.
@Suite struct SocketFolderTests {
    /// A private parent folder with the fallback folder's place inside it (not created).
    final class Place {
        let parent: String
        var folder: String { parent + "/kvd-test" }
        var socket: String { folder + "/kvd.sock" }

        init() {
            var template = Array("/tmp/kvd-socketfolder-XXXXXX".utf8CString)
            parent = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        }

        deinit {
            unlink(folder)
            rmdir(folder)
            rmdir(parent)
        }

        func prepare(owner: UInt32 = geteuid()) throws(SocketFolderError) {
            try SocketFolder.prepare(forSocket: socket, fallback: folder, owner: owner)
        }
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode : 0
    }

    @Test func aMissingFolderIsCreatedPrivate() throws {
        let place = Place()
        try place.prepare()
        #expect(mode(place.folder) & S_IFMT == S_IFDIR)
        #expect(mode(place.folder) & 0o7777 == 0o700)
    }

    @Test func aPrivateFolderOfTheUserIsAccepted() throws {
        let place = Place()
        #expect(mkdir(place.folder, 0o700) == 0)
        try place.prepare()
    }

    @Test func aFolderOthersCanEnterIsRefusedWithWhatToDo() throws {
        let place = Place()
        #expect(mkdir(place.folder, 0o700) == 0)
        #expect(chmod(place.folder, 0o777) == 0)
        let error = #expect(throws: SocketFolderError.self) { try place.prepare() }
        let message = error?.description ?? ""
        #expect(message.contains(place.folder) && message.contains("mode 0777"), "\(message)")
        #expect(message.contains("rm -r \(place.folder)") && message.contains("KVD_SOCKET"), "\(message)")
        #expect(!message.contains("\n"))
    }

    @Test func aFolderOfAnotherUserIsRefused() throws {
        let place = Place()
        #expect(mkdir(place.folder, 0o700) == 0)
        let someoneElse = geteuid() &+ 1
        let error = #expect(throws: SocketFolderError.self) { try place.prepare(owner: someoneElse) }
        #expect(
            error?.description.contains("belongs to uid \(geteuid()), not to you (uid \(someoneElse))") == true,
            "\(String(describing: error))")
    }

    @Test func aLinkInThePlaceOfTheFolderIsRefused() throws {
        let place = Place()
        #expect(symlink(place.parent, place.folder) == 0)
        let error = #expect(throws: SocketFolderError.self) { try place.prepare() }
        #expect(error?.description.contains("is a symbolic link") == true, "\(String(describing: error))")
    }

    @Test func socketsOutsideTheFallbackFolderAreLeftToWhoeverChoseThem() throws {
        let place = Place()
        try SocketFolder.prepare(forSocket: place.parent + "/elsewhere/kvd.sock", fallback: place.folder)
        #expect(access(place.folder, F_OK) != 0)
        #expect(access(place.parent + "/elsewhere", F_OK) != 0)
    }
}
