import KVProtocol

/// The system instance's `Mirror` snapshots (the pieces of ``RequestHandler/initialMirrorStream(revision:for:)``, encoded once),
/// made once per caller profile (which drop-in files apply: uid, groups, dconf profile) and
/// state (the store's revision, the drop-in set), and shared by every `Mirror` that asks while
/// both are unchanged, so that any number of callers, of any uids, cost the loop one snapshot
/// per profile and one encoding of each piece (attack/38b-report.md, finding 1). The values are
/// shared with the store's, not copied; the pieces are kept as the furthest reader reaches them. At most ``maxEntries`` profiles are kept (the least recently used goes first); an
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

    private var entries: [(stamp: Stamp, pieces: SharedPieces)] = []
    /// How many snapshots were made (for tests).
    private(set) var made = 0

    /// The snapshot's pieces at `stamp`: the kept ones, or those of `make()`'s stream, then kept.
    func pieces(at stamp: Stamp, make: () -> ReplyStream) -> SharedPieces {
        entries.removeAll { $0.stamp.revision != stamp.revision || $0.stamp.replacements != stamp.replacements }
        if let index = entries.firstIndex(where: { $0.stamp == stamp }) {
            let entry = entries.remove(at: index)
            entries.append(entry)
            return entry.pieces
        }
        let pieces = SharedPieces(make())
        made += 1
        entries.append((stamp, pieces))
        if entries.count > Self.maxEntries { entries.removeFirst() }
        return pieces
    }
}

/// The pieces of one stream, encoded once, as the furthest of the streams sharing them reaches
/// each, and kept for the others (``ReplyStream/init(sharing:)``). Loop thread only.
final class SharedPieces {
    private let source: ReplyStream
    private var pieces: [SharedReply] = []

    init(_ source: ReplyStream) {
        self.source = source
    }

    /// The piece at `index`, made when no stream reached it yet; nil past the last.
    func piece(_ index: Int) -> SharedReply? {
        while pieces.count <= index {
            guard let reply = source.next() else { return nil }
            pieces.append(SharedReply(reply.encoded()))
        }
        return pieces[index]
    }

    /// Whether a stream that took `index` pieces took them all.
    func isComplete(at index: Int) -> Bool { source.isDone && index >= pieces.count }
}
