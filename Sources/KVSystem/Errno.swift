import Glibc

/// Why a system call failed: an `errno` value. The one errno type of every kvd module (the
/// storage engine's `FileSystemError` carries one too); the values the code acts on have
/// names, so `EINTR` reads as ``interrupted``.
///
/// ```swift
/// catch let error where error.errno == .tooManyOpenFiles { refuseOneConnection() }
/// ```
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno`, right after a call failed.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// `ENOENT`.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `EINTR`: a signal arrived; the call is retried, in ``SystemCalls``'s policies only.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `EIO`.
    public static let ioError = Errno(rawValue: EIO)
    /// `EACCES`.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EEXIST`.
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `ENFILE`: the system is out of file descriptors.
    public static let tooManyOpenFilesInSystem = Errno(rawValue: ENFILE)
    /// `EMFILE`: the process is out of file descriptors.
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// `EPIPE`: the peer closed its receiving side.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `EAGAIN` (= `EWOULDBLOCK`): a non-blocking call would have to wait; a lock is held.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `ENAMETOOLONG`.
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `ELOOP`: a symbolic link where none may be (`O_NOFOLLOW`).
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    /// `ECONNABORTED`: a connection went away while it waited to be accepted.
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    /// `ECONNRESET`: the peer closed the connection with data unread.
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    /// `ECONNREFUSED`: nothing listens on the socket.
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)

    /// `ERANGE`: a buffer is too small.
    public static let outOfRange = Errno(rawValue: ERANGE)

    /// The system's message, like "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    /// Whether this means nobody listens at a socket path (no socket file, or nothing behind it).
    public var meansNobodyListens: Bool { self == .noSuchFileOrDirectory || self == .connectionRefused }
}

/// A failed system call: which one, and why. Thrown by ``SystemCalls``'s policies; the one
/// error type of the daemon's and the client's system calls.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C call, like `"accept4"`.
    public var call: String
    public var errno: Errno

    public init(_ call: String, _ errno: Errno = .current) {
        self.call = call
        self.errno = errno
    }

    /// Like "connect: Connection refused".
    public var description: String { "\(call): \(errno)" }
}
