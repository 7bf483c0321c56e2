import Glibc
import KVConnection
import KVProtocol
import KVSystem
import Testing

@testable import KVClient

/// The socket path rule (`Paths`) as the clients use it, and the folder check they make.
@Suite struct SocketPathTests {
    @Test func explicitPathWinsOverEverything() {
        let environment = ["KVD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/7"]
        #expect(Paths.socket(explicit: "/given.sock", environment: environment, uid: 7) == "/given.sock")
    }

    @Test func kvdSocketVariableComesSecond() {
        let environment = ["KVD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/7"]
        #expect(Paths.socket(explicit: nil, environment: environment, uid: 7) == "/env.sock")
    }

    @Test func runtimeDirectoryComesThird() {
        #expect(
            Paths.socket(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/7"], uid: 7)
                == "/run/user/7/kvd.sock")
    }

    @Test func tmpFolderOfTheUserIsTheLastResort() {
        #expect(Paths.socket(explicit: nil, environment: [:], uid: 7) == "/tmp/kvd-7/kvd.sock")
    }

    @Test func emptyValuesCountAsUnset() {
        let environment = ["KVD_SOCKET": "", "XDG_RUNTIME_DIR": ""]
        #expect(Paths.socket(explicit: "", environment: environment, uid: 7) == "/tmp/kvd-7/kvd.sock")
    }

    /// The system instance's socket never falls back to the user's.
    @Test func systemSocketIsGivenThenKvdSystemSocketThenRunKvd() {
        let environment = [
            "KVD_SYSTEM_SOCKET": "/env/system.sock", "KVD_SOCKET": "/user.sock", "XDG_RUNTIME_DIR": "/run/user/7",
        ]
        #expect(Paths.systemSocket(explicit: "/given.sock", environment: environment) == "/given.sock")
        #expect(Paths.systemSocket(explicit: "", environment: environment) == "/env/system.sock")
        #expect(
            Paths.systemSocket(explicit: nil, environment: ["KVD_SYSTEM_SOCKET": "", "KVD_SOCKET": "/user.sock"])
                == "/run/kvd/system.sock")
    }

    @Test func fallbackFolderIsCreatedPrivate() throws {
        let path = Paths.socket(explicit: nil, environment: [:])
        try Connection.prepareFolder(for: path)
        var info = stat()
        #expect(lstat(Paths.fallbackSocketFolder(), &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFDIR)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(info.st_uid == getuid())
    }

    @Test func otherFoldersAreLeftAlone() throws {
        try Connection.prepareFolder(for: "/nonexistent-kvd-test/kvd.sock")
        #expect(access("/nonexistent-kvd-test", F_OK) != 0)
    }
}
