import KVValues
import Synchronization

/// How far a history file goes: the largest revision folded into it (pruned entries included)
/// and the keys it holds at that revision. A fold, and a reader merging the log's commits,
/// skip entries below it, and those at it whose key it holds (a crash may have cut an append
/// within one commit). Once a fold wrote that revision's commit whole, the keys are not kept
/// (``wholeAtLast``): a domain's last commit may have changed every one of its keys, and the
/// mark lives as long as the process.
struct HistoryMark: Sendable {
    private(set) var lastRevision: Int64 = 0
    private(set) var lastKeys: Set<Key> = []
    /// The file holds every entry at ``lastRevision`` (``lastKeys`` is then empty).
    private(set) var wholeAtLast = false

    /// The mark of a file to which `entries` were folded.
    init(_ entries: [HistoryEntry] = []) {
        lastRevision = entries.lazy.map(\.revision).max() ?? 0
        lastKeys = Set(entries.lazy.filter { [lastRevision] in $0.revision == lastRevision }.map(\.key))
    }

    /// The mark of a file to which every entry up to `lastRevision` was folded, whole commits
    /// (as ``markWhole()`` after ``init(_:)``).
    init(wholeAt lastRevision: Int64) {
        self.lastRevision = lastRevision
        wholeAtLast = true
    }

    /// Whether the file holds `entry` (or newer ones).
    func holds(_ entry: HistoryEntry) -> Bool {
        entry.revision < lastRevision
            || (entry.revision == lastRevision && (wholeAtLast || lastKeys.contains(entry.key)))
    }

    /// The entries of `commits` (in revision order) the file does not hold, in order.
    func fresh(_ commits: [RecentCommit]) -> [HistoryEntry] {
        commits.lazy.filter { $0.revision >= lastRevision }.flatMap(\.entries).filter { !holds($0) }
    }

    /// After `fresh` (from ``fresh(_:)``: whole commits) was appended.
    mutating func advance(_ fresh: [HistoryEntry]) {
        guard let last = fresh.last?.revision, last >= lastRevision else { return }
        if last > lastRevision { (lastRevision, lastKeys) = (last, []) }
        markWhole()
    }

    /// Records that the file holds every entry at ``lastRevision`` (a fold wrote its commit
    /// whole) and drops the keys.
    mutating func markWhole() {
        lastKeys = []
        wholeAtLast = true
    }
}

/// A domain's history file as held in memory for readers: what `History` serves without
/// reading the file. Bounded by what retention keeps (the file is pruned past twice that, see
/// ``HistoryFileInfo/pruneAbove``).
struct KeptHistory: Sendable {
    /// Normalized (``HistoryRetention/normalized(_:)``): rising revisions, one entry per key
    /// and revision.
    fileprivate(set) var entries: [HistoryEntry]
    /// States from here on can be rebuilt from ``entries``.
    let since: Int64
    fileprivate(set) var mark: HistoryMark

    init(entries: [HistoryEntry] = [], since: Int64 = 0, mark: HistoryMark = HistoryMark()) {
        (self.entries, self.since, self.mark) = (entries, since, mark)
    }
}

/// The history files readers asked for (``Store/history(_:key:limit:before:)``), held in
/// memory from then on: loaded by the commit queue, which keeps them in step with every fold
/// and prune. Only those: a domain nobody asked the history of costs no memory. Thread-safe;
/// a short lock, never held during I/O.
final class HistoryCache: Sendable {
    private let kept = Mutex<[Domain: KeptHistory]>([:])

    /// The domain's history, or nil if no reader asked for it yet.
    subscript(_ domain: Domain) -> KeptHistory? {
        kept.withLock { $0[domain] }
    }

    /// Records `domain`'s history (nil: forgets it).
    func set(_ domain: Domain, _ history: KeptHistory?) {
        kept.withLock { $0[domain] = history }
    }

    /// Forgets every domain's history.
    func removeAll() {
        kept.withLock { $0 = [:] }
    }

    /// Appends `fresh` to a domain's history in place, if it is held.
    func append(_ domain: Domain, _ fresh: [HistoryEntry]) {
        kept.withLock { kept in
            guard kept[domain] != nil else { return }
            kept[domain]!.entries.append(contentsOf: fresh)
            kept[domain]!.mark.advance(fresh)
        }
    }
}
