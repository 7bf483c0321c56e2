import KVSystem
import KVValues

/// The commit queue's side of the store: the folder's lock, the log file, the domains the log
/// changed since their files were written (``dirty``), and the fold running off the queue
/// (``fold``). While a fold runs, commits go to `kvd.wal.next` (its base: the fold's revision)
/// and `kvd.wal` before it still holds the records the fold writes into the files; when the
/// fold ends, `kvd.wal.next` is renamed over `kvd.wal`.
///
/// Confined to the store's commit queue (and to `Store.init` before that exists), hence
/// `@unchecked Sendable`; it is not thread-safe. Every method that writes blocks on I/O. A
/// running fold touches none of it: it writes the files (``StateFiles``) on its own thread.
final class WriteAheadLog: @unchecked Sendable {
    let folder: StateFolder
    private var lockDescriptor: FileDescriptor?
    private var descriptor: FileDescriptor?
    /// The log file commits go to: ``StorageFormat/logFileName``, or
    /// ``StorageFormat/nextLogFileName`` while the log before it (``followsPrevious``) is kept.
    private(set) var name = StorageFormat.logFileName
    /// The base revision in the header of the log in use.
    private(set) var baseRevision: Int64 = 0
    /// A rename of the log whose folder sync failed: synced before the next log is started.
    private var entriesUnsynced = false
    /// Length of the log up to the end of its last durable record: where the next goes.
    private(set) var length: Int64 = 0
    /// The log file's size: past ``length`` it holds zeros (space reserved ahead, so that a
    /// sync need not change the file's size) or, after a failed write, data being cut off.
    private var fileLength: Int64 = 0
    /// Whether the log may be appended to as it is, or what must be done to it first
    /// (``repairIfNeeded()`` does it before the next append).
    private(set) var state: LogState = .intact
    /// Domains changed in the log since their files were last written.
    private(set) var dirty: Set<Domain> = []
    /// The log length past which the next compaction is due (``isCompactionDue``).
    private var nextCompactionLength: Int64
    /// The log length compaction is due at after one: ``StoreOptions/compactionLogBytes``.
    private let compactionBytes: Int64
    /// Bytes reserved ahead of the log's end (and written as zeros) when it grows past its file.
    private let reservation: Int64
    /// The log's bytes from the start of its last, partly filled block up to ``length``:
    /// a commit rewrites that block with its records appended (see ``append(_:)``).
    private var tail: [UInt8] = []
    /// The log descriptor bypasses the page cache (`O_DIRECT`).
    private(set) var direct = false
    /// Why the last ``append(_:)`` failed, if a file system call did.
    private(set) var appendFailure: SystemError?
    /// The fold running off the commit queue, if any (``Store/startFoldIfDue()``).
    private(set) var fold: FoldTask?
    /// The log a ``LogState/needsReset`` repair writes: the name, base and records of the last
    /// replacement that may not be durable.
    private var replacement: (name: String, base: Int64, records: [UInt8]) = (StorageFormat.logFileName, 0, [])

    /// What the log needs before the next append. One value: a log whose replacement may not
    /// be durable is written anew, which also covers what a cut back would repair.
    enum LogState: Equatable {
        /// The log ends with its last durable record (and zeros reserved past it): append.
        case intact
        /// A write or sync of the log failed: it must be cut back to ``length`` and synced
        /// before anything else is appended (a later sync must not make the failed data durable).
        case needsRepair
        /// The log's replacement may not be durable: it must be written anew before appending.
        case needsReset
    }

    /// The block the log is written in. A commit writes whole blocks from the start of the
    /// partly filled last one, zero-padded, through an `O_DIRECT` descriptor where the file
    /// system takes one: a 100-byte change then writes 512 bytes, not a 4 KiB page.
    static let blockSize = 512

    /// A log of `folder`, not open yet (``open(validLength:fileLength:tail:damaged:)`` or
    /// ``reset(baseRevision:)`` opens it): compaction is due once it holds `compactionBytes`;
    /// it reserves `reservation` bytes ahead when it grows.
    init(folder: StateFolder, compactionBytes: Int64, reservation: Int64) {
        self.folder = folder
        self.compactionBytes = compactionBytes
        self.nextCompactionLength = compactionBytes
        self.reservation = reservation
    }

    private var fileSystem: any FileSystem { folder.fileSystem }

    var path: String { folder.path(name) }

    /// Whether the log in use is `kvd.wal.next` and `kvd.wal` is kept before it: a fold of
    /// `kvd.wal` runs, or failed (then ``Store/compact()`` folds both).
    var followsPrevious: Bool { name == StorageFormat.nextLogFileName }

    /// Writes framed records after the last durable one and makes them durable with one
    /// `fdatasync`. On failure nothing is durable, the log is marked for repair, and
    /// `.failure` is thrown (``appendFailure`` says why).
    func append(_ bytes: [UInt8]) throws(StorageError) {
        try repairIfNeeded()
        guard let descriptor else { throw .failure("the log \(path) is not open") }
        let start = length - Int64(tail.count)
        let end = length + Int64(bytes.count)
        let block = Self.padded(tail + bytes, direct: direct)
        reserve(descriptor, for: start + Int64(block.count))
        do {
            try fileSystem.write(descriptor, block, at: start)
            fileLength = max(fileLength, start + Int64(block.count))
            try fileSystem.fdatasync(descriptor)
        } catch {
            appendFailure = error
            if state == .intact { state = .needsRepair }
            try? repairIfNeeded()
            throw .failure("could not make the change durable in \(path): \(error)")
        }
        length = end
        let kept = Int(end % Int64(Self.blockSize))
        tail = Array(block[(Int(end - start) - kept)..<Int(end - start)])
    }

    /// `bytes` with zeros up to a whole number of blocks when writing directly.
    private static func padded(_ bytes: [UInt8], direct: Bool) -> [UInt8] {
        guard direct, bytes.count % blockSize != 0 else { return bytes }
        return bytes + [UInt8](repeating: 0, count: blockSize - bytes.count % blockSize)
    }

    /// Opens the log found at recovery for appending after its last valid record
    /// (`validLength`; the file holds `fileLength` bytes, `tail` its content from the last block
    /// boundary up to `validLength`). A `damaged` tail is cut off durably first (reserved zeros
    /// after the last record are kept otherwise).
    func open(
        validLength: Int64, fileLength: Int64, tail: [UInt8], damaged: Bool, baseRevision: Int64,
        name: String = StorageFormat.logFileName
    ) throws(SystemError) {
        (self.name, self.baseRevision) = (name, baseRevision)
        length = validLength
        self.fileLength = fileLength
        let descriptor = try openForAppending(tail: tail)
        guard damaged else { return }
        try fileSystem.truncate(descriptor, to: validLength)
        try fileSystem.fsync(descriptor)
        self.fileLength = validLength
    }

    /// Opens the log for writing (and returns it, as ``descriptor``), given its content from
    /// the last block boundary up to ``length``: with `O_DIRECT` if the file system takes it
    /// (checked by writing that block back as it is), else through the page cache.
    @discardableResult
    private func openForAppending(tail: [UInt8]) throws(SystemError) -> FileDescriptor {
        self.tail = tail
        let start = length - Int64(tail.count)
        if let descriptor = try? fileSystem.open(path, [.write, .direct, .noFollow], permissions: 0o600) {
            let block = Self.padded(tail, direct: true)
            do {
                try fileSystem.write(descriptor, block, at: start)
                fileLength = max(fileLength, start + Int64(block.count))
                self.descriptor = descriptor
                direct = true
                return descriptor
            } catch {
                fileSystem.close(descriptor)
                folder.log(.debug, "writing the log \(path) without O_DIRECT: \(error)")
            }
        }
        direct = false
        let descriptor = try fileSystem.open(path, [.write, .noFollow], permissions: 0o600)
        self.descriptor = descriptor
        return descriptor
    }

    /// The last, partly filled block of `bytes` (a log's content up to its `length`).
    static func tail(of bytes: some Collection<UInt8>, length: Int) -> [UInt8] {
        Array(bytes.prefix(length).suffix(length % blockSize))
    }

    /// Reserves space ahead when the log would grow past its file, and writes zeros over it,
    /// so that syncs overwrite blocks already written instead of appending: a sync then writes
    /// data only. Allocated but unwritten blocks would not do: the first write into each turns
    /// it into a written one, a change of the file's metadata that the sync must commit too
    /// (batches of 8 KiB sync in half the time over written zeros on ext4). Best effort: where
    /// allocating fails (a full disk, a file system without `fallocate`) the write appends, and
    /// where writing the zeros fails the blocks stay allocated.
    private func reserve(_ descriptor: FileDescriptor, for end: Int64) {
        guard end > fileLength, reservation > 0 else { return }
        let length = end + reservation
        do {
            try fileSystem.preallocate(descriptor, to: length)
        } catch {
            return folder.log(.debug, "could not reserve space in \(path): \(error)")
        }
        // From the first whole block past the file's end: the block holding it is the next write's.
        let from = (fileLength + Int64(Self.blockSize) - 1) / Int64(Self.blockSize) * Int64(Self.blockSize)
        if length > from {
            do { try fileSystem.write(descriptor, [UInt8](repeating: 0, count: Int(length - from)), at: from) } catch {
                folder.log(.debug, "could not write the space reserved in \(path): \(error)")
            }
        }
        fileLength = length
    }

    /// Before appending after a failure: reopens the log, cuts it back to its last durable
    /// record and syncs it, or writes its replacement again if that may not be durable
    /// (``replacement``: nothing was appended since the failure).
    private func repairIfNeeded() throws(StorageError) {
        switch state {
        case .intact: return
        case .needsReset:
            do { try rotate(to: replacement.name, baseRevision: replacement.base, carrying: replacement.records) } catch
            {
                throw .failure("could not rewrite the log \(path): \(error)")
            }
            return
        case .needsRepair: break
        }
        do {
            if let old = descriptor { fileSystem.close(old) }
            descriptor = nil
            let descriptor = try openForAppending(tail: tail)
            try fileSystem.truncate(descriptor, to: length)
            try fileSystem.fsync(descriptor)
            fileLength = length
        } catch {
            throw .failure("could not repair the log \(path) after a failed write: \(error)")
        }
        state = .intact
        folder.log(.warning, "cut the log \(path) back to its last durable record after a failed write")
    }

    /// Replaces the log with one holding only a header. Only valid once every record is in
    /// the domain files. See ``rotate(to:baseRevision:carrying:)``.
    func reset(baseRevision: Int64) throws(SystemError) {
        try rotate(to: StorageFormat.logFileName, baseRevision: baseRevision, carrying: [])
    }

    /// Replaces the log `name` (and makes it the one in use) with one holding a header of
    /// `baseRevision` and then `records` (framed records above it): temporary file, fsync,
    /// rename, fsync of the folder. Only valid once every change at or below `baseRevision` is
    /// in the domain files (or, for `kvd.wal.next`, in `kvd.wal`), and when `records` are
    /// every record of the log above it. If the temporary file cannot be written (a full disk),
    /// the log in place is untouched and stays as it was. From the rename on, until the
    /// folder's sync succeeds, the log ``LogState/needsReset`` (to this same replacement).
    /// The file is written up to a whole block (zeros past the records), so that the first
    /// direct write of its last block does not grow it: growing a file with a direct write
    /// waits for the file's metadata to be committed (milliseconds).
    private func rotate(to name: String, baseRevision: Int64, carrying records: [UInt8]) throws(SystemError) {
        var content = LogFormat.header(baseRevision: baseRevision) + records
        let end = content.count
        content += [UInt8](repeating: 0, count: (Self.blockSize - end % Self.blockSize) % Self.blockSize)
        let temporary = folder.path("." + name + ".tmp")
        try fileSystem.writeTemporary(temporary, content)
        (state, replacement) = (.needsReset, (name, baseRevision, records))
        try fileSystem.moveTemporary(temporary, to: folder.path(name))
        if let old = descriptor { fileSystem.close(old) }
        descriptor = nil
        (self.name, self.baseRevision) = (name, baseRevision)
        length = Int64(end)
        fileLength = Int64(content.count)
        try openForAppending(tail: Self.tail(of: content, length: end))
        try fileSystem.syncDirectory(folder.directory)
        (state, replacement, entriesUnsynced) = (.intact, (name, 0, []), false)
    }

    /// Whether the file system holding the log has room for `bytes` more (what a fold writes)
    /// and for `growth` more bytes of log and its reservation. True when the system cannot say.
    func hasRoom(for bytes: Int64, growth: Int64) -> Bool {
        guard let descriptor, let available = try? fileSystem.availableBytes(descriptor) else { return true }
        return available >= growth + reservation + bytes
    }

    /// Folds everything into `files` (``StateFiles/fold(_:)``), then resets the log (`kvd.wal`)
    /// and removes `kvd.wal.next` if it was in use; the next compaction is due once the log holds
    /// ``compactionBytes``. On failure the old logs stay and still cover everything; the dirty
    /// set is kept for the next attempt. Not while a fold runs.
    ///
    /// A `kvd.wal.next` left by a crash before its removal is durable has a base at or below
    /// `kvd.wal`'s: recovery knows it for a stale one and removes it unread.
    func compact(
        into files: StateFiles, _ domains: [Domain: DomainState], revision: Int64,
        history: [Domain: [RecentCommit]] = [:]
    ) throws(SystemError) {
        precondition(fold == nil, "a fold runs")
        let hadNext = followsPrevious
        try files.fold(FoldJob(revision: revision, dirty: dirty, domains: domains, history: history, logLength: length))
        try reset(baseRevision: revision)
        dirty = []
        nextCompactionLength = compactionBytes
        if hadNext {
            try folder.removeIfPresent(StorageFormat.nextLogFileName)
            try fileSystem.syncDirectory(folder.directory)
        }
    }

    /// Records that the log changed `domains` since their files were written.
    func markDirty(_ domains: some Sequence<Domain>) {
        dirty.formUnion(domains)
    }

    /// Records that the log changed `domain` since its file was written.
    func markDirty(_ domain: Domain) {
        dirty.insert(domain)
    }

    /// Whether the log has grown past the length at which compaction is due.
    var isCompactionDue: Bool { length >= nextCompactionLength }

    /// After a fold that succeeded (every change up to the base of `kvd.wal.next` is in the
    /// synced files): renames `kvd.wal.next` over `kvd.wal`, which it no longer needs, and syncs
    /// the folder. If the rename fails both logs stay (and the next fold is a ``compact(into:_:revision:history:)``);
    /// if only the sync fails, it is made before the next log is started. Cheap: no data is written.
    func promoteNext() throws(SystemError) {
        guard followsPrevious else { return }
        try fileSystem.rename(path, to: folder.path(StorageFormat.logFileName))
        name = StorageFormat.logFileName
        do { try fileSystem.syncDirectory(folder.directory) } catch {
            entriesUnsynced = true
            throw error
        }
    }

    /// Puts the next fold off until the log has grown by another quarter of ``compactionBytes``,
    /// so that one that cannot be made is not tried again every batch.
    func postponeCompaction() {
        nextCompactionLength = length + max(compactionBytes / 4, 1)
    }

    /// Records `task` as the running fold of every dirty domain, up to `revision` (the last
    /// record of `kvd.wal`): starts `kvd.wal.next` of base `revision` (temporary file, fsync,
    /// rename, fsync of the folder), where the commits from now on go while the fold writes the
    /// files; the dirty set starts empty. If that fails nothing changed but, from the rename on,
    /// the log in use is `kvd.wal.next` (``rotate(to:baseRevision:carrying:)``), and no fold runs.
    /// Not while a fold runs or `kvd.wal.next` is in use.
    func startFold(_ task: FoldTask, revision: Int64) throws(SystemError) {
        precondition(fold == nil && !followsPrevious, "a fold runs already")
        if entriesUnsynced {
            // the last promotion's rename must not be undone under the new kvd.wal.next
            try fileSystem.syncDirectory(folder.directory)
            entriesUnsynced = false
        }
        try rotate(to: StorageFormat.nextLogFileName, baseRevision: revision, carrying: [])
        (fold, dirty) = (task, [])
        nextCompactionLength = compactionBytes
    }

    /// Forgets the running fold (``promoteNext()`` after one that succeeded).
    func endFold() {
        fold = nil
    }

    /// Records the lock on the folder, held through `descriptor` (released by ``releaseAll()``).
    func holdLock(_ descriptor: FileDescriptor) {
        lockDescriptor = descriptor
    }

    /// Closes the log and releases the lock. Idempotent.
    func releaseAll() {
        if let descriptor { fileSystem.close(descriptor) }
        if let lockDescriptor { fileSystem.close(lockDescriptor) }
        descriptor = nil
        lockDescriptor = nil
    }
}
