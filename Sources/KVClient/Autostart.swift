import Glibc

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

    /// Connects to `socketPath`, after checking its folder (``SocketPath/prepareFolder(for:uid:)``:
    /// a folder another user may control gets ``ClientError/unsafeSocketFolder(_:)``, with nothing
    /// sent and nothing started). If nothing listens there (no socket file, or connection refused),
    /// `enabled` is true and the environment does not disable it, starts the daemon (`daemonPath`,
    /// else `kvd` beside the current executable) as `kvd --socket PATH` in a new session with
    /// `environment` less the service manager's variables (``daemonEnvironment(_:)``), polls for
    /// up to ``startTimeout``, and returns the connection. Two clients starting kvd at once is
    /// fine: the second daemon cannot take the socket and exits, and both clients connect to the
    /// first.
    public static func connect(
        socketPath: String, daemonPath: String? = nil, enabled: Bool = true, environment: [String: String]
    ) throws(ClientError) -> Connection {
        try SocketPath.prepareFolder(for: socketPath)
        let firstFailure: SystemError
        switch Socket.connect(path: socketPath) {
        case .success(let descriptor): return Connection(descriptor: descriptor, socketPath: socketPath)
        case .failure(let error): firstFailure = error
        }
        guard firstFailure.meansNobodyListens, enabled, !isDisabled(environment: environment) else {
            throw .cannotConnect(path: socketPath, reason: firstFailure.text)
        }
        guard let daemon = daemonPath ?? daemonBesideExecutable() else {
            throw .cannotStart(path: socketPath, reason: "cannot find the folder of this program (/proc/self/exe)")
        }
        guard access(daemon, X_OK) == 0 else {
            throw .cannotStart(
                path: socketPath,
                reason: "kvd is not at \(daemon) (\(errnoText())); install kvd beside this program or start it yourself")
        }
        let process = try spawn(
            daemon, arguments: ["--socket", socketPath], environment: daemonEnvironment(environment), socketPath: socketPath)
        return try waitForDaemon(process, daemon: daemon, socketPath: socketPath)
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
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let executable = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = executable.lastIndex(of: "/") else { return nil }
        return executable[..<slash] + "/kvd"
    }

    /// Polls `socketPath` until it accepts, the daemon exits, or the timeout passes.
    private static func waitForDaemon(_ process: pid_t, daemon: String, socketPath: String) throws(ClientError) -> Connection {
        let clock = ContinuousClock()
        let deadline = clock.now + startTimeout
        var lastFailure = "no answer"
        while clock.now < deadline {
            switch Socket.connect(path: socketPath) {
            case .success(let descriptor):
                reapLater(process)
                return Connection(descriptor: descriptor, socketPath: socketPath)
            case .failure(let error):
                lastFailure = error.text
            }
            var status: Int32 = 0
            if waitpid(process, &status, WNOHANG) == process {
                // Another kvd may have won the race to the socket; give it one more chance.
                if case .success(let descriptor) = Socket.connect(path: socketPath) {
                    return Connection(descriptor: descriptor, socketPath: socketPath)
                }
                throw .cannotStart(
                    path: socketPath,
                    reason: "\(daemon) exited at once (\(describe(status))); run `\(daemon) --socket \(socketPath)` to see why")
            }
            usleep(20_000)
        }
        reapLater(process)
        throw .cannotStart(
            path: socketPath,
            reason: "\(daemon) started but did not accept connections within 5 s (\(lastFailure)); check its log")
    }

    /// Starts `path` with `arguments` in a new session, with stdin, stdout and stderr on /dev/null:
    /// the daemon outlives the client, and its log lines must not land in the user's terminal
    /// later. When it fails at once, the error says how to run it by hand to see why.
    ///
    /// The corresponding C call is `posix_spawn` with `POSIX_SPAWN_SETSID`.
    private static func spawn(
        _ path: String, arguments: [String], environment: [String: String], socketPath: String
    ) throws(ClientError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(setsidFlag))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var process: pid_t = 0
        let result = posix_spawn(&process, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw .cannotStart(path: socketPath, reason: "cannot run \(path): \(errnoText(result))") }
        return process
    }

    /// `POSIX_SPAWN_SETSID` from glibc's spawn.h (a macro Swift does not import).
    private static let setsidFlag: Int32 = 0x80

    /// Reaps the daemon when it exits, so a long-running client leaves no zombie.
    private static func reapLater(_ process: pid_t) {
        detachThread {
            var status: Int32 = 0
            while waitpid(process, &status, 0) < 0, errno == EINTR {}
        }
    }

    private static func describe(_ status: Int32) -> String {
        let signal = status & 0x7F
        return signal == 0 ? "status \((status >> 8) & 0xFF)" : "signal \(signal)"
    }
}
