import KVSystem
import KVValues

/// The fold's side of the store: the domain files, the names a domain was read from that
/// its next write replaces (``noteStale(_:file:)``), and the history files (``history``).
///
/// Owned by the store's commit queue (or recovery), hence `@unchecked Sendable`; it is not
/// thread-safe. While a fold runs (``WriteAheadLog/fold``), the fold's thread owns it, and the
/// commit queue keeps to the ``WriteAheadLog`` until it has waited for the fold
/// (``Store/awaitFold()``), reading only ``HistoryFiles/exclusions`` and
/// ``HistoryFiles/options`` meanwhile. Every method that writes blocks on I/O.
final class StateFiles: @unchecked Sendable {
    let folder: StateFolder
    let history: HistoryFiles
    /// Files a domain was read from under another name than its own (an older kvd's
    /// `DOMAIN.json` of a long name): removed once the domain's own file is written.
    private var staleFiles: [Domain: String] = [:]

    /// The files of `folder`; history is kept as `historyOptions` say (nil: off).
    init(folder: StateFolder, historyOptions: StoreOptions?) {
        self.folder = folder
        self.history = HistoryFiles(folder: folder, options: historyOptions)
    }

    /// Records that `domain` was read from `name`, not its own file: `name` is removed once the
    /// domain's file is written (``fold(_:)``).
    func noteStale(_ domain: Domain, file name: String) {
        staleFiles[domain] = name
    }

    /// Appends the commits of `job.history` to the history files first (so a crash after them
    /// still has every entry: the log replays, and what the files hold is skipped), then
    /// writes each of `job.dirty`'s domain files as of `job.revision` (or removes it, for a
    /// domain that no longer exists), syncs the folder, and removes the stale files of those
    /// domains. A stale file goes only once its replacement is durable: a crash between leaves
    /// both, and recovery reads the newer. It may run on a thread of its own while the commit
    /// queue appends to the log.
    func fold(_ job: FoldJob) throws(SystemError) {
        try history.fold(job.history, domains: job.domains, revision: job.revision, logLength: job.logLength)
        let dirty = job.dirty.sorted()
        for domain in dirty {
            let name = StorageFormat.fileName(for: domain)
            if let state = job.domains[domain], !state.isEmpty {
                let bytes = DomainFile.encode(domain, state)
                try folder.fileSystem.replaceFile(
                    folder.path(name), temporary: folder.path("." + name + ".tmp"), with: bytes)
            } else {
                try folder.removeIfPresent(name)
            }
        }
        try folder.fileSystem.syncDirectory(folder.directory)
        for domain in dirty {
            if let stale = staleFiles.removeValue(forKey: domain) { try folder.removeIfPresent(stale) }
        }
    }

    /// The bytes `job` may write: its history lines, one at most per change
    /// (``HistoryRetention/lineBytesBound(lines:_:)``), and its domain files, counted at twice
    /// their values' bytes, for the indented format.
    func bytesNeeded(for job: FoldJob) -> Int64 {
        var needed: Int64 = 0
        if history.options != nil {
            let lines = job.history.values.reduce(0) { $0 + $1.reduce(0) { $0 + $1.changes.count } }
            needed += HistoryRetention.lineBytesBound(lines: lines, job.logLength)
        }
        for domain in job.dirty { needed += 2 * Int64(job.domains[domain]?.budgetBytes ?? 0) }
        return needed
    }
}
