import Glibc

/// An open file or folder, as the ``FileSystem`` that opened it numbers it.
public struct FileDescriptor: Sendable, Hashable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }
}

/// How ``FileSystem/open(_:_:permissions:)`` opens a path. Without ``write`` it opens read-only.
public struct OpenOptions: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16

    public init(rawValue: UInt16) { self.rawValue = rawValue }

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
    /// Fail with `ELOOP` if the last component of the path is a symbolic link (`O_NOFOLLOW`):
    /// every file kvd writes in its state folder is opened so, never through a planted link.
    public static let noFollow = OpenOptions(rawValue: 1 << 7)
    /// Do not wait to open or read (`O_NONBLOCK`): opening a FIFO with no writer returns at once.
    public static let nonBlocking = OpenOptions(rawValue: 1 << 8)
}

/// What a path or an open descriptor refers to, as `stat`, `lstat` or `fstat` report: its kind,
/// size, owner, group, permissions and inode. The one status type of kvd's system calls.
public struct FileStatus: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case regular, directory, symbolicLink, fifo, socket, characterDevice, blockDevice, unknown
    }

    public var kind: Kind
    /// Size in bytes (meaningful for a regular file).
    public var size: Int64
    /// The owner's user id (`st_uid`).
    public var owner: UInt32
    /// The owning group's id (`st_gid`).
    public var group: UInt32
    /// The permission bits, with set-user-id, set-group-id and sticky (`st_mode & 07777`).
    public var permissions: UInt32
    /// The inode number (`st_ino`).
    public var inode: UInt64
    /// The device the inode is on (`st_dev`).
    public var device: UInt64

    public init(
        kind: Kind, size: Int64 = 0, owner: UInt32 = 0, group: UInt32 = 0, permissions: UInt32 = 0o600,
        inode: UInt64 = 0, device: UInt64 = 0
    ) {
        self.kind = kind
        self.size = size
        self.owner = owner
        self.group = group
        self.permissions = permissions
        self.inode = inode
        self.device = device
    }
}

extension FileStatus.Kind: CustomStringConvertible {
    /// Like "a directory", for messages.
    public var description: String {
        switch self {
        case .regular: "a regular file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .fifo: "a FIFO"
        case .socket: "a socket"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .unknown: "a file of an unknown kind"
        }
    }
}

/// The files half of kvd's one OS seam: every file and folder call of the storage engine, and of
/// the programs' own file reads and writes. ``SystemCalls`` (sockets, readiness, processes)
/// refines it, and ``LinuxSystem`` is the real conformer of both.
///
/// Every call goes through a conformer, so a test double can record each call, count bytes and
/// syncs, inject errors (`EIO` on `fsync`) or simulate a crash at any point (the storage tests'
/// simulated disk implements this protocol alone). Each requirement is its C call (named at the
/// end of its comment) with `EINTR` retried (``retryingInterrupts(_:)``) and a failure thrown as
/// a ``SystemError`` naming the call and the path. Methods are synchronous and may block on I/O;
/// conformers must be thread-safe. Paths are absolute or relative to the working folder, as given.
public protocol FileSystem: Sendable {
    /// Opens (and maybe creates, with mode `permissions`) a file or folder. C: `open`.
    func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError) -> FileDescriptor
    /// Closes a descriptor; errors are ignored (Linux releases it anyway). C: `close`.
    func close(_ descriptor: FileDescriptor)
    /// Reads up to `count` bytes at the current offset; empty at end of file. C: `read`.
    func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8]
    /// Writes all of `bytes` at the current offset (or the end, with ``OpenOptions/append``),
    /// or throws; a throw may leave a part written. C: `write`.
    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError)
    /// Writes all of `bytes` at `offset`, whatever the descriptor's offset or append mode, or
    /// throws; a throw may leave a part written. Works on ``OpenOptions/direct`` descriptors
    /// (the bytes are copied to aligned memory). C: `pwrite`.
    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError)
    /// Reserves disk space so the file is at least `length` bytes long; the added bytes read as
    /// zeros. Syncing data written into reserved space is cheaper than syncing an append (the
    /// file's size does not change). C: `fallocate` (mode 0).
    func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError)
    /// Makes the file's data and metadata durable. C: `fsync`.
    func fsync(_ descriptor: FileDescriptor) throws(SystemError)
    /// Makes the file's data (and its size) durable. C: `fdatasync`.
    func fdatasync(_ descriptor: FileDescriptor) throws(SystemError)
    /// Cuts or extends the file to `length` bytes. C: `ftruncate`.
    func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError)
    /// The file's size in bytes. C: `fstat`.
    func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64
    /// The kind, size, owner and permissions of an open file or folder. C: `fstat`.
    func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus
    /// The bytes this process may still write to the file system holding the open file (the
    /// free space an unprivileged user may use). C: `fstatvfs` (`f_bavail` × `f_frsize`).
    func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64
    /// The user this process acts as, who must own the state folder. C: `geteuid`.
    var effectiveUserID: UInt32 { get }
    /// Takes an exclusive lock without waiting; `EWOULDBLOCK` if another holds it.
    /// C: `flock(LOCK_EX | LOCK_NB)`.
    func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError)
    /// Atomically replaces `destination` with `source`. C: `rename`.
    func rename(_ source: String, to destination: String) throws(SystemError)
    /// Removes a file. C: `unlink`.
    func unlink(_ path: String) throws(SystemError)
    /// Creates a folder; `EEXIST` if something is there. C: `mkdir`.
    func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError)
    /// The names in a folder, without `.` and `..`, in no order. C: `opendir`/`readdir`.
    func contentsOfDirectory(_ path: String) throws(SystemError) -> [String]
    /// Sleeps the calling thread (a brief wait before trying a held lock again). C: `usleep`.
    func sleep(microseconds: UInt32)
    /// Gives the pages the allocator holds free back to the system, so they stop counting in
    /// the process's resident memory: the store calls it on its fold thread after a fold (whose
    /// buffers, and the commits it folded, were freed). Walks the whole heap under the
    /// allocator's locks: call it off any thread that must answer quickly. Part of this seam
    /// because the storage engine sees no other. C: `malloc_trim(0)`.
    func releaseFreedMemory()
}

/// Why ``FileSystem/readRegularFile(_:limit:)`` did not read a file.
public enum FileReadError: Error {
    /// The path is not a regular file (a symbolic link is not followed).
    case notRegular(FileStatus.Kind)
    /// The file holds more than the limit: `size` bytes.
    case tooLarge(size: Int64)
    case system(SystemError)
}

extension FileSystem {
    /// The whole content of the regular file at `path`, or `nil` if nothing is there. Never
    /// follows a symbolic link, never waits on a FIFO, and reads at most `limit` bytes: anything
    /// else throws ``FileReadError`` without reading. C: `open(O_NOFOLLOW|O_NONBLOCK)`, `fstat`.
    public func readRegularFile(_ path: String, limit: Int64) throws(FileReadError) -> [UInt8]? {
        let descriptor: FileDescriptor
        do {
            descriptor = try open(path, [.noFollow, .nonBlocking], permissions: 0)
        } catch  where error.code == ENOENT {
            return nil
        } catch  where error.code == ELOOP {
            throw .notRegular(.symbolicLink)
        } catch  where error.code == ENXIO {
            throw .notRegular(.socket)  // a Unix socket cannot be opened
        } catch {
            throw .system(error)
        }
        defer { close(descriptor) }
        let status: FileStatus
        do { status = try self.status(descriptor) } catch { throw .system(error) }
        guard status.kind == .regular else { throw .notRegular(status.kind) }
        guard status.size <= limit else { throw .tooLarge(size: status.size) }
        var content: [UInt8] = []
        content.reserveCapacity(Int(status.size))
        while true {
            // Reads sized to what is left (a read buffer is zeroed first: 1 MiB a file cost more than parsing it).
            let want = Int(min(max(status.size + 1 - Int64(content.count), 4096), 1 << 20))
            let chunk: [UInt8]
            do { chunk = try read(descriptor, upTo: want) } catch { throw .system(error) }
            if chunk.isEmpty { return content }
            content.append(contentsOf: chunk)
            guard content.count <= limit else { throw .tooLarge(size: Int64(content.count)) }  // it grew meanwhile
        }
    }

    /// Writes a new file durably under a temporary name and renames it to `path`: open, write,
    /// fsync, close, rename. The caller syncs the folder. On failure the temporary file is
    /// removed and `path` is untouched.
    ///
    /// The temporary file is always a new file (`O_CREAT|O_EXCL|O_NOFOLLOW`): whatever is at its
    /// name (left by a crash, or a link planted there) is unlinked, never written through.
    public func replaceFile(_ path: String, temporary: String, with bytes: [UInt8]) throws(SystemError) {
        try writeTemporary(temporary, bytes)
        try moveTemporary(temporary, to: path)
    }

    /// The first half of ``replaceFile(_:temporary:with:)``: writes `bytes` durably to a new
    /// file at `temporary` (open, write, fsync, close). On failure it is removed.
    public func writeTemporary(_ temporary: String, _ bytes: [UInt8]) throws(SystemError) {
        do {
            let descriptor = try createNew(temporary)
            defer { close(descriptor) }
            try write(descriptor, bytes)
            try fsync(descriptor)
        } catch {
            try? unlink(temporary)
            throw error
        }
    }

    /// The second half of ``replaceFile(_:temporary:with:)``: renames `temporary` to `path`;
    /// on failure `temporary` is removed.
    public func moveTemporary(_ temporary: String, to path: String) throws(SystemError) {
        do {
            try rename(temporary, to: path)
        } catch {
            try? unlink(temporary)
            throw error
        }
    }

    /// Creates `path` as a new file, mode 0600, for writing; if something is at that name,
    /// unlinks it (without following a link) and tries once more.
    private func createNew(_ path: String) throws(SystemError) -> FileDescriptor {
        let options: OpenOptions = [.write, .create, .exclusive, .noFollow]
        do {
            return try open(path, options, permissions: 0o600)
        } catch  where error.code == EEXIST {
            try unlink(path)
            return try open(path, options, permissions: 0o600)
        }
    }

    /// Makes the entries of the folder at `path` durable (after a rename, create or unlink).
    public func syncDirectory(_ path: String) throws(SystemError) {
        let descriptor = try open(path, [.directory], permissions: 0)
        defer { close(descriptor) }
        try fsync(descriptor)
    }
}
