import CLinux
import Foundation
import Glibc
import KVValues
import Observation
import Synchronization
import Testing

@testable import KVClient

extension KVDefaults.Keys {
    fileprivate static let theme = Key<String>("theme", default: "light")
    fileprivate static let volume = Key<Int>("volume", default: 5)
}

/// The model of the README's example: each property a typed key.
private final class AppSettings: KVSettings, @unchecked Sendable {
    var theme: String {
        get { self[.theme] }
        set { self[.theme] = newValue }
    }
    var volume: Int {
        get { self[.volume] }
        set { self[.volume] = newValue }
    }
}

/// Runs `read` under `withObservationTracking` and returns a gate opened by its `onChange`.
private func tracking(_ read: () -> Void) -> Gate {
    let changed = Gate()
    withObservationTracking(read) { changed.open() }
    return changed
}

/// Starts a program built beside kvd (kvctl, a second kvd) with `posix_spawn` (Foundation's
/// `Process` can wait on the wrong child while RealDaemon's kvd runs); output to /dev/null.
func spawn(_ program: String, _ arguments: [String]) throws -> pid_t {
    let path = URL(fileURLWithPath: RealDaemon.binary).deletingLastPathComponent().appendingPathComponent(program).path
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addclosefrom_np(&actions, 3)  // no other test's descriptor lives on in the child
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var child: pid_t = 0
    guard posix_spawn(&child, path, &actions, nil, argv, environ) == 0 else {
        throw TestFailure("cannot start \(path)")
    }
    return child
}

/// Runs a program built beside kvd and waits for it; throws unless it exits 0.
func run(_ program: String, _ arguments: [String]) throws {
    let child = try spawn(program, arguments)
    var status: Int32 = 0
    waitpid(child, &status, 0)
    if status != 0 {
        throw TestFailure("\(program) \(arguments.joined(separator: " ")) failed (wait status \(status))")
    }
}

/// ``KVSettings``: Observation learns of changes from this process, another process (kvctl) and
/// the system layer (a real system instance), for the keys the tracked code read only.
@Suite(.serialized) struct KVSettingsTests {
    @Test func aChangeByKvctlInAnotherProcessReachesWithObservationTracking() throws {
        let daemon = try RealDaemon()
        let settings = AppSettings(daemon.suite("com.example.observed"))
        let changed = tracking { _ = settings.theme }
        let other = tracking { _ = settings.volume }
        try run("kvctl", ["--socket", daemon.socket, "set", "com.example.observed", "theme", "dark"])
        #expect(changed.wait(seconds: 30), "onChange was not called after kvctl set")
        #expect(settings.theme == "dark")
        #expect(!other.opened, "a change of theme told the observer of volume")

        let again = tracking { _ = settings.theme }
        try run("kvctl", ["--socket", daemon.socket, "delete", "com.example.observed", "theme"])
        #expect(again.wait(seconds: 30), "onChange was not called after kvctl delete")
        #expect(settings.theme == "light", "a removed key reads as its default")
    }

    @Test func aWriteThroughTheModelOrAnotherSuiteNotifiesAtOnce() throws {
        let daemon = try RealDaemon()
        let settings = AppSettings(daemon.suite("com.example.observed"))
        let changed = tracking { _ = settings.volume }
        settings.volume = 9
        #expect(changed.opened, "the model's own write did not notify before returning")
        #expect(settings.volume == 9 && daemon.suite("com.example.observed")[.volume] == 9)

        let fromOther = tracking { _ = settings.volume }
        let otherSuite = daemon.suite("com.example.observed")
        try otherSuite.set(3, for: .volume)
        #expect(fromOther.wait(seconds: 30), "a write of another suite in this process was not observed")
        #expect(settings.volume == 3)
    }

    @Test func theSameValueAgainIsNoChange() throws {
        let settings = AppSettings(KVDefaults(suiteName: "com.example.observed", configuration: .inMemory())!)
        settings.theme = "dark"
        let changed = tracking { _ = settings.theme }
        settings.theme = "dark"
        #expect(!changed.opened, "writing the value the key has notified")
        settings.theme = "light"
        #expect(changed.opened)
    }

    @Test func aLockAndAMachineDefaultOfTheSystemLayerReachTheModel() throws {
        let daemon = try RealDaemon()
        let system = daemon.root + "/system.sock"
        try SystemInstance.start(socket: system, state: daemon.root + "/system-state")
        defer { SystemInstance.stop(socket: system) }
        daemon.stop()
        try daemon.start(arguments: ["--system-socket", system])
        let settings = AppSettings(daemon.suite("com.example.managed"))

        let defaulted = tracking { _ = settings.theme }
        try run("kvctl", ["--system", "--socket", system, "set", "com.example.managed", "theme", "corporate"])
        #expect(defaulted.wait(seconds: 30), "a machine default did not reach the observer")
        #expect(settings.theme == "corporate")

        settings.theme = "mine"
        let locked = tracking { _ = settings.theme }
        try run("kvctl", ["--system", "--socket", system, "lock", "com.example.managed", "theme"])
        #expect(locked.wait(seconds: 30), "a lock did not reach the observer")
        #expect(settings.theme == "corporate" && settings.defaults.objectIsForced(forKey: "theme"))
    }
}

/// A system instance (`kvd --system`) for one test, its admin group this process's group.
enum SystemInstance {
    private static let processes = Mutex<[String: pid_t]>([:])

    static func start(socket: String, state: String) throws {
        let group = String(cString: getgrgid(getgid()).pointee.gr_name)
        let child = try spawn(
            "kvd", ["--system", "--socket", socket, "--state-dir", state, "--idle-exit", "0", "--admin-group", group])
        processes.withLock { $0[socket] = child }
        for _ in 0..<500 {
            if (try? Connection(socketPath: socket)) != nil { return }
            usleep(10_000)
        }
        throw TestFailure("kvd --system did not start on \(socket)")
    }

    static func stop(socket: String) {
        guard let child = processes.withLock({ $0.removeValue(forKey: socket) }) else { return }
        kill(child, SIGKILL)
        var status: Int32 = 0
        waitpid(child, &status, 0)
    }
}
