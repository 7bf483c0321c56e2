import Dispatch
import KVSystem
import KVValues
import Synchronization

/// A domain's history as ``Store/history(_:key:limit:before:)`` gives it.
public struct HistoryPage: Sendable, Equatable {
    /// Newest first.
    public var entries: [HistoryEntry]
    /// The oldest revision whose state can be rebuilt (``Store/history(_:at:)``); 0 when the
    /// domain's whole history is kept.
    public var oldestRevision: Int64
}

/// Why a history read failed.
public enum HistoryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// History is off (`--history-keep 0 --history-days 0`).
    case off
    /// The revision asked for is older than what is kept: states from `oldestRevision` on can
    /// be rebuilt.
    case truncated(Domain, oldestRevision: Int64)
    /// The revision asked for is newer than the store's.
    case future(current: Int64)
    /// The history file cannot be read (it is set aside at the next start or fold).
    case failure(String)

    public var description: String {
        switch self {
        case .off: "history is off (kvd --history-keep 0 --history-days 0)"
        case .truncated(let domain, let oldest): "the history of domain \(domain) is kept from revision \(oldest) on"
        case .future(let current): "the store is at revision \(current), nothing newer exists"
        case .failure(let reason): "history cannot be read: \(reason)"
        }
    }
}

extension Store {
    /// Every kept change of `domain` (of `key` only, if given), newest first, at most `limit`,
    /// and only those older than `before` if given (the next page of a reply that was cut):
    /// every committed change, and nothing uncommitted (changes still in the log come from
    /// memory, older ones from the history file, held in memory once read). The first call for
    /// a domain whose history file is not loaded yet waits for the commit queue to read it
    /// (blocking on that I/O, bounded by retention); later calls never block. Thread-safe; not
    /// on the commit queue (from a completion).
    ///
    /// - Throws: `.off`, or `.failure` if the history file cannot be read.
    public func history(_ domain: Domain, key: Key? = nil, limit: Int? = nil, before: Int64? = nil) throws(HistoryError)
        -> HistoryPage
    {
        let (kept, fresh) = try keptHistory(domain)
        let (limit, before) = (limit ?? .max, before ?? .max)
        var selected: [HistoryEntry] = []
        for entries in [fresh, kept.entries] {
            for entry in entries.reversed() where entry.revision < before && (key == nil || entry.key == key) {
                guard selected.count < limit else { break }
                selected.append(entry)
            }
        }
        return HistoryPage(entries: selected, oldestRevision: kept.since)
    }

    /// What `domain` held at `revision`: for each key that had a value then (only `key`, if
    /// given), the entry that set it. Blocks like ``history(_:key:limit:before:)``.
    ///
    /// - Throws: `.truncated` for a revision older than what is kept, `.future` for one newer
    ///   than the store's, `.off`, `.failure`.
    public func history(_ domain: Domain, at revision: Int64, key: Key? = nil) throws(HistoryError) -> [HistoryEntry] {
        let current = self.revision
        guard revision <= current else { throw .future(current: current) }
        let (kept, fresh) = try keptHistory(domain)
        guard revision >= kept.since else { throw .truncated(domain, oldestRevision: kept.since) }
        let state = HistoryRetention.state(of: kept.entries + fresh, at: revision)
        return state.values.filter { key == nil || $0.key == key }.sorted { $0.key < $1.key }
    }

    /// The domain's history file as held in memory (loaded first if need be), and the entries
    /// of the log's commits it does not hold yet: together, normalized, oldest first. The log's
    /// commits are read first: a fold between the two is then seen in the file, and what both
    /// hold is taken once.
    private func keptHistory(_ domain: Domain) throws(HistoryError) -> (KeptHistory, [HistoryEntry]) {
        guard options.keepsHistory else { throw .off }
        let recent = state.withLock { $0.recent[domain] } ?? []
        let kept: KeptHistory
        if let cached = files.history.cache[domain] { kept = cached } else { kept = try loadHistory(domain) }
        return (kept, recent.isEmpty ? [] : kept.mark.fresh(recent))
    }

    /// Loads `domain`'s history file on the commit queue, which owns the files. Blocks until
    /// the queue has finished what it was doing, and on the read.
    private func loadHistory(_ domain: Domain) throws(HistoryError) -> KeptHistory {
        dispatchPrecondition(condition: .notOnQueue(queue))
        let loaded: Result<KeptHistory, SystemError> = queue.sync {
            awaitFold()  // the history files are the fold's while it runs
            let (current, revision, recent) = state.withLock {
                ($0.domains[domain], $0.revision, $0.recent[domain] ?? [])
            }
            return Result { () throws(SystemError) in
                try files.history.load(domain, current: current, revision: revision, recent: recent, keep: true)
                return files.history.cache[domain] ?? KeptHistory()
            }
        }
        do { return try loaded.get() } catch {
            log(.error, "the history file of domain \(domain) cannot be read: \(error)")
            throw .failure(
                "the history file of domain \(domain) cannot be read (\(error)); try again, and see kvd's log")
        }
    }
}
