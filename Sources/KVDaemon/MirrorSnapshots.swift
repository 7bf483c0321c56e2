/// The system instance's `Mirror` snapshots (the runs of ``RequestHandler/initialMirrorStream(revision:for:)``),
/// made once per caller profile (which drop-in files apply: uid, groups, dconf profile) and
/// state (the store's revision, the drop-in set), and shared by every `Mirror` that asks while
/// both are unchanged, so that any number of callers, of any uids, cost the loop one snapshot
/// per profile (attack/38b-report.md, finding 1). The values are shared with the store's, not
/// copied. At most ``maxEntries`` profiles are kept (the least recently used goes first); an
/// entry of an older state is dropped at the next call. Loop thread only.
final class MirrorSnapshots {
    static let maxEntries = 4

    /// What a snapshot was made of.
    struct Stamp: Hashable {
        var profile: [Bool]
        var revision: Int64
        /// ``DropInLayer/replacements`` when it was made.
        var replacements: Int
    }

    private var entries: [(stamp: Stamp, runs: [ReplyStream.Run])] = []
    /// How many snapshots were made (for tests).
    private(set) var made = 0

    /// The snapshot at `stamp`: the kept one, or `make()`'s, then kept.
    func runs(at stamp: Stamp, make: () -> [ReplyStream.Run]) -> [ReplyStream.Run] {
        entries.removeAll { $0.stamp.revision != stamp.revision || $0.stamp.replacements != stamp.replacements }
        if let index = entries.firstIndex(where: { $0.stamp == stamp }) {
            let entry = entries.remove(at: index)
            entries.append(entry)
            return entry.runs
        }
        let runs = make()
        made += 1
        entries.append((stamp, runs))
        if entries.count > Self.maxEntries { entries.removeFirst() }
        return runs
    }
}
