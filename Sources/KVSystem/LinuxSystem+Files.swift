import Glibc

/// The real ``FileSystem``: thin wrappers over Glibc. `EINTR` is retried by
/// ``retryingInterrupts(_:)``; every failure becomes a ``SystemError`` naming the call and the
/// path. Every descriptor is opened with `O_CLOEXEC`. Thread-safe (it has no state).
extension LinuxSystem {
    public func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError)
        -> FileDescriptor
    {
        var flags = O_CLOEXEC | (options.contains(.write) ? O_RDWR : O_RDONLY)
        if options.contains(.create) { flags |= O_CREAT }
        if options.contains(.exclusive) { flags |= O_EXCL }
        if options.contains(.truncate) { flags |= O_TRUNC }
        if options.contains(.append) { flags |= O_APPEND }
        if options.contains(.directory) { flags |= O_DIRECTORY }
        if options.contains(.direct) { flags |= Self.directFlag }
        if options.contains(.noFollow) { flags |= O_NOFOLLOW }
        if options.contains(.nonBlocking) { flags |= O_NONBLOCK }
        let raw = try calling("open", path) { Glibc.open(path, flags, mode_t(permissions)) }
        return FileDescriptor(rawValue: raw)
    }

    public func close(_ descriptor: FileDescriptor) {
        _ = Glibc.close(descriptor.rawValue)  // never retried: Linux frees the descriptor even on EINTR
    }

    public func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = try calling("read", nil) {
            buffer.withUnsafeMutableBytes { Glibc.read(descriptor.rawValue, $0.baseAddress, count) }
        }
        buffer.removeSubrange(got...)
        return buffer
    }

    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let wrote = try calling("write", nil) {
                bytes.withUnsafeBytes {
                    Glibc.write(descriptor.rawValue, $0.baseAddress! + offset, bytes.count - offset)
                }
            }
            offset += wrote
        }
    }

    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError) {
        // O_DIRECT needs the memory aligned too; a copy costs nothing beside the sync that follows.
        let aligned = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 4096)
        defer { aligned.deallocate() }
        aligned.copyBytes(from: bytes)
        var done = 0
        while done < bytes.count {
            let wrote = try calling("pwrite", nil) {
                Glibc.pwrite(
                    descriptor.rawValue, aligned.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            done += wrote
        }
    }

    /// `O_DIRECT`, which Glibc declares only under `_GNU_SOURCE`; its value depends on the
    /// architecture.
    #if arch(x86_64) || arch(i386)
        static let directFlag: Int32 = 0o40000
    #elseif arch(arm64) || arch(arm)
        static let directFlag: Int32 = 0o200000
    #else
        static let directFlag: Int32 = 0  // unknown here: buffered writes
    #endif

    public func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        _ = try calling("fallocate", nil) { systemFallocate(descriptor.rawValue, 0, 0, off_t(length)) }
    }

    public func fsync(_ descriptor: FileDescriptor) throws(SystemError) {
        _ = try calling("fsync", nil) { Glibc.fsync(descriptor.rawValue) }
    }

    public func fdatasync(_ descriptor: FileDescriptor) throws(SystemError) {
        _ = try calling("fdatasync", nil) { Glibc.fdatasync(descriptor.rawValue) }
    }

    public func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        _ = try calling("ftruncate", nil) { Glibc.ftruncate(descriptor.rawValue, off_t(length)) }
    }

    public func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
        var info = stat()
        _ = try calling("fstat", nil) { Glibc.fstat(descriptor.rawValue, &info) }
        return Int64(info.st_size)
    }

    public func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
        var info = statvfs()
        _ = try calling("fstatvfs", nil) { Glibc.fstatvfs(descriptor.rawValue, &info) }
        let (bytes, overflow) = Int64(info.f_bavail).multipliedReportingOverflow(by: Int64(info.f_frsize))
        return overflow ? .max : bytes
    }

    public func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus {
        var info = stat()
        _ = try calling("fstat", nil) { Glibc.fstat(descriptor.rawValue, &info) }
        return FileStatus(info)
    }

    public var effectiveUserID: UInt32 { geteuid() }

    public func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError) {
        _ = try calling("flock", nil) { systemFlock(descriptor.rawValue, LOCK_EX | LOCK_NB) }
    }

    public func rename(_ source: String, to destination: String) throws(SystemError) {
        _ = try calling("rename", "\(source) to \(destination)") { Glibc.rename(source, destination) }
    }

    public func unlink(_ path: String) throws(SystemError) {
        _ = try calling("unlink", path) { Glibc.unlink(path) }
    }

    public func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError) {
        _ = try calling("mkdir", path) { Glibc.mkdir(path, mode_t(permissions)) }
    }

    public func contentsOfDirectory(_ path: String) throws(SystemError) -> [String] {
        guard let stream = opendir(path) else { throw SystemError("opendir", path: path) }
        defer { closedir(stream) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw SystemError("readdir", path: path) }
                return names
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                String(cString: UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))
            }
            if name != ".", name != ".." { names.append(name) }
        }
    }

    /// Runs `call` until it does not fail with `EINTR` (``retryingInterrupts(_:)``); a result
    /// of -1 throws a ``SystemError`` naming `operation` and `path`.
    private func calling<Result: BinaryInteger>(
        _ operation: String, _ path: String?, _ call: () -> Result
    ) throws(SystemError) -> Result {
        do {
            return try retryingInterrupts { () throws(Errno) in try check(call()) }
        } catch {
            throw SystemError(operation, path: path, error)
        }
    }
}

/// C `flock`, which Swift cannot name through Glibc: the `struct flock` of `fcntl` hides it.
@_silgen_name("flock")
private func systemFlock(_ descriptor: Int32, _ operation: Int32) -> Int32

/// C `fallocate` (Linux), which Glibc declares only under `_GNU_SOURCE`.
@_silgen_name("fallocate")
private func systemFallocate(_ descriptor: Int32, _ mode: Int32, _ offset: off_t, _ length: off_t) -> Int32

extension FileStatus {
    /// The status `stat`, `lstat` or `fstat` filled in.
    init(_ info: stat) {
        let kind: Kind =
            switch info.st_mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFLNK: .symbolicLink
            case S_IFIFO: .fifo
            case S_IFSOCK: .socket
            case S_IFCHR: .characterDevice
            case S_IFBLK: .blockDevice
            default: .unknown
            }
        self.init(
            kind: kind, size: Int64(info.st_size), owner: info.st_uid, group: info.st_gid,
            permissions: UInt32(info.st_mode & 0o7777), inode: UInt64(info.st_ino),
            device: UInt64(info.st_dev))
    }
}
