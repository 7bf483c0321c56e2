import Glibc

/// An open file or folder, as the ``FileSystem`` that opened it numbers it.
public struct FileDescriptor: Sendable, Hashable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
}

/// How ``FileSystem/open(_:_:permissions:)`` opens a path. Without ``write`` it opens read-only.
public struct OpenOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Read and write (`O_RDWR`).
    public static let write = OpenOptions(rawValue: 1 << 0)
    /// Create the file if missing (`O_CREAT`).
    public static let create = OpenOptions(rawValue: 1 << 1)
    /// Fail with `EEXIST` if the file exists (`O_EXCL`, with ``create``).
    public static let exclusive = OpenOptions(rawValue: 1 << 2)
    /// Truncate to empty (`O_TRUNC`).
    public static let truncate = OpenOptions(rawValue: 1 << 3)
    /// Every write goes to the end (`O_APPEND`).
    public static let append = OpenOptions(rawValue: 1 << 4)
    /// The path must be a folder (`O_DIRECTORY`), opened to sync or lock it.
    public static let directory = OpenOptions(rawValue: 1 << 5)
    /// Writes bypass the page cache (`O_DIRECT`): each must cover whole blocks of the device
    /// (offset and length multiples of its logical block size), or it fails with `EINVAL`.
    public static let direct = OpenOptions(rawValue: 1 << 6)
}

/// A failed file-system call: the operation, the path if known, and the `errno` code.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var path: String?
    public var code: Int32

    public init(operation: String, path: String?, code: Int32) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    /// Like "fsync of /x/kvd.wal failed: Input/output error (errno 5)".
    public var description: String {
        let subject = path.map { "\(operation) of \($0)" } ?? operation
        return "\(subject) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
}

/// The one seam through which the storage engine touches the file system.
///
/// Every call the engine makes goes through a conformer, so a test double can record each call,
/// count bytes and syncs, inject errors (`EIO` on `fsync`) or simulate a crash at any point.
/// Methods are synchronous and may block on I/O; conformers must be thread-safe. Paths are
/// absolute or relative to the working folder, as given.
public protocol FileSystem: Sendable {
    /// Opens (and maybe creates, with mode `permissions`) a file or folder. C: `open`.
    func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(FileSystemError) -> FileDescriptor
    /// Closes a descriptor; errors are ignored (Linux releases it anyway). C: `close`.
    func close(_ descriptor: FileDescriptor)
    /// Reads up to `count` bytes at the current offset; empty at end of file. C: `read`.
    func read(_ descriptor: FileDescriptor, upTo count: Int) throws(FileSystemError) -> [UInt8]
    /// Writes all of `bytes` at the current offset (or the end, with ``OpenOptions/append``),
    /// or throws; a throw may leave a part written. C: `write`.
    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(FileSystemError)
    /// Writes all of `bytes` at `offset`, whatever the descriptor's offset or append mode, or
    /// throws; a throw may leave a part written. Works on ``OpenOptions/direct`` descriptors
    /// (the bytes are copied to aligned memory). C: `pwrite`.
    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(FileSystemError)
    /// Reserves disk space so the file is at least `length` bytes long; the added bytes read as
    /// zeros. Syncing data written into reserved space is cheaper than syncing an append (the
    /// file's size does not change). C: `fallocate` (mode 0).
    func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(FileSystemError)
    /// Makes the file's data and metadata durable. C: `fsync`.
    func fsync(_ descriptor: FileDescriptor) throws(FileSystemError)
    /// Makes the file's data (and its size) durable. C: `fdatasync`.
    func fdatasync(_ descriptor: FileDescriptor) throws(FileSystemError)
    /// Cuts or extends the file to `length` bytes. C: `ftruncate`.
    func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(FileSystemError)
    /// The file's size in bytes. C: `fstat`.
    func size(_ descriptor: FileDescriptor) throws(FileSystemError) -> Int64
    /// Takes an exclusive lock without waiting; `EWOULDBLOCK` if another holds it.
    /// C: `flock(LOCK_EX | LOCK_NB)`.
    func lockExclusively(_ descriptor: FileDescriptor) throws(FileSystemError)
    /// Atomically replaces `destination` with `source`. C: `rename`.
    func rename(_ source: String, to destination: String) throws(FileSystemError)
    /// Removes a file. C: `unlink`.
    func unlink(_ path: String) throws(FileSystemError)
    /// Creates a folder; `EEXIST` if something is there. C: `mkdir`.
    func makeDirectory(_ path: String, permissions: UInt32) throws(FileSystemError)
    /// The names in a folder, without `.` and `..`, in no order. C: `opendir`/`readdir`.
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String]
}

extension FileSystem {
    /// The whole content of the file at `path`, or `nil` if it does not exist.
    func readFile(_ path: String) throws(FileSystemError) -> [UInt8]? {
        let descriptor: FileDescriptor
        do {
            descriptor = try open(path, [], permissions: 0)
        } catch where error.code == ENOENT {
            return nil
        }
        defer { close(descriptor) }
        return try readAll(descriptor)
    }

    /// Reads from the current offset to the end of the file.
    func readAll(_ descriptor: FileDescriptor) throws(FileSystemError) -> [UInt8] {
        var content: [UInt8] = []
        while true {
            let chunk = try read(descriptor, upTo: 1 << 20)
            if chunk.isEmpty { return content }
            content.append(contentsOf: chunk)
        }
    }

    /// Writes a new file durably under a temporary name and renames it to `path`: open, write,
    /// fsync, close, rename. The caller syncs the folder. On failure the temporary file is
    /// removed and `path` is untouched.
    func replaceFile(_ path: String, temporary: String, with bytes: [UInt8]) throws(FileSystemError) {
        do {
            let descriptor = try open(temporary, [.write, .create, .truncate], permissions: 0o600)
            defer { close(descriptor) }
            try write(descriptor, bytes)
            try fsync(descriptor)
        } catch {
            try? unlink(temporary)
            throw error
        }
        do {
            try rename(temporary, to: path)
        } catch {
            try? unlink(temporary)
            throw error
        }
    }

    /// Makes the entries of the folder at `path` durable (after a rename, create or unlink).
    func syncDirectory(_ path: String) throws(FileSystemError) {
        let descriptor = try open(path, [.directory], permissions: 0)
        defer { close(descriptor) }
        try fsync(descriptor)
    }
}
