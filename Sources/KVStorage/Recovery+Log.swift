import KVSystem
import KVValues

extension Recovery {
    /// Replays the log on top of the loaded domain files and leaves it open for appending.
    /// A missing or unusable log is replaced by a fresh one; a torn tail is cut off; records
    /// that cannot be used elsewhere are reported, the log is copied aside, the records after
    /// them are replayed, and the log is to be compacted at once (see ``StorageFormat``):
    /// returns true then. A `kvd.wal.next` (a fold's, ``recoverNextLog(into:replayedThrough:)``)
    /// is replayed after it, and is the log left open then: returns true too.
    func recoverLog(into state: inout RecoveredState, replayedThrough: [Domain: Int64]) throws(StorageError) -> Bool {
        guard let bytes = try readLog(StorageFormat.logFileName) else {
            try startFreshLog(state)
            state.logBase = state.revision
            return try recoverNextLog(into: &state, replayedThrough: replayedThrough)
        }
        guard let scan = try scanLog(bytes, StorageFormat.logFileName) else {
            try startFreshLog(state)
            state.logBase = state.revision
            return try recoverNextLog(into: &state, replayedThrough: replayedThrough)
        }
        state.logBase = scan.baseRevision
        replay(scan, of: wal.path, into: &state, replayedThrough: replayedThrough)
        try report(scan, of: bytes, StorageFormat.logFileName)
        let next = try recoverNextLog(into: &state, replayedThrough: replayedThrough)
        if !next {
            try openLog(
                validLength: Int64(scan.validLength), fileLength: Int64(bytes.count),
                damaged: scan.tornTail != nil || !scan.damage.isEmpty,
                tail: WriteAheadLog.tail(of: bytes, length: scan.validLength), base: scan.baseRevision)
        }
        return next || !scan.damage.isEmpty
    }

    /// Replays `kvd.wal.next` after `kvd.wal` (whose base is `state.logBase`) when a fold's
    /// crash or failure left it, opens it for appending (`kvd.wal` stays as it is, its records
    /// not in the files yet) and returns true: the store compacts both at once. One whose base
    /// is at or below `kvd.wal`'s is a compaction's leftover, already in the files: removed
    /// unread (false then), as is one without a readable header (nothing was acknowledged in it).
    private func recoverNextLog(into state: inout RecoveredState, replayedThrough: [Domain: Int64])
        throws(StorageError) -> Bool
    {
        let name = StorageFormat.nextLogFileName
        guard let bytes = try readLog(name) else { return false }
        guard let scan = try scanLog(bytes, name), scan.baseRevision > state.logBase else {
            do { try folder.removeIfPresent(name) } catch {
                throw .failure("cannot remove the stale log \(folder.path(name)): \(error)")
            }
            folder.log(.info, "removed \(folder.path(name)), a log already folded into the files")
            return false
        }
        replay(scan, of: folder.path(name), into: &state, replayedThrough: replayedThrough)
        try report(scan, of: bytes, name)
        try openLog(
            validLength: Int64(scan.validLength), fileLength: Int64(bytes.count),
            damaged: scan.tornTail != nil || !scan.damage.isEmpty,
            tail: WriteAheadLog.tail(of: bytes, length: scan.validLength), base: scan.baseRevision, name: name)
        return true
    }

    /// The scan of log `name`'s `bytes`; nil (after copying it aside) if its header is unusable.
    private func scanLog(_ bytes: [UInt8], _ name: String) throws(StorageError) -> LogScan? {
        do {
            return try LogFormat.scan(bytes)
        } catch {
            switch error {
            case .newer(let version):
                throw .invalidStateDirectory(
                    "the log \(folder.path(name)) was written by a newer kvd (formatVersion \(version)); use that kvd")
            case .damaged(let reason):
                try keepCopy(of: bytes, name, reason: reason)
                return nil
            }
        }
    }

    /// Logs the records `scan` found unusable (copying the log aside first) and a torn tail.
    private func report(_ scan: LogScan, of bytes: [UInt8], _ name: String) throws(StorageError) {
        let path = folder.path(name)
        if !scan.damage.isEmpty {
            try keepCopy(of: bytes, name, reason: "\(scan.damage.count) records cannot be used")
            for damage in scan.damage {
                folder.log(
                    .error,
                    "the log \(path): \(damage); that change is lost, the records after it are replayed")
            }
        }
        if let torn = scan.tornTail {
            folder.log(
                .warning,
                "ignored the end of the log \(path) from byte \(scan.validLength): \(torn) (never acknowledged)"
            )
        }
    }

    /// The log's bytes, or nil if there is none. Something other than a regular file at its
    /// name is renamed aside (then nil), except a symbolic link: it may lead to the log holding
    /// acknowledged writes, so kvd refuses to start rather than follow it or drop it.
    private func readLog(_ name: String) throws(StorageError) -> [UInt8]? {
        let path = folder.path(name)
        do {
            return try fileSystem.readRegularFile(path, limit: .max)
        } catch {
            switch error {
            case .notRegular(.symbolicLink):
                throw .invalidStateDirectory(
                    "the log \(path) is a symbolic link; kvd does not follow links in its state folder: replace the link with the file it leads to (or remove it to start a new log) and start kvd again"
                )
            case .notRegular(let kind):
                do {
                    let backup = try folder.moveAside(name)
                    folder.log(
                        .error,
                        "the log \(path) is \(kind), not a regular file; moved it to \(folder.path(backup)) and started a new log"
                    )
                    return nil
                } catch {
                    throw .failure(
                        "the log \(path) is \(kind), not a regular file, and could not be moved aside: \(error)")
                }
            case .tooLarge, .system:
                throw .failure("cannot read the log \(path): \(error)")
            }
        }
    }

    /// Replays `scan`'s records; the store revision becomes at least that of every record,
    /// used or not.
    private func replay(
        _ scan: LogScan, of path: String, into state: inout RecoveredState, replayedThrough: [Domain: Int64]
    ) {
        state.revision = max(state.revision, scan.highestRevision)
        var line: [UInt8] = []
        var entryBytes: [Int] = []
        for record in scan.records {
            line.removeAll(keepingCapacity: true)
            entryBytes.removeAll(keepingCapacity: true)
            LogFormat.append(record, to: &line, entryBytes: &entryBytes)  // measures the changes as a commit does
            var partStart = 0
            for part in record.parts {
                let sizes = entryBytes[partStart..<(partStart + part.changes.count)]
                partStart += part.changes.count
                if files.history.options != nil {
                    let changes = files.history.exclusions.filter(part.changes, of: part.domain)
                    if !changes.isEmpty {
                        state.recent[part.domain, default: []].append(
                            RecentCommit(
                                revision: record.revision, time: record.time, writer: record.writer, changes: changes))
                    }
                }
                guard record.revision > replayedThrough[part.domain] ?? 0 else { continue }
                let current = state.domains[part.domain]
                let budget = DomainState.budgetBytes(current?.budgetBytes ?? 0, after: part.changes, entryBytes: sizes)
                { current?.entries[$0] }
                let emptied = state.domains[part.domain, default: DomainState()]  // in place: no copy of the domain
                    .apply(part.changes, entryBytes: sizes, budgetBytes: budget, at: record.revision)
                if emptied { state.domains[part.domain] = nil }
                wal.markDirty(part.domain)
            }
        }
        if !scan.records.isEmpty {
            folder.log(
                .info,
                "replayed \(scan.records.count) records of the log \(path) up to revision \(state.revision)")
        }
    }

    /// Writes the domains out and starts a new log, so that damage kept aside is reported
    /// once, and a fold's two logs become one; if that fails, the logs stay in use (damage is
    /// reported again next time; two logs are compacted at the next fold).
    func compactAfterDamage(_ state: RecoveredState) {
        do {
            try wal.compact(into: files, state.domains, revision: state.revision, history: state.recent)
        } catch {
            folder.log(
                .error,
                "could not compact the log \(wal.path) at once, it stays in use (damage in it will be reported again): \(error)"
            )
        }
    }

    /// Opens the log for writing after its last valid record; cuts off a damaged tail durably
    /// first (reserved zeros after the last record are kept).
    private func openLog(
        validLength: Int64, fileLength: Int64, damaged: Bool, tail: [UInt8], base: Int64,
        name: String = StorageFormat.logFileName
    ) throws(StorageError) {
        do {
            try wal.open(
                validLength: validLength, fileLength: fileLength, tail: tail, damaged: damaged, baseRevision: base,
                name: name)
        } catch {
            wal.releaseAll()
            throw .failure("cannot open the log \(wal.path): \(error)")
        }
    }

    private func startFreshLog(_ state: RecoveredState) throws(StorageError) {
        // The records of an unusable log are lost; the domains it touched are unknown, so the
        // files stay as they are until changed.
        do { try wal.reset(baseRevision: state.revision) } catch {
            wal.releaseAll()
            throw .failure("cannot create the log \(wal.path): \(error)")
        }
    }

    private func keepCopy(of bytes: [UInt8], _ name: String, reason: String) throws(StorageError) {
        let path = folder.path(name)
        do {
            let backup = try folder.backUp(bytes, of: name)
            folder.log(
                .warning, "the log \(path) is damaged (\(reason)); copied it to \(folder.path(backup))")
        } catch {
            wal.releaseAll()
            throw .failure("the log \(path) is damaged (\(reason)) and could not be backed up: \(error)")
        }
    }
}
