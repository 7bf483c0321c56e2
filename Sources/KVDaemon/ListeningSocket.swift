import Glibc
import KVProtocol

/// The socket kvd listens on: handed over by systemd, or bound at a path by kvd itself.
struct ListeningSocket {
    let fds: [Int32]
    /// Given by systemd (never unlinked or closed for good by kvd: systemd keeps it).
    let activated: Bool
    /// Path and inode bound by kvd, removed on exit if still ours.
    private let bound: (path: String, inode: UInt64)?

    /// A socket-activation handover if there is one, else `path`, bound with mode 0600.
    ///
    /// The fallback folder (`/tmp/kvd-<uid>`) must pass the check all kvd programs share
    /// (``SocketFolder/prepare(forSocket:fallback:owner:)``): kvd never binds in a folder another
    /// user may control. A socket file with no listener behind it (left by a killed daemon) is
    /// replaced; a live one, or a file that is not a socket, is an error that says so.
    static func open(path: String, log: Logger) throws(DaemonError) -> ListeningSocket {
        let inherited = Systemd.listenFileDescriptors()
        if !inherited.isEmpty { return .handedOver(inherited) }
        do {
            try SocketFolder.prepare(forSocket: path)
        } catch {
            throw DaemonError(error.description)
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty, Paths.makeDirectory(folder) != 0 {
            throw DaemonError("cannot create the socket folder \(folder): \(String(cString: strerror(errno)))")
        }
        try removeStaleSocket(path, log: log)
        let fd: Int32
        do { fd = try listenPrivately(path) } catch { throw DaemonError("cannot listen on \(path): \(error)") }
        return bound(fd, at: path)
    }

    /// A socket listening at `path` with mode 0600.
    private static func listenPrivately(_ path: String) throws(SystemError) -> Int32 {
        let previous = umask(0o177)
        defer { umask(previous) }
        return try Sys.listenUnix(path)
    }

    /// kvd's own socket `fd`, bound at `path` (whose inode `close` checks before removing it).
    private static func bound(_ fd: Int32, at path: String) -> ListeningSocket {
        var status = stat()
        stat(path, &status)
        return ListeningSocket(fds: [fd], activated: false, bound: (path, UInt64(status.st_ino)))
    }

    private static func removeStaleSocket(_ path: String, log: Logger) throws(DaemonError) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw DaemonError("\(path) exists and is not a socket; remove it or choose another path with --socket")
        }
        do {
            let probe = try Sys.connectUnix(path)
            Sys.close(probe)
            throw DaemonError("another kvd is already listening on \(path); stop it first (or use --socket for a second one)")
        } catch let error as SystemError where error.errno == ECONNREFUSED {
            log.notice("removing stale socket \(path) left by a daemon that is gone")
            unlink(path)
        } catch let error as DaemonError {
            throw error
        } catch {
            throw DaemonError("cannot check the existing socket \(path): \(error)")
        }
    }

    /// Stops listening; removes the socket file if it is still the one kvd bound.
    func close() {
        guard !activated else { return }
        if let bound {
            var status = stat()
            if stat(bound.path, &status) == 0, UInt64(status.st_ino) == bound.inode { unlink(bound.path) }
        }
        for fd in fds { Sys.close(fd) }
    }
}

/// A reason the daemon cannot start, in one line for the log.
struct DaemonError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension ListeningSocket {
    /// Listening sockets handed over by systemd (`open` takes them from `LISTEN_FDS`).
    static func handedOver(_ fds: [Int32]) -> ListeningSocket {
        ListeningSocket(fds: fds, activated: true, bound: nil)
    }

    /// Makes new connections fail with `ECONNREFUSED` while those already queued can still be
    /// accepted, so none can be queued that kvd will not see. Does nothing to a socket from
    /// systemd: systemd shares it and keeps queueing clients for the next kvd.
    /// The corresponding C call is `shutdown(SHUT_RDWR)`.
    func refuseNewConnections() throws(SystemError) {
        guard !activated else { return }
        for fd in fds { try Sys.shutdown(fd) }
    }

    /// A fresh socket at the same path, bound beside it and renamed over it, so the path never
    /// lacks a listener; closes this one's descriptors on success. kvd's own socket only.
    func rebound() throws(DaemonError) -> ListeningSocket {
        guard let bound, !activated else { throw DaemonError("a socket from systemd cannot be bound again") }
        let fresh = bound.path + ".new"
        unlink(fresh)
        let fd: Int32
        do { fd = try Self.listenPrivately(fresh) } catch { throw DaemonError("cannot listen again on \(bound.path): \(error)") }
        guard rename(fresh, bound.path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(fresh)
            Sys.close(fd)
            throw DaemonError("cannot put a fresh socket at \(bound.path): \(reason)")
        }
        for old in fds { Sys.close(old) }
        return Self.bound(fd, at: bound.path)
    }
}
