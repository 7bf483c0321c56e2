import KVValues

extension Recovery {
    /// Replays the log on top of the loaded domain files and leaves it open for appending.
    /// A missing or unusable log is replaced by a fresh one; a damaged tail is cut off (after
    /// a backup if valid-looking records follow the damage).
    func recoverLog(into state: inout RecoveredState, replayedThrough: [Domain: Int64]) throws(StorageError) {
        let bytes: [UInt8]?
        do { bytes = try fileSystem.readFile(journal.logPath) } catch {
            throw .failure("cannot read the log \(journal.logPath): \(error)")
        }
        guard let bytes else { return try startFreshLog(state) }
        let scan: LogScan
        do {
            scan = try LogFormat.scan(bytes)
        } catch {
            switch error {
            case .newer(let version):
                throw .invalidStateDirectory("the log \(journal.logPath) was written by a newer kvd (formatVersion \(version)); use that kvd")
            case .damaged(let reason):
                try keepCopy(of: bytes, reason: reason)
                return try startFreshLog(state)
            }
        }
        replay(scan, into: &state, replayedThrough: replayedThrough)
        if let damage = scan.damage {
            if scan.dataAfterDamage { try keepCopy(of: bytes, reason: damage) }
            journal.log(.warning, "ignored the end of the log \(journal.logPath) from byte \(scan.validLength): \(damage) (never acknowledged)")
        }
        try openLog(validLength: Int64(scan.validLength), fileLength: Int64(bytes.count), damaged: scan.damage != nil,
                    tail: Journal.tail(of: bytes, length: scan.validLength))
    }

    private func replay(_ scan: LogScan, into state: inout RecoveredState, replayedThrough: [Domain: Int64]) {
        state.revision = max(state.revision, scan.baseRevision)
        for record in scan.records {
            state.revision = max(state.revision, record.revision)
            guard record.revision > replayedThrough[record.domain] ?? 0 else { continue }
            var domain = state.domains[record.domain] ?? DomainState()
            domain.apply(record.changes, at: record.revision)
            state.domains[record.domain] = domain.entries.isEmpty ? nil : domain
            journal.dirty.insert(record.domain)
        }
        if !scan.records.isEmpty {
            journal.log(.info, "replayed \(scan.records.count) records of the log \(journal.logPath) up to revision \(state.revision)")
        }
    }

    /// Opens the log for writing after its last valid record; cuts off a damaged tail durably
    /// first (reserved zeros after the last record are kept).
    private func openLog(validLength: Int64, fileLength: Int64, damaged: Bool, tail: [UInt8]) throws(StorageError) {
        do {
            journal.logLength = validLength
            journal.fileLength = fileLength
            let descriptor = try journal.openLog(tail: tail)
            if damaged {
                try fileSystem.truncate(descriptor, to: validLength)
                try fileSystem.fsync(descriptor)
                journal.fileLength = validLength
            }
        } catch {
            journal.releaseAll()
            throw .failure("cannot open the log \(journal.logPath): \(error)")
        }
    }

    private func startFreshLog(_ state: RecoveredState) throws(StorageError) {
        // The records of an unusable log are lost; the domains it touched are unknown, so the
        // files stay as they are until changed.
        do { try journal.resetLog(baseRevision: state.revision) } catch {
            journal.releaseAll()
            throw .failure("cannot create the log \(journal.logPath): \(error)")
        }
    }

    private func keepCopy(of bytes: [UInt8], reason: String) throws(StorageError) {
        do {
            let backup = try journal.backUp(bytes, of: StorageFormat.logFileName)
            journal.log(.warning, "the log \(journal.logPath) is damaged before its end (\(reason)); copied it to \(journal.path(backup))")
        } catch {
            journal.releaseAll()
            throw .failure("the log \(journal.logPath) is damaged (\(reason)) and could not be backed up: \(error)")
        }
    }
}
