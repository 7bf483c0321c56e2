import KVProtocol
import KVSystem

/// The socket kvd listens on: handed over by systemd, or bound at a path by kvd itself. Every
/// system call goes through ``system``.
struct ListeningSocket {
    let fds: [Int32]
    /// Given by systemd (never unlinked or closed for good by kvd: systemd keeps it).
    let activated: Bool
    /// Path and inode bound by kvd, removed on exit if still ours.
    private let bound: (path: String, inode: UInt64)?
    let system: any SystemCalls

    /// A socket-activation handover if there is one, else `path`, bound with mode 0600.
    ///
    /// The fallback folder (`/tmp/kvd-<uid>`) must pass the check all kvd programs share
    /// (``SocketFolder/prepare(forSocket:fallback:owner:)``): kvd never binds in a folder another
    /// user may control. Another missing folder is created with mode 0700. A socket file with no
    /// listener behind it (left by a killed daemon) is replaced; a live one, or a file that is not
    /// a socket, is an error that says so.
    /// With `shared` (the system instance), a folder kvd creates gets mode 0755 and the socket
    /// mode 0666: every user may connect, and the instance decides per caller what it may do.
    static func open(path: String, shared: Bool = false, log: Logger, system: any SystemCalls) throws(DaemonError)
        -> ListeningSocket
    {
        let inherited = Systemd.listenFileDescriptors()
        if !inherited.isEmpty { return .handedOver(inherited, system: system) }
        do {
            try SocketFolder.prepare(forSocket: path)
        } catch {
            throw DaemonError(error.description)
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty {
            do { try system.makeDirectories(folder, permissions: shared ? 0o755 : 0o700) } catch {
                throw DaemonError("cannot create the socket folder \(folder): \(error.errno)")
            }
        }
        try removeStaleSocket(path, log: log, system: system)
        let fd: Int32
        do { fd = try listen(path, mode: shared ? 0o666 : 0o600, system: system) } catch {
            throw DaemonError("cannot listen on \(path): \(error)")
        }
        return bound(fd, at: path, system: system)
    }

    /// Listening sockets handed over by systemd (`open` takes them from `LISTEN_FDS`).
    static func handedOver(_ fds: [Int32], system: any SystemCalls) -> ListeningSocket {
        ListeningSocket(fds: fds, activated: true, bound: nil, system: system)
    }

    /// A socket listening at `path` with `mode` (0600 or 0666).
    private static func listen(_ path: String, mode: UInt32, system: any SystemCalls) throws(SystemError) -> Int32 {
        let previous = system.setCreationMask(0o777 & ~mode)
        defer { _ = system.setCreationMask(previous) }
        return try system.listenUnix(path)
    }

    /// kvd's own socket `fd`, bound at `path` (whose inode `close` checks before removing it).
    private static func bound(_ fd: Int32, at path: String, system: any SystemCalls) -> ListeningSocket {
        let inode = (try? system.status(path, followingLinks: true).inode) ?? 0
        return ListeningSocket(fds: [fd], activated: false, bound: (path, inode), system: system)
    }

    private static func removeStaleSocket(_ path: String, log: Logger, system: any SystemCalls) throws(DaemonError) {
        guard let status = try? system.status(path, followingLinks: false) else { return }
        guard status.kind == .socket else {
            throw DaemonError("\(path) exists and is not a socket; remove it or choose another path with --socket")
        }
        let probe: Int32
        do {
            probe = try system.connectUnix(path)
        } catch  where error.errno == .connectionRefused {
            log.notice("removing stale socket \(path) left by a daemon that is gone")
            _ = try? system.unlink(path)
            return
        } catch {
            throw DaemonError("cannot check the existing socket \(path): \(error)")
        }
        system.close(probe)
        throw DaemonError(
            "another kvd is already listening on \(path); stop it first (or use --socket for a second one)")
    }

    /// Stops listening; removes the socket file if it is still the one kvd bound.
    func close() {
        guard !activated else { return }
        if let bound, let status = try? system.status(bound.path, followingLinks: true), status.inode == bound.inode {
            _ = try? system.unlink(bound.path)
        }
        for fd in fds { system.close(fd) }
    }

    /// Makes new connections fail with `ECONNREFUSED` while those already queued can still be
    /// accepted, so none can be queued that kvd will not see. Does nothing to a socket from
    /// systemd: systemd shares it and keeps queueing clients for the next kvd.
    /// The corresponding C call is `shutdown(SHUT_RDWR)`.
    func refuseNewConnections() throws(SystemError) {
        guard !activated else { return }
        for fd in fds { try system.retrying("shutdown") { () throws(Errno) in try system.shutdown(fd) } }
    }

    /// A fresh socket at the same path, bound beside it and renamed over it, so the path never
    /// lacks a listener; closes this one's descriptors on success. kvd's own socket only.
    func rebound() throws(DaemonError) -> ListeningSocket {
        guard let bound, !activated else { throw DaemonError("a socket from systemd cannot be bound again") }
        let fresh = bound.path + ".new"
        _ = try? system.unlink(fresh)
        let fd: Int32
        let mode = (try? system.status(bound.path, followingLinks: false).permissions) ?? 0o600
        do { fd = try Self.listen(fresh, mode: mode == 0o666 ? 0o666 : 0o600, system: system) } catch {
            throw DaemonError("cannot listen again on \(bound.path): \(error)")
        }
        do {
            try system.rename(fresh, to: bound.path)
        } catch {
            _ = try? system.unlink(fresh)
            system.close(fd)
            throw DaemonError("cannot put a fresh socket at \(bound.path): \(error)")
        }
        for old in fds { system.close(old) }
        return Self.bound(fd, at: bound.path, system: system)
    }
}

/// A reason the daemon cannot start, in one line for the log.
struct DaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
