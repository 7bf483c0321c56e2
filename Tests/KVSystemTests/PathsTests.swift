import KVSystem
import Testing

@Suite struct PathTests {
    @Test func socketPathFollowsTheContractOrder() {
        #expect(Paths.socket(explicit: "/x.sock", environment: ["KVD_SOCKET": "/y"]) == "/x.sock")
        #expect(Paths.socket(explicit: nil, environment: ["KVD_SOCKET": "/y", "XDG_RUNTIME_DIR": "/run/u"]) == "/y")
        #expect(Paths.socket(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/u"]) == "/run/u/kvd.sock")
        #expect(Paths.socket(explicit: nil, environment: [:], uid: 1000) == "/tmp/kvd-1000/kvd.sock")
    }

    @Test func stateDirectoryFollowsTheContractOrder() {
        #expect(Paths.stateDirectory(explicit: "/s", environment: ["KVD_STATE_DIR": "/k"]) == "/s")
        #expect(
            Paths.stateDirectory(explicit: nil, environment: ["KVD_STATE_DIR": "/k", "STATE_DIRECTORY": "/sd"]) == "/k")
        #expect(
            Paths.stateDirectory(
                explicit: nil, environment: ["STATE_DIRECTORY": "/sd:/other", "XDG_CONFIG_HOME": "/c"]) == "/sd")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["XDG_CONFIG_HOME": "/c", "HOME": "/h"]) == "/c/kvd")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["HOME": "/h"]) == "/h/.config/kvd")
    }
}
