import CLinux
import Glibc

/// The one seam through which the daemon's event loop and the client touch the operating
/// system, as `FileSystem` is the storage engine's: every socket, epoll, eventfd, signalfd,
/// read, write, close, accept and connect call, and the few path and process calls around them.
///
/// Each requirement is one C call (named at the end of its comment) and nothing more: it
/// returns what the call returns or throws its ``Errno``, and never retries. What to do about an
/// error — retry `EINTR`, read `EAGAIN` as "nothing now", accept again after `ECONNABORTED` —
/// is decided once, in this protocol's extension (`SystemCalls+Policy.swift`), for every
/// conformer. ``LinuxSystem`` is the real one; tests wrap it to inject `EINTR`, `EAGAIN`,
/// `EMFILE`, `ECONNRESET` or short writes into a real event loop and see it cope.
///
/// Conformers are thread-safe. A call through the protocol costs one indirect call and no
/// allocation (buffers are passed as pointers).
public protocol SystemCalls: Sendable {
    // MARK: descriptors

    /// Reads up to `buffer.count` bytes; 0 at end of stream. C: `read`.
    func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int
    /// Writes up to `bytes.count` bytes; returns how many. C: `write`.
    func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int
    /// Sends up to `bytes.count` bytes on a socket, with no `SIGPIPE` if the peer is gone.
    /// C: `send(..., MSG_NOSIGNAL)`.
    func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int
    /// Releases `fd`; never fails (Linux releases it even when `close` reports an error, so it
    /// must not be retried). C: `close`.
    func close(_ fd: Int32)
    /// Opens `path` read-only and close-on-exec. C: `open(path, O_RDONLY | O_CLOEXEC)`.
    func openReadOnly(_ path: String) throws(Errno) -> Int32
    /// The status flags of `fd`. C: `fcntl(fd, F_GETFL)`.
    func statusFlags(_ fd: Int32) throws(Errno) -> Int32
    /// Sets the status flags of `fd`. C: `fcntl(fd, F_SETFL, flags)`.
    func setStatusFlags(_ fd: Int32, _ flags: Int32) throws(Errno)
    /// The descriptors open in this process. C: `opendir`/`readdir` of `/proc/self/fd`.
    func openDescriptors() -> [Int32]

    // MARK: sockets

    /// A new Unix stream socket, close-on-exec, and non-blocking if asked.
    /// C: `socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC [| SOCK_NONBLOCK], 0)`.
    func socket(nonBlocking: Bool) throws(Errno) -> Int32
    /// C: `bind`.
    func bind(_ fd: Int32, to address: UnixSocketAddress) throws(Errno)
    /// C: `listen`.
    func listen(_ fd: Int32, backlog: Int32) throws(Errno)
    /// C: `connect`.
    func connect(_ fd: Int32, to address: UnixSocketAddress) throws(Errno)
    /// Accepts one connection, non-blocking and close-on-exec.
    /// C: `accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)`.
    func accept(_ listener: Int32) throws(Errno) -> Int32
    /// Who is at the other end of a connected Unix socket, as the kernel recorded it when the
    /// peer connected (not looked up later). C: `getsockopt(SO_PEERCRED)` and
    /// `getsockopt(SO_PEERGROUPS)`.
    func peerCredentials(_ fd: Int32) throws(Errno) -> PeerCredentials
    /// Shuts both directions. On a listening socket, later connects are refused while
    /// connections already queued can still be accepted. C: `shutdown(fd, SHUT_RDWR)`.
    func shutdown(_ fd: Int32) throws(Errno)

    // MARK: readiness and signals

    /// A new epoll instance, close-on-exec. C: `epoll_create1(EPOLL_CLOEXEC)`.
    func epollCreate() throws(Errno) -> Int32
    /// Adds, changes (`EPOLL_CTL_ADD`, `EPOLL_CTL_MOD`) or removes (`EPOLL_CTL_DEL`) the interest
    /// in `fd`, with `fd` as the event's data. C: `epoll_ctl`.
    func epollControl(_ epoll: Int32, _ operation: Int32, _ fd: Int32, events: UInt32) throws(Errno)
    /// Waits up to `timeoutMilliseconds` (-1: forever) for events; returns how many it stored.
    /// C: `epoll_wait`.
    func epollWait(_ epoll: Int32, into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32)
        throws(Errno) -> Int
    /// A non-blocking, close-on-exec event counter. C: `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`.
    func eventCounter() throws(Errno) -> Int32
    /// A non-blocking, close-on-exec descriptor that reads `signals` (which must be blocked).
    /// C: `signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC)`.
    func signalDescriptor(for signals: [Int32]) throws(Errno) -> Int32
    /// Blocks `signals` in the calling thread and the threads it starts later.
    /// C: `pthread_sigmask(SIG_BLOCK, ...)`.
    func blockSignals(_ signals: [Int32])
    /// Ignores `signal` in the whole process. C: `signal(signal, SIG_IGN)`.
    func ignoreSignal(_ signal: Int32)
    /// A non-blocking, close-on-exec inotify instance; its events are read with ``read(_:into:)``.
    /// C: `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
    func inotifyInit() throws(Errno) -> Int32
    /// Watches `path` for the events in `mask` (`IN_*`); returns the watch descriptor (the same
    /// one again for a path already watched). C: `inotify_add_watch`.
    func inotifyAddWatch(_ fd: Int32, _ path: String, mask: UInt32) throws(Errno) -> Int32

    // MARK: paths

    /// What is at `path`, following a final symbolic link or not. C: `stat` / `lstat`.
    func status(_ path: String, followingLinks: Bool) throws(Errno) -> PathStatus
    /// Creates one folder. C: `mkdir`.
    func makeDirectory(_ path: String, permissions: UInt32) throws(Errno)
    /// C: `unlink`.
    func unlink(_ path: String) throws(Errno)
    /// C: `rename`.
    func rename(_ source: String, to destination: String) throws(Errno)
    /// Sets the permission bits new files are created without; returns the previous mask.
    /// C: `umask`.
    func setCreationMask(_ mask: UInt32) -> UInt32

    // MARK: processes

    /// The path of the running executable, or `nil`. C: `readlink("/proc/self/exe")`.
    func executablePath() -> String?
    /// Whether `path` may be executed; the reason when not. C: `access(path, X_OK)`.
    func checkExecutable(_ path: String) throws(Errno)
    /// Starts `path` with `arguments` and exactly `environment`, in a new session, with standard
    /// input, output and error on `/dev/null` (an autostarted kvd outlives its client, and its
    /// log lines must not land in the user's terminal later). C: `posix_spawn` with
    /// `POSIX_SPAWN_SETSID`.
    func spawn(_ path: String, arguments: [String], environment: [String: String]) throws(Errno) -> pid_t
    /// The wait status of child `process` once it has exited; with `blocking: false`, `nil` while
    /// it runs. C: `waitpid`.
    func waitForExit(_ process: pid_t, blocking: Bool) throws(Errno) -> Int32?
    /// The id of the group named `name`, or `nil` if there is none. C: `getgrnam_r`.
    func groupID(named name: String) -> UInt32?
    /// The uid of the user named `name`, or `nil` if there is none. C: `getpwnam_r`.
    func userID(named name: String) -> UInt32?
    /// Sleeps the calling thread. C: `usleep`.
    func sleep(microseconds: UInt32)
}

/// What ``SystemCalls/status(_:followingLinks:)`` reports about a path.
public struct PathStatus: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case file, directory, symbolicLink, socket, other }

    public var kind: Kind
    /// The inode number (`st_ino`).
    public var inode: UInt64
    /// The owner's user id (`st_uid`).
    public var owner: UInt32
    /// The permission bits (`st_mode & 07777`).
    public var permissions: UInt32

    public init(kind: Kind, inode: UInt64, owner: UInt32, permissions: UInt32) {
        self.kind = kind
        self.inode = inode
        self.owner = owner
        self.permissions = permissions
    }
}

/// The peer of a Unix socket connection, from the kernel.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    /// The peer's primary group.
    public var gid: UInt32
    /// The peer's supplementary groups when it connected.
    public var groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32]) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Whether the peer is in group `gid` (its primary group or a supplementary one).
    public func isMember(of gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }
}
