import KVValues
import Synchronization

/// A domain's history file as kept in memory: what `History` serves without reading the file.
/// Bounded by what retention keeps (the file is pruned past twice that, see
/// ``HistoryFileInfo/pruneAbove``).
struct KeptHistory: Sendable {
    /// Normalized (``HistoryRetention/normalized(_:)``): rising revisions, one entry per key
    /// and revision.
    var entries: [HistoryEntry] = []
    /// States from here on can be rebuilt from ``entries``.
    var since: Int64 = 0
    /// The largest revision folded into the file (pruned entries included): a fold, and a
    /// reader merging the log's commits, skip entries below it, and those at it whose key is in
    /// ``lastKeys`` (a crash may have cut an append within one commit).
    var lastRevision: Int64 = 0
    var lastKeys: Set<Key> = []

    /// A file's normalized `entries`, complete from `since` on; `folded` (default: `entries`)
    /// are all the entries folded into it, before pruning.
    init(_ entries: [HistoryEntry] = [], since: Int64 = 0, folded: [HistoryEntry]? = nil) {
        self.entries = entries
        self.since = since
        let all = folded ?? entries
        lastRevision = all.lazy.map(\.revision).max() ?? 0
        lastKeys = Set(all.lazy.filter { [lastRevision] in $0.revision == lastRevision }.map(\.key))
    }

    /// Whether the file holds `entry` (or newer ones).
    func holds(_ entry: HistoryEntry) -> Bool {
        entry.revision < lastRevision || (entry.revision == lastRevision && lastKeys.contains(entry.key))
    }

    /// The entries of `commits` (in revision order) the file does not hold, in order.
    func fresh(_ commits: [RecentCommit]) -> [HistoryEntry] {
        commits.lazy.filter { $0.revision >= lastRevision }.flatMap(\.entries).filter { !holds($0) }
    }

    /// After appending `fresh` (from ``fresh(_:)``) to the file.
    mutating func append(_ fresh: [HistoryEntry]) {
        entries.append(contentsOf: fresh)
        for entry in fresh {
            if entry.revision > lastRevision { (lastRevision, lastKeys) = (entry.revision, []) }
            lastKeys.insert(entry.key)
        }
    }
}

/// The history files loaded so far, shared by the commit queue (which loads, appends and
/// prunes them) and readers (``Store/history(_:key:limit:before:)``). Thread-safe; a short lock,
/// never held during I/O.
final class HistoryCache: Sendable {
    private let kept = Mutex<[Domain: KeptHistory]>([:])

    /// The domain's history, or nil if its file has not been loaded yet.
    subscript(_ domain: Domain) -> KeptHistory? {
        kept.withLock { $0[domain] }
    }

    func set(_ domain: Domain, _ history: KeptHistory) {
        kept.withLock { $0[domain] = history }
    }

    /// Appends `fresh` to a loaded domain's history in place.
    func append(_ domain: Domain, _ fresh: [HistoryEntry]) {
        kept.withLock { $0[domain, default: KeptHistory()].append(fresh) }
    }
}
