import Glibc
import KVSystem
import KVValues

/// The commit thread's side of the store: the lock, the log file, and the domains that
/// compaction still owes to their files.
///
/// Confined to the store's commit queue (and to `Store.init` before that exists), hence
/// `@unchecked Sendable`; it is not thread-safe. Every method blocks on I/O. One exception:
/// while a fold runs (``fold``), the fold's thread owns the file side — the history state
/// (``histories``, ``loadedHistories``, ``historyStart``) and ``staleFiles`` — and the commit
/// queue keeps to the log side (the log, ``dirty``, ``carried``) until it has waited for the
/// fold (``Store/awaitFold()``). ``exclusions`` and ``historyOptions`` are only read meanwhile.
final class Journal: @unchecked Sendable {
    let fileSystem: any FileSystem
    let directory: String
    let log: @Sendable (LogLevel, String) -> Void
    var lockDescriptor: FileDescriptor?
    var logDescriptor: FileDescriptor?
    /// Length of the log up to the end of its last durable record: where the next goes.
    var logLength: Int64 = 0
    /// The log file's size: past ``logLength`` it holds zeros (space reserved ahead, so that a
    /// sync need not change the file's size) or, after a failed write, data being cut off.
    var fileLength: Int64 = 0
    /// Whether the log may be appended to as it is, or what must be done to it first
    /// (``repairIfNeeded(revision:)`` does it before the next append).
    var state: LogState = .intact
    /// Domains changed in the log since their files were last written.
    var dirty: Set<Domain> = []
    /// Files a domain was read from under another name than its own (an older kvd's
    /// `DOMAIN.json` of a long name): removed once the domain's own file is written.
    var staleFiles: [Domain: String] = [:]
    /// The log length at which the next compaction is due.
    var nextCompactionLength: Int64 = .max
    /// Bytes reserved ahead of the log's end (and written as zeros) when it grows past its file.
    var reservation: Int64 = 256 << 10
    /// The log's bytes from the start of its last, partly filled block up to ``logLength``:
    /// a commit rewrites that block with its records appended (see ``append(_:)``).
    var tail: [UInt8] = []
    /// The log descriptor bypasses the page cache (`O_DIRECT`).
    var direct = false
    /// How history is kept; nil when it is off.
    var historyOptions: StoreOptions?
    /// The layout of each loaded domain's history file (a domain without one has none yet).
    var histories: [Domain: HistoryFileInfo] = [:]
    /// The domains whose history file has been looked for (and read, if there was one) since
    /// the store opened: history files are read when first needed, not at start.
    var loadedHistories: Set<Domain> = []
    /// What the loaded history files hold, for readers.
    let historyCache = HistoryCache()
    /// The revision of each domain file when the store opened, and the log's base then: what
    /// a history file is checked against when it is loaded (``loadHistory(_:current:revision:recent:)``).
    var historyStart: [Domain: Int64] = [:]
    var historyLogBase: Int64 = 0
    /// The domains and keys that keep no history (``HistoryExclusions/fileName``).
    var exclusions = HistoryExclusions()
    /// Why the last ``append(_:)`` failed, if a file system call did.
    var appendFailure: SystemError?
    /// The fold running off the commit queue, if any (``Store/startFoldIfDue()``).
    var fold: FoldTask?
    /// While a fold runs: every record appended since it started. The log that replaces this
    /// one when it ends holds them after its header (``rotateLog(baseRevision:carrying:)``).
    var carried: [UInt8]?
    /// The log a ``LogState/needsReset`` repair writes: the base and records of the last
    /// replacement that may not be durable.
    var replacement: (base: Int64, records: [UInt8]) = (0, [])

    /// What the log needs before the next append. One value: a log whose replacement may not
    /// be durable is written anew, which also covers what a cut back would repair.
    enum LogState: Equatable {
        /// The log ends with its last durable record (and zeros reserved past it): append.
        case intact
        /// A write or sync of the log failed: it must be cut back to ``logLength`` and synced
        /// before anything else is appended (a later sync must not make the failed data durable).
        case needsRepair
        /// The log's replacement may not be durable: it must be written anew before appending.
        case needsReset
    }

    /// The block the log is written in. A commit writes whole blocks from the start of the
    /// partly filled last one, zero-padded, through an `O_DIRECT` descriptor where the file
    /// system takes one: a 100-byte change then writes 512 bytes, not a 4 KiB page.
    static let blockSize = 512

    init(fileSystem: any FileSystem, directory: String, log: @escaping @Sendable (LogLevel, String) -> Void) {
        self.fileSystem = fileSystem
        self.directory = directory
        self.log = log
    }

    var logPath: String { path(StorageFormat.logFileName) }

    func path(_ name: String) -> String { directory + "/" + name }

    /// Writes framed records after the last durable one and makes them durable with one
    /// `fdatasync`. On failure nothing is durable, the log is marked for repair, and
    /// `.failure` is thrown.
    func append(_ bytes: [UInt8]) throws(StorageError) {
        try repairIfNeeded()
        guard let descriptor = logDescriptor else { throw .failure("the log \(logPath) is not open") }
        let start = logLength - Int64(tail.count)
        let end = logLength + Int64(bytes.count)
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
            throw .failure("could not make the change durable in \(logPath): \(error)")
        }
        carried?.append(contentsOf: bytes)
        logLength = end
        let kept = Int(end % Int64(Self.blockSize))
        tail = Array(block[(Int(end - start) - kept)..<Int(end - start)])
    }

    /// `bytes` with zeros up to a whole number of blocks when writing directly.
    private static func padded(_ bytes: [UInt8], direct: Bool) -> [UInt8] {
        guard direct, bytes.count % blockSize != 0 else { return bytes }
        return bytes + [UInt8](repeating: 0, count: blockSize - bytes.count % blockSize)
    }

    /// Opens the log for writing (and returns it, as ``logDescriptor``), given its content from
    /// the last block boundary up to ``logLength``: with `O_DIRECT` if the file system takes it
    /// (checked by writing that block back as it is), else through the page cache.
    @discardableResult
    func openLog(tail: [UInt8]) throws(SystemError) -> FileDescriptor {
        self.tail = tail
        let start = logLength - Int64(tail.count)
        if let descriptor = try? fileSystem.open(logPath, [.write, .direct, .noFollow], permissions: 0o600) {
            let block = Self.padded(tail, direct: true)
            do {
                try fileSystem.write(descriptor, block, at: start)
                fileLength = max(fileLength, start + Int64(block.count))
                logDescriptor = descriptor
                direct = true
                return descriptor
            } catch {
                fileSystem.close(descriptor)
                log(.debug, "writing the log \(logPath) without O_DIRECT: \(error)")
            }
        }
        direct = false
        let descriptor = try fileSystem.open(logPath, [.write, .noFollow], permissions: 0o600)
        logDescriptor = descriptor
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
            return log(.debug, "could not reserve space in \(logPath): \(error)")
        }
        // From the first whole block past the file's end: the block holding it is the next write's.
        let from = (fileLength + Int64(Self.blockSize) - 1) / Int64(Self.blockSize) * Int64(Self.blockSize)
        if length > from {
            do { try fileSystem.write(descriptor, [UInt8](repeating: 0, count: Int(length - from)), at: from) } catch {
                log(.debug, "could not write the space reserved in \(logPath): \(error)")
            }
        }
        fileLength = length
    }

    /// Before appending after a failure: reopens the log, cuts it back to its last durable
    /// record and syncs it, or writes its replacement again if that may not be durable
    /// (``replacement``: nothing was appended since the failure).
    func repairIfNeeded() throws(StorageError) {
        switch state {
        case .intact: return
        case .needsReset:
            do { try rotateLog(baseRevision: replacement.base, carrying: replacement.records) } catch {
                throw .failure("could not rewrite the log \(logPath): \(error)")
            }
            return
        case .needsRepair: break
        }
        do {
            if let old = logDescriptor { fileSystem.close(old) }
            logDescriptor = nil
            let descriptor = try openLog(tail: tail)
            try fileSystem.truncate(descriptor, to: logLength)
            try fileSystem.fsync(descriptor)
            fileLength = logLength
        } catch {
            throw .failure("could not repair the log \(logPath) after a failed write: \(error)")
        }
        state = .intact
        log(.warning, "cut the log \(logPath) back to its last durable record after a failed write")
    }

    /// Replaces the log with one holding only a header. Only valid once every record is in
    /// the domain files. See ``rotateLog(baseRevision:carrying:)``.
    func resetLog(baseRevision: Int64) throws(SystemError) {
        try rotateLog(baseRevision: baseRevision, carrying: [])
    }

    /// Replaces the log with one holding a header of `baseRevision` and then `records` (framed
    /// records above it): temporary file, fsync, rename, fsync of the folder. Only valid once
    /// every change at or below `baseRevision` is in the domain files, and when `records` are
    /// every record of the log above it. If the temporary file cannot be written (a full disk),
    /// the log in place is untouched and stays as it was. From the rename on, until the
    /// folder's sync succeeds, the log ``LogState/needsReset`` (to this same replacement).
    /// The file is written up to a whole block (zeros past the records), so that the first
    /// direct write of its last block (``openLog(tail:)``) does not grow it: growing a file
    /// with a direct write waits for the file's metadata to be committed (milliseconds).
    func rotateLog(baseRevision: Int64, carrying records: [UInt8]) throws(SystemError) {
        var content = LogFormat.header(baseRevision: baseRevision) + records
        let end = content.count
        content += [UInt8](repeating: 0, count: (Self.blockSize - end % Self.blockSize) % Self.blockSize)
        let temporary = path("." + StorageFormat.logFileName + ".tmp")
        try fileSystem.writeTemporary(temporary, content)
        (state, replacement) = (.needsReset, (baseRevision, records))
        try fileSystem.moveTemporary(temporary, to: logPath)
        if let old = logDescriptor { fileSystem.close(old) }
        logDescriptor = nil
        logLength = Int64(end)
        fileLength = Int64(content.count)
        try openLog(tail: Self.tail(of: content, length: end))
        try fileSystem.syncDirectory(directory)
        (state, replacement) = (.intact, (0, []))
    }

    /// Whether the file system holding the log has room for what `job` writes (its history
    /// lines, one at most per change: ``lineBytesBound(lines:_:)``; its domain files: counted at
    /// twice their values' bytes, for the indented format) and for `growth` more bytes of log and
    /// its reservation. True when the system cannot say.
    func hasRoom(for job: FoldJob, growth: Int64) -> Bool {
        guard let descriptor = logDescriptor, let available = try? fileSystem.availableBytes(descriptor) else {
            return true
        }
        var needed = growth + reservation
        if historyOptions != nil {
            let lines = job.history.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.changes.count } }
            needed += Self.lineBytesBound(lines: lines, job.logLength)
        }
        for domain in job.dirty { needed += 2 * Int64(job.domains[domain]?.budgetBytes ?? 0) }
        return available >= needed
    }

    /// Folds everything into the files (``fold(_:)``), then resets the log. On failure the old
    /// log stays and still covers everything; the dirty set is kept for the next attempt. Not
    /// while a fold runs.
    func compact(_ domains: [Domain: DomainState], revision: Int64, history: [Domain: [RecentCommit]] = [:])
        throws(SystemError)
    {
        try fold(FoldJob(revision: revision, dirty: dirty, domains: domains, history: history, logLength: logLength))
        try resetLog(baseRevision: revision)
        dirty = []
    }

    /// Appends the commits of `job.history` to the history files first (so a crash after them
    /// still has every entry: the log replays, and what the files hold is skipped), then
    /// writes each of `job.dirty`'s domain files as of `job.revision` (or removes it, for a
    /// domain that no longer exists), syncs the folder, and removes the stale files of those
    /// domains. A stale file goes only once its replacement is durable: a crash between leaves
    /// both, and recovery reads the newer. Touches the file side only (see the type's
    /// comment): it may run on a thread of its own while the commit queue appends to the log.
    func fold(_ job: FoldJob) throws(SystemError) {
        try foldHistory(job.history, domains: job.domains, revision: job.revision, logLength: job.logLength)
        let dirty = job.dirty.sorted()
        for domain in dirty {
            let name = StorageFormat.fileName(for: domain)
            if let state = job.domains[domain], !state.isEmpty {
                let bytes = DomainFile.encode(domain, state)
                try fileSystem.replaceFile(path(name), temporary: path("." + name + ".tmp"), with: bytes)
            } else {
                try removeIfPresent(name)
            }
        }
        try fileSystem.syncDirectory(directory)
        for domain in dirty {
            if let stale = staleFiles.removeValue(forKey: domain) { try removeIfPresent(stale) }
        }
    }

    private func removeIfPresent(_ name: String) throws(SystemError) {
        do { try fileSystem.unlink(path(name)) } catch  where error.code == ENOENT {}
    }

    /// Renames `fileName` (whatever kind of entry it is) to a free backup name beside it,
    /// durably, and returns the backup's name.
    func moveAside(_ fileName: String) throws(SystemError) -> String {
        let stamp = StorageFormat.timestamp()
        var attempt = 1
        while exists(StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)) { attempt += 1 }
        let name = StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)
        try fileSystem.rename(path(fileName), to: path(name))
        try fileSystem.syncDirectory(directory)
        return name
    }

    /// Whether anything is named `name` in the folder (a link is not followed, a FIFO not
    /// waited on).
    private func exists(_ name: String) -> Bool {
        do {
            fileSystem.close(try fileSystem.open(path(name), [.noFollow, .nonBlocking], permissions: 0))
            return true
        } catch {
            return error.code != ENOENT
        }
    }

    /// Copies `bytes` (the content of `fileName`) to a new backup file beside it, durably,
    /// and returns the backup's name.
    func backUp(_ bytes: [UInt8], of fileName: String) throws(SystemError) -> String {
        let stamp = StorageFormat.timestamp()
        var attempt = 1
        while true {
            let name = StorageFormat.backupName(for: fileName, stamp: stamp, attempt: attempt)
            do {
                let descriptor = try fileSystem.open(
                    path(name), [.write, .create, .exclusive, .noFollow], permissions: 0o600)
                defer { fileSystem.close(descriptor) }
                try fileSystem.write(descriptor, bytes)
                try fileSystem.fsync(descriptor)
            } catch  where error.code == EEXIST {
                attempt += 1
                continue
            }
            try fileSystem.syncDirectory(directory)
            return name
        }
    }

    /// Closes the log and releases the lock. Idempotent.
    func releaseAll() {
        if let descriptor = logDescriptor { fileSystem.close(descriptor) }
        if let descriptor = lockDescriptor { fileSystem.close(descriptor) }
        logDescriptor = nil
        lockDescriptor = nil
    }
}
