import Glibc
import Testing

@testable import KVClient

@Suite struct SocketPathTests {
    @Test func explicitPathWinsOverEverything() {
        let environment = ["KVD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/7"]
        #expect(SocketPath.resolve(explicit: "/given.sock", environment: environment, uid: 7) == "/given.sock")
    }

    @Test func kvdSocketVariableComesSecond() {
        let environment = ["KVD_SOCKET": "/env.sock", "XDG_RUNTIME_DIR": "/run/user/7"]
        #expect(SocketPath.resolve(explicit: nil, environment: environment, uid: 7) == "/env.sock")
    }

    @Test func runtimeDirectoryComesThird() {
        #expect(
            SocketPath.resolve(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/7"], uid: 7)
                == "/run/user/7/kvd.sock")
    }

    @Test func tmpFolderOfTheUserIsTheLastResort() {
        #expect(SocketPath.resolve(explicit: nil, environment: [:], uid: 7) == "/tmp/kvd-7/kvd.sock")
    }

    @Test func emptyValuesCountAsUnset() {
        let environment = ["KVD_SOCKET": "", "XDG_RUNTIME_DIR": ""]
        #expect(SocketPath.resolve(explicit: "", environment: environment, uid: 7) == "/tmp/kvd-7/kvd.sock")
    }

    /// Issue 11: the system instance's socket never falls back to the user's.
    @Test func systemSocketIsGivenThenKvdSystemSocketThenRunKvd() {
        let environment = [
            "KVD_SYSTEM_SOCKET": "/env/system.sock", "KVD_SOCKET": "/user.sock", "XDG_RUNTIME_DIR": "/run/user/7",
        ]
        #expect(SocketPath.resolveSystem(explicit: "/given.sock", environment: environment) == "/given.sock")
        #expect(SocketPath.resolveSystem(explicit: "", environment: environment) == "/env/system.sock")
        #expect(
            SocketPath.resolveSystem(explicit: nil, environment: ["KVD_SYSTEM_SOCKET": "", "KVD_SOCKET": "/user.sock"])
                == "/run/kvd/system.sock")
    }

    @Test func fallbackFolderIsCreatedPrivate() throws {
        let path = SocketPath.resolve(explicit: nil, environment: [:])
        try SocketPath.prepareFolder(for: path)
        var info = stat()
        #expect(lstat(SocketPath.fallbackFolder(), &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFDIR)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(info.st_uid == getuid())
    }

    @Test func otherFoldersAreLeftAlone() throws {
        try SocketPath.prepareFolder(for: "/nonexistent-kvd-test/kvd.sock")
        #expect(access("/nonexistent-kvd-test", F_OK) != 0)
    }
}
