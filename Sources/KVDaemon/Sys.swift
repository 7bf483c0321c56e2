import CLinux
import Glibc
import KVProtocol

/// A failed system call: the call's name and `errno`.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var call: String
    public var errno: Int32

    public init(_ call: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// The daemon's system calls, in one place: every socket, epoll, eventfd and signalfd call the
/// daemon makes goes through here. `EINTR` is retried here and nowhere else; failures become
/// ``SystemError``. All are thin, non-blocking unless their file descriptor is blocking.
enum Sys {
    /// Runs `body` until it does not fail with `EINTR`; -1 becomes a thrown ``SystemError``.
    @discardableResult
    static func retrying<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            if errno != EINTR { throw SystemError(call) }
        }
    }

    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)  // never retried: Linux releases the descriptor even on EINTR
    }

    /// Reads into `buffer`; returns 0 at end of stream, `nil` when nothing is available now.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            switch errno {
            case EINTR: continue
            case EAGAIN: return nil
            default: throw SystemError("read")
            }
        }
    }

    /// Writes what it can of `bytes`; returns the count written (0 when the socket is full).
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        while true {
            let count = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if count >= 0 { return count }
            switch errno {
            case EINTR: continue
            case EAGAIN: return 0
            default: throw SystemError("send")
            }
        }
    }

    /// Accepts one connection, non-blocking and close-on-exec; `nil` when none is waiting.
    static func accept(_ listener: Int32) throws(SystemError) -> Int32? {
        while true {
            let fd = CLinux.accept4(listener, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue))
            if fd >= 0 { return fd }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EAGAIN: return nil
            default: throw SystemError("accept4")
            }
        }
    }

    /// Shuts both directions of `fd`. On a listening socket, later connects are refused while
    /// connections already queued can still be accepted.
    static func shutdown(_ fd: Int32) throws(SystemError) {
        try retrying("shutdown") { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    static func setNonBlocking(_ fd: Int32) throws(SystemError) {
        let flags = try retrying("fcntl") { fcntl(fd, F_GETFL) }
        try retrying("fcntl") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    /// The address of `path`; fails with `ENAMETOOLONG` when the path does not fit.
    static func unixAddress(_ path: String) throws(SystemError) -> UnixSocketAddress {
        guard let address = UnixSocketAddress(path) else { throw SystemError("socket path", errno: ENAMETOOLONG) }
        return address
    }

    /// Connects a blocking Unix stream socket to `path` (used to probe for a live daemon).
    static func connectUnix(_ path: String) throws(SystemError) -> Int32 {
        let address = try unixAddress(path)
        let fd = try retrying("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        let result = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if result != 0 {
            let error = SystemError("connect")
            close(fd)
            throw error
        }
        return fd
    }

    /// Creates, binds and listens on a Unix stream socket at `path`, non-blocking.
    static func listenUnix(_ path: String, backlog: Int32 = 512) throws(SystemError) -> Int32 {
        let address = try unixAddress(path)
        let fd = try retrying("socket") {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }
        do throws(SystemError) {
            let bound = address.withSockaddr { bind(fd, $0, $1) }
            guard bound == 0 else { throw SystemError("bind") }
            try retrying("listen") { Glibc.listen(fd, backlog) }
            return fd
        } catch {
            close(fd)
            throw error
        }
    }
}
