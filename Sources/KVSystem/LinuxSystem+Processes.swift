import CLinux
import Glibc

/// The real process calls of ``SystemCalls``: starting one (`posix_spawn`), and learning who a
/// connection's peer is (its credentials, pidfd and `/proc` folder), each as its C call and
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

    // MARK: peers

    public func peerProcessDescriptor(_ fd: Int32) throws(Errno) -> Int32 {
        var pidfd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try check(getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length))
        return pidfd
    }

    public func processDescriptor(_ pid: Int32) throws(Errno) -> Int32 {
        try check(kvd_pidfd_open(pid))
    }

    public func processCgroupID(_ pidfd: Int32) throws(Errno) -> UInt64? {
        var id: UInt64 = 0
        _ = try check(kvd_pidfd_cgroup_id(pidfd, &id))
        return id == 0 ? nil : id
    }

    public func peerProcessFacts(pid: Int32, pidfd: Int32) -> PeerProcessFacts? {
        // One C call, a buffer on the stack: kvd makes it for each connection it accepts.
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX)) { buffer in
            var length: Int32 = 0
            var root = FileIdentity(device: 0, inode: 0)
            var cgroup: UInt64 = 0
            guard
                kvd_peer_process_facts(
                    pid, pidfd, buffer.baseAddress, Int32(buffer.count), &length, &root.device, &root.inode,
                    &root.mount, &cgroup) == 0
            else { return nil }
            let program = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: buffer[..<Int(length)]))
            return PeerProcessFacts(
                program: String(decoding: program, as: UTF8.self), root: root, cgroupID: cgroup == 0 ? nil : cgroup)
        }
    }

    public func processIsRunning(_ pidfd: Int32) -> Bool {
        kvd_pidfd_send_signal(pidfd, 0) == 0 || Errno.current.rawValue == EPERM
    }

    public func peerCredentials(_ fd: Int32) throws(Errno) -> PeerCredentials {
        var credentials = kvd_peer_credentials()
        var length = socklen_t(MemoryLayout<kvd_peer_credentials>.size)
        _ = try check(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length))
        var groups = [gid_t](repeating: 0, count: 64)
        while true {
            var size = socklen_t(groups.count * MemoryLayout<gid_t>.size)
            if getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, &groups, &size) == 0 {
                groups.removeLast(groups.count - Int(size) / MemoryLayout<gid_t>.size)
                break
            }
            let error = Errno.current
            // ERANGE: `size` says how much is needed. Any other failure (an old kernel): no
            // supplementary groups are known, so none grant anything.
            guard error == .outOfRange, Int(size) > groups.count * MemoryLayout<gid_t>.size else {
                groups = []
                break
            }
            groups = [gid_t](repeating: 0, count: Int(size) / MemoryLayout<gid_t>.size)
        }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid, groups: groups)
    }
}
