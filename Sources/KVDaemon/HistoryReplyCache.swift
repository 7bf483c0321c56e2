import KVValues

/// Encoded replies to large `History` calls, kept while nothing they read has changed, so that
/// clients asking the same history again (an app's undo menu, a dashboard) cost no encoding.
///
/// An entry is keyed by the whole call (domain, key, limit, revision asked for, page) and
/// stamped with the store's revision and ``KVStorage/Store/historyVersion`` (a forget, a change
/// of what keeps history, a fold that pruned), both read before the reply was made: it is used
/// only while both are unchanged, so a forgotten value is never served from here. Replies under
/// ``minimumBytes`` are not kept (encoding them costs little). At most ``maxEntries`` entries
/// and `maxBytes` in all; the oldest goes first. Loop thread only.
struct HistoryReplyCache {
    static let minimumBytes = 16 << 10
    static let maxEntries = 4

    /// What a `History` call asks for.
    struct Call: Equatable {
        var domain: Domain
        var key: Key?
        var limit: Int64? = nil
        var atRevision: Int64? = nil
        var beforeRevision: Int64? = nil
    }

    /// The store's revision and history version when a reply was made.
    struct Stamp: Equatable {
        var revision: Int64
        var historyVersion: Int
    }

    private struct Entry {
        var call: Call
        var stamp: Stamp
        var reply: SharedReply
    }

    /// Most bytes of replies kept.
    let maxBytes: Int
    private var entries: [Entry] = []

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// The reply kept for `call` at `stamp`, if any (older entries are dropped).
    mutating func reply(for call: Call, at stamp: Stamp) -> SharedReply? {
        entries.removeAll { $0.stamp != stamp }
        return entries.first { $0.call == call }?.reply
    }

    /// Keeps `reply` for `call` at `stamp` when it is large enough to be worth it and small
    /// enough to fit.
    mutating func keep(_ reply: SharedReply, for call: Call, at stamp: Stamp) {
        guard reply.bytes.count >= Self.minimumBytes, reply.bytes.count <= maxBytes else { return }
        entries.removeAll { $0.call == call || $0.stamp != stamp }
        entries.append(Entry(call: call, stamp: stamp, reply: reply))
        while entries.count > Self.maxEntries || entries.reduce(0, { $0 + $1.reply.bytes.count }) > maxBytes {
            entries.removeFirst()
        }
    }
}
