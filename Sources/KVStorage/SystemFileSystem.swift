import Glibc

/// The real ``FileSystem``: thin wrappers over Glibc. `EINTR` is retried in one place
/// (``retryingInterrupts(_:_:_:)``); every failure becomes a ``FileSystemError`` with `errno`.
/// Every descriptor is opened with `O_CLOEXEC`. Thread-safe (it has no state).
public struct SystemFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(FileSystemError)
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
        let raw = try retryingInterrupts("open", path) { Glibc.open(path, flags, mode_t(permissions)) }
        return FileDescriptor(rawValue: raw)
    }

    public func close(_ descriptor: FileDescriptor) {
        _ = Glibc.close(descriptor.rawValue)  // never retried: Linux frees the descriptor even on EINTR
    }

    public func read(_ descriptor: FileDescriptor, upTo count: Int) throws(FileSystemError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = try retryingInterrupts("read", nil) {
            buffer.withUnsafeMutableBytes { Glibc.read(descriptor.rawValue, $0.baseAddress, count) }
        }
        buffer.removeSubrange(got...)
        return buffer
    }

    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(FileSystemError) {
        var offset = 0
        while offset < bytes.count {
            let wrote = try retryingInterrupts("write", nil) {
                bytes.withUnsafeBytes {
                    Glibc.write(descriptor.rawValue, $0.baseAddress! + offset, bytes.count - offset)
                }
            }
            offset += wrote
        }
    }

    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(FileSystemError) {
        // O_DIRECT needs the memory aligned too; a copy costs nothing beside the sync that follows.
        let aligned = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 4096)
        defer { aligned.deallocate() }
        aligned.copyBytes(from: bytes)
        var done = 0
        while done < bytes.count {
            let wrote = try retryingInterrupts("pwrite", nil) {
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

    public func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(FileSystemError) {
        _ = try retryingInterrupts("fallocate", nil) { systemFallocate(descriptor.rawValue, 0, 0, off_t(length)) }
    }

    public func fsync(_ descriptor: FileDescriptor) throws(FileSystemError) {
        _ = try retryingInterrupts("fsync", nil) { Glibc.fsync(descriptor.rawValue) }
    }

    public func fdatasync(_ descriptor: FileDescriptor) throws(FileSystemError) {
        _ = try retryingInterrupts("fdatasync", nil) { Glibc.fdatasync(descriptor.rawValue) }
    }

    public func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(FileSystemError) {
        _ = try retryingInterrupts("ftruncate", nil) { Glibc.ftruncate(descriptor.rawValue, off_t(length)) }
    }

    public func size(_ descriptor: FileDescriptor) throws(FileSystemError) -> Int64 {
        var info = stat()
        _ = try retryingInterrupts("fstat", nil) { Glibc.fstat(descriptor.rawValue, &info) }
        return Int64(info.st_size)
    }

    public func status(_ descriptor: FileDescriptor) throws(FileSystemError) -> FileStatus {
        var info = stat()
        _ = try retryingInterrupts("fstat", nil) { Glibc.fstat(descriptor.rawValue, &info) }
        let kind: FileStatus.Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: kind = .unknown
        }
        return FileStatus(
            kind: kind, size: Int64(info.st_size), owner: info.st_uid, permissions: UInt32(info.st_mode & 0o7777))
    }

    public var effectiveUserID: UInt32 { geteuid() }

    public func lockExclusively(_ descriptor: FileDescriptor) throws(FileSystemError) {
        _ = try retryingInterrupts("flock", nil) { systemFlock(descriptor.rawValue, LOCK_EX | LOCK_NB) }
    }

    public func rename(_ source: String, to destination: String) throws(FileSystemError) {
        _ = try retryingInterrupts("rename", "\(source) to \(destination)") { Glibc.rename(source, destination) }
    }

    public func unlink(_ path: String) throws(FileSystemError) {
        _ = try retryingInterrupts("unlink", path) { Glibc.unlink(path) }
    }

    public func makeDirectory(_ path: String, permissions: UInt32) throws(FileSystemError) {
        _ = try retryingInterrupts("mkdir", path) { Glibc.mkdir(path, mode_t(permissions)) }
    }

    public func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        guard let stream = opendir(path) else { throw FileSystemError(operation: "opendir", path: path, code: errno) }
        defer { closedir(stream) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw FileSystemError(operation: "readdir", path: path, code: errno) }
                return names
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                String(cString: UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))
            }
            if name != ".", name != ".." { names.append(name) }
        }
    }

    /// Runs `call` until it does not fail with `EINTR`; a result of -1 throws with `errno`.
    private func retryingInterrupts<Result: BinaryInteger>(
        _ operation: String, _ path: String?, _ call: () -> Result
    ) throws(FileSystemError) -> Result {
        while true {
            let result = call()
            if result != -1 { return result }
            let code = errno
            if code != EINTR { throw FileSystemError(operation: operation, path: path, code: code) }
        }
    }
}

/// C `flock`, which Swift cannot name through Glibc: the `struct flock` of `fcntl` hides it.
@_silgen_name("flock")
private func systemFlock(_ descriptor: Int32, _ operation: Int32) -> Int32

/// C `fallocate` (Linux), which Glibc declares only under `_GNU_SOURCE`.
@_silgen_name("fallocate")
private func systemFallocate(_ descriptor: Int32, _ mode: Int32, _ offset: off_t, _ length: off_t) -> Int32
