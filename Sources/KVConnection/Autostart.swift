import Glibc
import KVSystem

/// Connecting with a fallback: when nothing listens on the socket, start `kvd` and wait for it.
///
/// When a service manager owns the socket (`kvd.socket`), connecting succeeds at once and nothing
/// is started.
public enum Autostart {
    /// How long to wait for a started kvd to accept connections.
    public static let startTimeout: Duration = .seconds(5)

    /// Whether the environment turns autostart off (`KVD_NO_AUTOSTART=1`).
    public static func isDisabled(environment: [String: String]) -> Bool {
        environment["KVD_NO_AUTOSTART"] == "1"
    }

    /// Connects to `socketPath`, after checking its folder (as ``Connection/init(socketPath:)``
    /// does: a folder another user may control gets ``ClientError/unsafeSocketFolder(_:)``, with
    /// nothing sent and nothing started). If nothing listens there (no socket file, or connection refused),
    /// `enabled` is true and the environment does not disable it, starts the daemon (`daemonPath`,
    /// else `kvd` beside the current executable) as `kvd --socket PATH` in a new session with
    /// `environment` less the service manager's variables (``daemonEnvironment(_:)``), polls for
    /// up to ``startTimeout``, and returns the connection.
    ///
    /// One client at a time starts kvd for a socket: the others wait for `SOCKET.autostart.lock`
    /// beside it (up to ``startTimeout``), then connect to the kvd the first one started. The
    /// started kvd's standard error goes to `kvd-autostart.log` in the state folder it will use;
    /// when it exits or never accepts, the error names that file and quotes its last line.
    public static func connect(
        socketPath: String, daemonPath: String? = nil, enabled: Bool = true, environment: [String: String]
    ) throws(ClientError) -> Connection {
        try connect(
            socketPath: socketPath, daemonPath: daemonPath, enabled: enabled, environment: environment,
            system: LinuxSystem())
    }

    /// ``connect(socketPath:daemonPath:enabled:environment:)`` with every system call through `system`.
    static func connect(
        socketPath: String, daemonPath: String?, enabled: Bool, environment: [String: String], system: any SystemCalls
    ) throws(ClientError) -> Connection {
        try Connection.prepareFolder(for: socketPath)
        let firstFailure: SystemError
        do {
            return Connection(descriptor: try system.connectUnix(socketPath), socketPath: socketPath, system: system)
        } catch {
            firstFailure = error
        }
        let reason = Connection.reason(firstFailure, connecting: socketPath, system: system)
        // No kvd can listen where a file stands: starting one would only fail the same way.
        let blocked = Connection.notASocket(socketPath, after: firstFailure, system: system) != nil
        guard firstFailure.errno.meansNobodyListens, !blocked, enabled, !isDisabled(environment: environment) else {
            throw .cannotConnect(path: socketPath, reason: reason)
        }
        let daemon = try findDaemon(daemonPath, socketPath: socketPath, system: system)
        let deadline = ContinuousClock.now + startTimeout
        let lock = AutostartLock.acquire(for: socketPath, until: deadline, system: system)
        defer { lock?.release() }
        // Another client may have started kvd while this one waited for the lock.
        if let descriptor = try? system.connectUnix(socketPath) {
            return Connection(descriptor: descriptor, socketPath: socketPath, system: system)
        }
        return try start(daemon, socketPath: socketPath, environment: daemonEnvironment(environment), system: system)
    }

    /// `daemonPath`, else `kvd` beside this program, once checked to be executable.
    private static func findDaemon(
        _ daemonPath: String?, socketPath: String, system: any SystemCalls
    ) throws(ClientError) -> String {
        guard let daemon = daemonPath ?? daemonBesideExecutable(system) else {
            throw .cannotStart(path: socketPath, reason: "cannot find the folder of this program (/proc/self/exe)")
        }
        do { try system.checkExecutable(daemon) } catch {
            throw .cannotStart(
                path: socketPath,
                reason: "kvd is not at \(daemon) (\(error)); install kvd beside this program or start it yourself")
        }
        return daemon
    }

    /// Starts `daemon --socket socketPath` with `environment`, its standard error on the
    /// ``AutostartLog`` of the state folder it will use, and waits for it.
    private static func start(
        _ daemon: String, socketPath: String, environment: [String: String], system: any SystemCalls
    ) throws(ClientError) -> Connection {
        let arguments = ["--socket", socketPath]
        let log = AutostartLog.open(
            stateDirectory: Paths.stateDirectory(explicit: nil, environment: environment),
            starting: ([daemon] + arguments).joined(separator: " "), system: system)
        let process: pid_t
        do {
            defer { log?.close() }
            process = try system.spawn(
                daemon, arguments: arguments, environment: environment, standardError: log?.descriptor.rawValue)
        } catch {
            throw .cannotStart(path: socketPath, reason: "cannot run \(daemon): \(error)")
        }
        return try waitForDaemon(process, daemon: daemon, socketPath: socketPath, log: log, system: system)
    }

    /// The variables a service manager sets for the process it started, which a kvd started by
    /// that process must not take as its own: it would report `READY=1`/`STOPPING=1` and watchdog
    /// pings to the caller's service manager, take the caller's sockets or journal stream, and
    /// keep its state in the caller's `StateDirectory=`.
    public static let serviceManagerVariables: Set<String> = [
        "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
        "JOURNAL_STREAM", "STATE_DIRECTORY",
    ]

    /// `environment` without ``serviceManagerVariables``: what an autostarted kvd gets.
    public static func daemonEnvironment(_ environment: [String: String]) -> [String: String] {
        environment.filter { !serviceManagerVariables.contains($0.key) }
    }

    /// `kvd` in the folder of the running executable (`/proc/self/exe`), or `nil` if unknown.
    public static func daemonBesideExecutable() -> String? {
        daemonBesideExecutable(LinuxSystem())
    }

    static func daemonBesideExecutable(_ system: any SystemCalls) -> String? {
        guard let executable = system.executablePath(), let slash = executable.lastIndex(of: "/") else { return nil }
        return executable[..<slash] + "/kvd"
    }

    /// Polls `socketPath` until it accepts, the daemon exits, or the timeout passes.
    private static func waitForDaemon(
        _ process: pid_t, daemon: String, socketPath: String, log: AutostartLog?, system: any SystemCalls
    ) throws(ClientError) -> Connection {
        let clock = ContinuousClock()
        let deadline = clock.now + startTimeout
        var lastFailure = "no answer"
        while clock.now < deadline {
            do {
                let descriptor = try system.connectUnix(socketPath)
                reapLater(process, system)
                return Connection(descriptor: descriptor, socketPath: socketPath, system: system)
            } catch {
                lastFailure = Connection.reason(error)
            }
            if let status = try? system.waitForExit(process, blocking: false) {
                // A kvd started by hand may have taken the socket meanwhile; give it one more chance.
                if let descriptor = try? system.connectUnix(socketPath) {
                    return Connection(descriptor: descriptor, socketPath: socketPath, system: system)
                }
                let why = log?.explanation() ?? "run `\(daemon) --socket \(socketPath)` to see why"
                throw .cannotStart(path: socketPath, reason: "\(daemon) exited at once (\(describe(status))); \(why)")
            }
            system.sleep(microseconds: 20_000)
        }
        reapLater(process, system)
        let why = log?.explanation() ?? "check its log"
        throw .cannotStart(
            path: socketPath,
            reason: "\(daemon) started but did not accept connections within 5 s (\(lastFailure)); \(why)")
    }

    /// Reaps the daemon when it exits, so a long-running client leaves no zombie.
    private static func reapLater(_ process: pid_t, _ system: any SystemCalls) {
        detachThread {
            _ = try? system.retrying("waitpid") { () throws(Errno) in try system.waitForExit(process, blocking: true) }
        }
    }

    private static func describe(_ status: Int32) -> String {
        let signal = status & 0x7F
        return signal == 0 ? "status \((status >> 8) & 0xFF)" : "signal \(signal)"
    }
}
