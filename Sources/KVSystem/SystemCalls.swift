import CLinux
import Glibc

/// kvd's one OS seam: every socket, epoll, eventfd, signalfd, read, write, close, accept and
/// connect call of the daemon, the client, kvctl and the benchmark's programs, and the few path,
/// process and shared-library calls around them, on top of the file calls of ``FileSystem`` (which the storage engine sees alone). No
/// object file outside KVSystem calls the C library's system calls (`scripts/check-nm.sh`).
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
public protocol SystemCalls: FileSystem {
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
    /// A descriptor of the directory `path` (relative to `directory`, a descriptor this gave,
    /// when not nil), to find files in, never to read: a last symbolic link is followed, as
    /// `/proc/PID/root` leads to a process's root. C: `openat(O_PATH | O_DIRECTORY | O_CLOEXEC)`.
    func openDirectory(_ path: String, in directory: Int32?) throws(Errno) -> Int32
    /// The regular file `name` (one component) of `directory`, opened read-only; nil when `name`
    /// is anything else: a symbolic link is not followed, and a FIFO, a device or a directory
    /// never opened (an open that could block, or act). C: `openat(O_PATH | O_NOFOLLOW)`,
    /// `fstat`, then `open("/proc/self/fd/N", O_RDONLY | O_NONBLOCK | O_NOCTTY)` of that file.
    func openRegularFile(_ name: String, in directory: Int32) throws(Errno) -> Int32?
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
    /// A process descriptor (pidfd) of the process that connected on `fd`: it names that process
    /// and no other, even once it exits and its pid is given to another. Closed by the caller.
    /// Fails with `ENOPROTOOPT` before Linux 6.5. C: `getsockopt(SO_PEERPIDFD)`.
    func peerProcessDescriptor(_ fd: Int32) throws(Errno) -> Int32
    /// A process descriptor (pidfd) of whichever process has `pid` now: once the process that had
    /// it exited, another. Closed by the caller. C: `pidfd_open(pid, 0)`.
    func processDescriptor(_ pid: Int32) throws(Errno) -> Int32
    /// Whether the process of the pidfd `pidfd` is still running. C: `pidfd_send_signal(0)`.
    func processIsRunning(_ pidfd: Int32) -> Bool
    /// The id of the cgroup the process of `pidfd` is in now (the unified hierarchy's: its
    /// folder's inode there), nil when the kernel gives none; throws `ESRCH` once the process
    /// exited, so a success also says it still runs, and `ENOTTY` or `EINVAL` before Linux 6.13.
    /// C: `ioctl(pidfd, PIDFD_GET_INFO)` asking `PIDFD_INFO_CGROUPID`.
    func processCgroupID(_ pidfd: Int32) throws(Errno) -> UInt64?
    /// What kvd reads of a connection's peer at accept beyond its credentials, in one call, in
    /// this order: the program (`/proc/PID/exe`'s target, as ``linkTarget(_:)`` reads it), the
    /// root's identity (`/proc/PID/root`, as ``fileIdentity(_:in:)`` reads it), then the cgroup id
    /// of `pidfd`, a pidfd of that process (as ``processCgroupID(_:)`` reads it: asked last, it
    /// says the process still runs, so all before is its own). Nil when any of them cannot be
    /// read (those after it are not asked): the caller asks them one by one to learn why.
    /// C: `readlink`, `statx`, `ioctl(PIDFD_GET_INFO)`, in one C function.
    func peerProcessFacts(pid: Int32, pidfd: Int32) -> PeerProcessFacts?
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

    /// What is at `path`, following a final symbolic link or not (its `size` and `group` too).
    /// C: `stat` / `lstat`.
    func status(_ path: String, followingLinks: Bool) throws(Errno) -> FileStatus
    /// The absolute path of `path` with every symbolic link resolved. C: `realpath`.
    func resolvedPath(_ path: String) throws(Errno) -> String
    /// What the symbolic link at `path` holds, or nil when `path` is not a link (`EINVAL`).
    /// C: `readlink`.
    func linkTarget(_ path: String) throws(Errno) -> String?
    /// The device and inode of what `name` is, and the mount it is reached through (relative to
    /// `directory`, a descriptor ``openDirectory(_:in:)`` gave, when not nil; `directory` itself
    /// when `name` is empty; a last symbolic link followed, as `/proc/PID/root` leads to a
    /// process's root), as the kernel already holds them: no file system is asked (a FUSE daemon
    /// or a network server that never answers cannot make this wait). C: `statx(directory, name,
    /// AT_STATX_DONT_SYNC, 0)`.
    func fileIdentity(_ name: String, in directory: Int32?) throws(Errno) -> FileIdentity
    /// Whether `path` (following links) carries a POSIX access control list granting more than
    /// its mode bits say (`system.posix_acl_access`; for a folder `system.posix_acl_default`
    /// too). C: `getxattr`.
    func hasAccessControlList(_ path: String) -> Bool
    /// Gives an open file another owner and group. C: `fchown`.
    func changeOwner(_ descriptor: FileDescriptor, owner: UInt32, group: UInt32) throws(Errno)
    /// Sets an open file's permission bits. C: `fchmod`.
    func changePermissions(_ descriptor: FileDescriptor, _ permissions: UInt32) throws(Errno)
    /// Sets the permission bits new files are created without; returns the previous mask.
    /// C: `umask`.
    func setCreationMask(_ mask: UInt32) -> UInt32
    /// A pipe, both ends close-on-exec. C: `pipe2(O_CLOEXEC)`.
    func makePipe() throws(Errno) -> (read: Int32, write: Int32)

    // MARK: processes

    /// The path of the running executable, or `nil`. C: `readlink("/proc/self/exe")`.
    func executablePath() -> String?
    /// Whether `path` may be executed; the reason when not. C: `access(path, X_OK)`.
    func checkExecutable(_ path: String) throws(Errno)
    /// Starts `path` with `arguments` and exactly `environment`, in a new session, with standard
    /// input and output on `/dev/null`, and standard error on `standardError` (a descriptor the
    /// child gets as its 2), else on `/dev/null` too (an autostarted kvd outlives its client, and
    /// its log lines must not land in the user's terminal later). C: `posix_spawn` with
    /// `POSIX_SPAWN_SETSID` (and `posix_spawn_file_actions_adddup2` for `standardError`).
    func spawn(_ path: String, arguments: [String], environment: [String: String], standardError: Int32?)
        throws(Errno) -> pid_t
    /// Starts `path` with `arguments` as a helper of this process: in its session, with its
    /// environment, and with standard input, output and error on `input`, `output` and `error`
    /// (every other descriptor it inherits is close-on-exec). C: `posix_spawn` with
    /// `posix_spawn_file_actions_adddup2`.
    func spawn(_ path: String, arguments: [String], input: Int32, output: Int32, error: Int32) throws(Errno) -> pid_t
    /// The wait status of child `process` once it has exited; with `blocking: false`, `nil` while
    /// it runs. C: `waitpid`.
    func waitForExit(_ process: pid_t, blocking: Bool) throws(Errno) -> Int32?
    /// The id of the group named `name`, or `nil` if there is none. C: `getgrnam_r`.
    func groupID(named name: String) -> UInt32?
    /// The uid of the user named `name`, or `nil` if there is none. C: `getpwnam_r`.
    func userID(named name: String) -> UInt32?
    /// The home folder of user `uid` in the password database, or `nil`. C: `getpwuid_r`.
    func homeDirectory(ofUser uid: UInt32) -> String?
    /// The name of user `uid` in the password database, or `nil`. C: `getpwuid_r`.
    func userName(ofUser uid: UInt32) -> String?
    /// Every group user `uid` is in, its primary group included; empty when there is no such
    /// user. C: `getpwuid_r`, `getgrouplist`.
    func groups(ofUser uid: UInt32) -> Set<UInt32>
    /// The date and time `seconds` after 1970 (UTC) is in the local time zone. C: `localtime_r`.
    func localTime(_ seconds: Int64) -> LocalTime
    /// Whether `fd` is a terminal. C: `isatty`.
    func isTerminal(_ fd: Int32) -> Bool
    /// The real user id of this process. C: `getuid`.
    var userID: UInt32 { get }
    /// This process's id. C: `getpid`.
    var processID: Int32 { get }
    /// The processor time this process has used so far, in seconds: in user mode and in the
    /// kernel. C: `getrusage(RUSAGE_SELF)`.
    func processorSeconds() -> (user: Double, system: Double)

    // MARK: shared libraries

    /// Loads the shared library `name` (a file name, searched as the dynamic linker searches,
    /// or a path), resolving all its symbols now; throws the loader's reason when it cannot.
    /// The library stays loaded for the life of the process. C: `dlopen(name, RTLD_NOW)`,
    /// `dlerror`.
    func openLibrary(_ name: String) throws(LibraryError) -> SharedLibrary
    /// The address of the function or variable `name` in `library`, or `nil` when it has none.
    /// C: `dlsym`.
    func symbol(_ name: String, in library: SharedLibrary) -> UnsafeMutableRawPointer?
}

/// A shared library ``SystemCalls/openLibrary(_:)`` loaded (the handle `dlopen` returned).
public struct SharedLibrary: @unchecked Sendable {
    /// The handle of `dlopen`; the loader keeps it valid for the life of the process.
    public let handle: UnsafeMutableRawPointer

    public init(handle: UnsafeMutableRawPointer) { self.handle = handle }
}

/// Why ``SystemCalls/openLibrary(_:)`` could not load a library: the dynamic loader's message
/// (it sets no `errno`), like "libx.so.0: cannot open shared object file: No such file or
/// directory".
public struct LibraryError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
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

/// A date and time in the local time zone, as ``SystemCalls/localTime(_:)`` reports it.
public struct LocalTime: Sendable, Equatable {
    public var year: Int
    /// 1 to 12.
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

    public init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }
}

/// Which file a path leads to: its device and inode, equal for two paths to one file, and the
/// mount it was reached through (0: unknown), which differs between mount namespaces (each has
/// mounts of its own).
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64
    public var mount: UInt64

    public init(device: UInt64, inode: UInt64, mount: UInt64 = 0) {
        self.device = device
        self.inode = inode
        self.mount = mount
    }
}

/// What ``SystemCalls/peerProcessFacts(pid:pidfd:)`` reads of a peer's process, all of it before
/// it was seen still running.
public struct PeerProcessFacts: Sendable, Equatable {
    /// `/proc/PID/exe`'s target, whole (not yet bounded).
    public var program: String
    /// `/proc/PID/root`'s device, inode and mount.
    public var root: FileIdentity
    /// The id of its cgroup, nil when the kernel gives none.
    public var cgroupID: UInt64?

    public init(program: String, root: FileIdentity, cgroupID: UInt64?) {
        self.program = program
        self.root = root
        self.cgroupID = cgroupID
    }
}
