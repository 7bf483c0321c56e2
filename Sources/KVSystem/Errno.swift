import Glibc

/// Why a system call failed: an `errno` value. The one errno type of every kvd module (the
/// ``SystemError`` carries one); the values the code acts on have
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
    /// `EINTR`: a signal arrived; the call is retried, by ``retryingInterrupts(_:)`` only.
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
    /// `ENOTSOCK`.
    public static let notASocket = Errno(rawValue: ENOTSOCK)
    /// `ENOPROTOOPT`: a socket option the kernel does not know (`SO_PEERPIDFD` before Linux 6.5).
    public static let protocolOptionUnknown = Errno(rawValue: ENOPROTOOPT)
    /// `ESRCH`: no such process (it exited).
    public static let noSuchProcess = Errno(rawValue: ESRCH)

    /// `ERANGE`: a buffer is too small.
    public static let outOfRange = Errno(rawValue: ERANGE)

    /// The system's message, like "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    /// Whether this means nobody listens at a socket path (no socket file, or nothing behind it).
    public var meansNobodyListens: Bool { self == .noSuchFileOrDirectory || self == .connectionRefused }
    /// The process or the system has no file descriptor left (`EMFILE`, `ENFILE`).
    public var isOutOfDescriptors: Bool { self == .tooManyOpenFiles || self == .tooManyOpenFilesInSystem }
}

/// Runs `body` until it does not fail with `EINTR` (a signal arrived before the call did
/// anything): the one place kvd retries an interrupted call. Every other failure is thrown as it
/// came. `close` must not go through it (Linux releases the descriptor even when `close` reports
/// `EINTR`), nor `connect` (an interrupted connect goes on in the background).
///
/// ```swift
/// let count = try retryingInterrupts { () throws(Errno) in try system.read(fd, into: buffer) }
/// ```
@inlinable
@inline(__always)
public func retryingInterrupts<T>(_ body: () throws(Errno) -> T) throws(Errno) -> T {
    while true {
        do throws(Errno) {
            return try body()
        } catch  where error == .interrupted {
            continue
        }
    }
}

/// A failed system call: which one, on what path if one is known, and why. The one error type
/// of kvd's system calls, thrown by ``SystemCalls``'s policies and by every ``FileSystem``.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C call, like `"accept4"` or `"fsync"`.
    public var call: String
    /// The path the call was given, when it was given one (`"a to b"` for a rename).
    public var path: String?
    public var errno: Errno

    public init(_ call: String, path: String? = nil, _ errno: Errno = .current) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    public init(_ call: String, path: String?, code: Int32) {
        self.init(call, path: path, Errno(rawValue: code))
    }

    /// The raw `errno` value.
    public var code: Int32 { errno.rawValue }

    /// Like "connect: Connection refused", or with a path "fsync of /x/kvd.wal: Input/output
    /// error". With `ELOOP` (a link met by ``OpenOptions/noFollow``) it says what to do about the
    /// link.
    public var description: String {
        let subject = path.map { "\(call) of \($0)" } ?? call
        let advice =
            errno == .tooManySymbolicLinks
            ? "; kvd does not follow symbolic links in its state folder: remove the link" : ""
        return "\(subject): \(errno)\(advice)"
    }
}
