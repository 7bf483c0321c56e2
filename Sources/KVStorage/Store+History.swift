import KVValues
import Synchronization

/// A domain's history as ``Store/history(_:key:limit:)`` gives it.
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
    /// Every kept change of `domain` (of `key` only, if given), newest first, at most `limit`:
    /// every committed change, and nothing uncommitted (changes still in the log come from
    /// memory, older ones from the history file). Reads the domain's history file, so blocks
    /// on I/O (the file is bounded by retention); thread-safe.
    ///
    /// - Throws: `.off`, or `.failure` if the history file cannot be read.
    public func history(_ domain: Domain, key: Key? = nil, limit: Int? = nil) throws(HistoryError) -> HistoryPage {
        let (entries, since) = try allHistory(domain)
        var selected = entries.reversed().filter { key == nil || $0.key == key }
        if let limit, selected.count > limit { selected.removeSubrange(limit...) }
        return HistoryPage(entries: selected, oldestRevision: since)
    }

    /// What `domain` held at `revision`: for each key that had a value then (only `key`, if
    /// given), the entry that set it. Blocks on I/O like ``history(_:key:limit:)``.
    ///
    /// - Throws: `.truncated` for a revision older than what is kept, `.future` for one newer
    ///   than the store's, `.off`, `.failure`.
    public func history(_ domain: Domain, at revision: Int64, key: Key? = nil) throws(HistoryError) -> [HistoryEntry] {
        let current = self.revision
        guard revision <= current else { throw .future(current: current) }
        let (entries, since) = try allHistory(domain)
        guard revision >= since else { throw .truncated(domain, oldestRevision: since) }
        let state = HistoryRetention.state(of: entries, at: revision)
        return state.values.filter { key == nil || $0.key == key }.sorted { $0.key < $1.key }
    }

    /// The domain's entries, normalized (oldest first), and its `since`. Memory first, then
    /// the file: a fold between the two is seen in the file, and the entries of both are
    /// merged by revision.
    private func allHistory(_ domain: Domain) throws(HistoryError) -> ([HistoryEntry], Int64) {
        guard options.keepsHistory else { throw .off }
        let recent = state.withLock { $0.recent[domain] } ?? []
        let content: HistoryContent
        do throws(HistoryFileError) {
            content = try HistoryFile.read(journal.fileSystem, journal.path(HistoryFormat.fileName(for: domain)), domain: domain) ?? HistoryContent()
        } catch {
            log(.error, "the history file of domain \(domain) cannot be read: \(error.reason)")
            throw .failure("the history file of domain \(domain) cannot be read (\(error.reason)); restart kvd to set it aside")
        }
        // A commit the file holds part of (an append a crash cut short) is completed from memory.
        let last = content.lastRevision
        let fresh = recent.lazy.filter { $0.revision >= last }.flatMap(\.entries)
        return (HistoryRetention.normalized(content.entries + fresh), content.since)
    }
}
