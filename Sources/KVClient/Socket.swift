import Glibc
import KVProtocol

/// The system calls of the client, in one place: a Unix stream socket's connect, send and
/// receive, with `EINTR` retried here and nowhere else.
enum Socket {
    /// Connects to the Unix socket at `path`; returns the descriptor, or the `errno` of failure.
    ///
    /// The corresponding C calls are `socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)` and `connect`.
    static func connect(path: String) -> Result<Int32, SystemError> {
        guard !path.isEmpty, !path.utf8.contains(0), let address = UnixSocketAddress(path) else {
            return .failure(SystemError(code: ENAMETOOLONG, detail: "a socket path must be 1 to \(UnixSocketAddress.maxPathBytes) bytes"))
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(SystemError(code: errno)) }
        let result = address.withSockaddr { Glibc.connect(descriptor, $0, $1) }
        guard result == 0 else {
            let code = errno
            close(descriptor)
            return .failure(SystemError(code: code))
        }
        return .success(descriptor)
    }

    /// Sends all of `bytes`, without `SIGPIPE` on a closed peer.
    ///
    /// The corresponding C call is `send(..., MSG_NOSIGNAL)`.
    static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> SystemError? {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                return SystemError(code: errno)
            }
            offset += sent
        }
        return nil
    }

    /// Receives up to `buffer.count` bytes; 0 means the peer closed the connection.
    ///
    /// The corresponding C call is `recv`.
    static func receive(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, SystemError> {
        while true {
            let count = recv(descriptor, buffer.baseAddress, buffer.count, 0)
            if count >= 0 { return .success(count) }
            if errno != EINTR { return .failure(SystemError(code: errno)) }
        }
    }
}

/// A failed system call: its `errno`, and an optional more specific word.
struct SystemError: Error, Sendable {
    var code: Int32
    var detail: String?

    var text: String { detail ?? errnoText(code) }

    /// Whether this means nobody listens at the path (the case for autostart).
    var meansNobodyListens: Bool { code == ENOENT || code == ECONNREFUSED }
}
