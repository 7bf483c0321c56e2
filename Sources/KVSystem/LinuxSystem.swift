import CLinux
import Glibc

/// The real ``SystemCalls`` and ``FileSystem``: each ``SystemCalls`` method is its C call and
/// nothing else (no retry; the policies in `SystemCalls+Policy.swift` decide); the file calls
/// (`LinuxSystem+Files.swift`) retry `EINTR` and throw ``SystemError``. This file, that one and
/// `LinuxSystem+Processes.swift` are the only ones of kvd that call these C functions.
/// Thread-safe; stateless.
public struct LinuxSystem: SystemCalls {
    public init() {}

    /// -1 becomes the thrown `errno`.
    @inline(__always)
    func check<T: BinaryInteger>(_ result: T) throws(Errno) -> T {
        if result == -1 { throw Errno.current }
        return result
    }

    // MARK: descriptors

    public func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try check(Glibc.read(fd, buffer.baseAddress, buffer.count))
    }

    public func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try check(Glibc.write(fd, bytes.baseAddress, bytes.count))
    }

    public func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try check(Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL)))
    }

    public func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    public func openReadOnly(_ path: String) throws(Errno) -> Int32 {
        try check(Glibc.open(path, O_RDONLY | O_CLOEXEC))
    }

    public func openDirectory(_ path: String, in directory: Int32?) throws(Errno) -> Int32 {
        try check(openat(directory ?? AT_FDCWD, path, KVD_O_PATH | O_DIRECTORY | O_CLOEXEC))
    }

    public func openRegularFile(_ name: String, in directory: Int32) throws(Errno) -> Int32? {
        precondition(!name.contains("/") && name != "." && name != "..", "one component: \(name)")
        let found = try check(openat(directory, name, KVD_O_PATH | O_NOFOLLOW | O_CLOEXEC))
        defer { Glibc.close(found) }
        var status = stat()
        _ = try check(fstat(found, &status))
        guard status.st_mode & S_IFMT == S_IFREG else { return nil }
        return try check(Glibc.open("/proc/self/fd/\(found)", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC))
    }

    public func statusFlags(_ fd: Int32) throws(Errno) -> Int32 {
        try check(fcntl(fd, F_GETFL))
    }

    public func setStatusFlags(_ fd: Int32, _ flags: Int32) throws(Errno) {
        _ = try check(fcntl(fd, F_SETFL, flags))
    }

    public func openDescriptors() -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var descriptors: [Int32] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if let fd = Int32(name), fd != dirfd(directory) { descriptors.append(fd) }
        }
        return descriptors
    }

    // MARK: sockets

    public func socket(nonBlocking: Bool) throws(Errno) -> Int32 {
        var type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        if nonBlocking { type |= Int32(SOCK_NONBLOCK.rawValue) }
        return try check(Glibc.socket(AF_UNIX, type, 0))
    }

    public func bind(_ fd: Int32, to address: UnixSocketAddress) throws(Errno) {
        _ = try check(address.withSockaddr { Glibc.bind(fd, $0, $1) })
    }

    public func listen(_ fd: Int32, backlog: Int32) throws(Errno) {
        _ = try check(Glibc.listen(fd, backlog))
    }

    public func connect(_ fd: Int32, to address: UnixSocketAddress) throws(Errno) {
        _ = try check(address.withSockaddr { Glibc.connect(fd, $0, $1) })
    }

    public func accept(_ listener: Int32) throws(Errno) -> Int32 {
        try check(CLinux.accept4(listener, nil, nil, Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue)))
    }

    public func shutdown(_ fd: Int32) throws(Errno) {
        _ = try check(Glibc.shutdown(fd, Int32(SHUT_RDWR)))
    }

    // MARK: readiness and signals

    public func epollCreate() throws(Errno) -> Int32 {
        try check(epoll_create1(Int32(EPOLL_CLOEXEC)))
    }

    public func epollControl(_ epoll: Int32, _ operation: Int32, _ fd: Int32, events: UInt32) throws(Errno) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = try check(epoll_ctl(epoll, operation, fd, &event))
    }

    public func epollWait(
        _ epoll: Int32, into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32
    ) throws(Errno) -> Int {
        Int(try check(epoll_wait(epoll, events.baseAddress, Int32(events.count), timeoutMilliseconds)))
    }

    public func eventCounter() throws(Errno) -> Int32 {
        try check(eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)))
    }

    public func signalDescriptor(for signals: [Int32]) throws(Errno) -> Int32 {
        var mask = Self.signalSet(signals)
        return try check(signalfd(-1, &mask, Int32(SFD_NONBLOCK | SFD_CLOEXEC)))
    }

    public func inotifyInit() throws(Errno) -> Int32 {
        try check(inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)))
    }

    public func inotifyAddWatch(_ fd: Int32, _ path: String, mask: UInt32) throws(Errno) -> Int32 {
        try check(inotify_add_watch(fd, path, mask))
    }

    public func blockSignals(_ signals: [Int32]) {
        var mask = Self.signalSet(signals)
        pthread_sigmask(SIG_BLOCK, &mask, nil)
    }

    public func ignoreSignal(_ signal: Int32) {
        Glibc.signal(signal, SIG_IGN)
    }

    private static func signalSet(_ signals: [Int32]) -> sigset_t {
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in signals { sigaddset(&mask, signal) }
        return mask
    }

    // MARK: paths

    public func status(_ path: String, followingLinks: Bool) throws(Errno) -> FileStatus {
        var info = stat()
        let result: Int32 = followingLinks ? stat(path, &info) : lstat(path, &info)
        _ = try check(result)
        return FileStatus(info)
    }

    public func resolvedPath(_ path: String) throws(Errno) -> String {
        guard let resolved = realpath(path, nil) else { throw Errno.current }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    public func linkTarget(_ path: String) throws(Errno) -> String? {
        // Uninitialized, on the stack: kvd reads a link for each connection it accepts.
        let target = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(PATH_MAX)) { buffer in
            let count = readlink(path, buffer.baseAddress!, buffer.count)
            return count < 0
                ? Result.failure(Errno.current)
                : .success(String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self))
        }
        switch target {
        case .success(let text): return text
        case .failure(let error) where error.rawValue == EINVAL: return nil
        case .failure(let error): throw error
        }
    }

    public func fileIdentity(_ name: String, in directory: Int32?) throws(Errno) -> FileIdentity {
        var identity = FileIdentity(device: 0, inode: 0)
        _ = try check(
            kvd_file_identity(directory ?? AT_FDCWD, name, &identity.device, &identity.inode, &identity.mount))
        return identity
    }

    public func hasAccessControlList(_ path: String) -> Bool {
        // An ACL of only the three base entries is not stored as an attribute; any stored one
        // (size > 0) names a user or group beyond the mode bits, or a mask.
        let names: [String] = ["system.posix_acl_access", "system.posix_acl_default"]
        return names.contains { name in getxattr(path, name, nil, 0) > 0 }
    }

    public func changeOwner(_ descriptor: FileDescriptor, owner: UInt32, group: UInt32) throws(Errno) {
        _ = try check(fchown(descriptor.rawValue, owner, group))
    }

    public func changePermissions(_ descriptor: FileDescriptor, _ permissions: UInt32) throws(Errno) {
        _ = try check(fchmod(descriptor.rawValue, mode_t(permissions)))
    }

    public func setCreationMask(_ mask: UInt32) -> UInt32 {
        UInt32(umask(mode_t(mask)))
    }

    public func makePipe() throws(Errno) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        _ = try check(pipe2(&ends, O_CLOEXEC))
        return (ends[0], ends[1])
    }

    public func executablePath() -> String? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = buffer.withUnsafeMutableBytes { readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    public func checkExecutable(_ path: String) throws(Errno) {
        _ = try check(access(path, X_OK))
    }

    public func waitForExit(_ process: pid_t, blocking: Bool) throws(Errno) -> Int32? {
        var status: Int32 = 0
        let result = try check(waitpid(process, &status, blocking ? 0 : WNOHANG))
        return result == process ? status : nil
    }

    public func userID(named name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1 << 14)
        while true {
            let status = getpwnam_r(name, &entry, &buffer, buffer.count, &result)
            if status == ERANGE, buffer.count < 1 << 22 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            return status == 0 && result != nil ? entry.pw_uid : nil
        }
    }

    public func groupID(named name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 1 << 14)
        while true {
            let status = getgrnam_r(name, &entry, &buffer, buffer.count, &result)
            if status == ERANGE, buffer.count < 1 << 22 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            return status == 0 && result != nil ? entry.gr_gid : nil
        }
    }

    public func homeDirectory(ofUser uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1 << 14)
        while true {
            let status = getpwuid_r(uid, &entry, &buffer, buffer.count, &result)
            if status == ERANGE, buffer.count < 1 << 22 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            guard status == 0, result != nil, let directory = entry.pw_dir else { return nil }
            return String(cString: directory)
        }
    }

    public func userName(ofUser uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else { return nil }
        return String(cString: name)
    }

    public func groups(ofUser uid: UInt32) -> Set<UInt32> {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else { return [] }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: 64)
        if getgrouplist(name, entry.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, entry.pw_gid, &groups, &count) >= 0 else { return [entry.pw_gid] }
        }
        return Set(groups.prefix(Int(count)))
    }

    public func localTime(_ seconds: Int64) -> LocalTime {
        var time = time_t(seconds)
        var parts = tm()
        localtime_r(&time, &parts)
        return LocalTime(
            year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday),
            hour: Int(parts.tm_hour), minute: Int(parts.tm_min), second: Int(parts.tm_sec))
    }

    public func isTerminal(_ fd: Int32) -> Bool { isatty(fd) != 0 }

    public var userID: UInt32 { getuid() }

    public var processID: Int32 { getpid() }

    public func processorSeconds() -> (user: Double, system: Double) {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime))
    }

    public func openLibrary(_ name: String) throws(LibraryError) -> SharedLibrary {
        guard let handle = dlopen(name, RTLD_NOW) else {
            throw LibraryError(dlerror().map { String(cString: $0) } ?? "\(name) cannot be loaded")
        }
        return SharedLibrary(handle: handle)
    }

    public func symbol(_ name: String, in library: SharedLibrary) -> UnsafeMutableRawPointer? {
        dlsym(library.handle, name)
    }

    public func sleep(microseconds: UInt32) {
        usleep(microseconds)
    }

    public func releaseFreedMemory() {
        _ = malloc_trim(0)
    }
}
