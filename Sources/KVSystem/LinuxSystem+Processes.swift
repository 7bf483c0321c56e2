import Glibc

/// The real process-starting calls of ``SystemCalls``: `posix_spawn`, each as its C call and
/// nothing else (no retry).
extension LinuxSystem {
    public func spawn(_ path: String, arguments: [String], environment: [String: String], standardError: Int32?)
        throws(Errno) -> pid_t
    {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if let standardError {
            posix_spawn_file_actions_adddup2(&actions, standardError, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(Self.setsidFlag))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var process: pid_t = 0
        let result = posix_spawn(&process, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw Errno(rawValue: result) }
        return process
    }

    public func spawn(_ path: String, arguments: [String], input: Int32, output: Int32, error: Int32) throws(Errno)
        -> pid_t
    {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, error, 2)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var process: pid_t = 0
        let result = posix_spawn(&process, path, &actions, nil, argv, environ)
        guard result == 0 else { throw Errno(rawValue: result) }
        return process
    }

    /// `POSIX_SPAWN_SETSID` from glibc's spawn.h (a macro Swift does not import).
    private static let setsidFlag: Int32 = 0x80
}
