import KVValues

/// Encoded replies to large calls (`List` of a domain, `History`), shared by every connection
/// that asks while nothing the call reads has changed, so that many clients asking the same cost
/// one encoding, and its bytes are held once however many connections have yet to send them
/// (``SharedReply``).
///
/// An entry is keyed by the call and stamped with what the reply read, taken before it was made
/// (for `List`, ``GetReplyCache/Stamp``; for `History`, ``KeptReplies/HistoryStamp``), and used
/// only while the stamp is unchanged. Replies under `minimumBytes` are not kept (encoding them
/// costs little). At most ``maxEntries`` entries and `maxBytes` in all; the oldest goes first.
/// Loop thread only.
struct SharedReplyCache<Call: Equatable, Stamp: Equatable> {
    static var maxEntries: Int { 4 }

    private struct Entry {
        var call: Call
        var stamp: Stamp
        var reply: SharedReply
    }

    /// Fewest bytes of a reply worth keeping.
    let minimumBytes: Int
    /// Most bytes of replies kept.
    let maxBytes: Int
    private var entries: [Entry] = []

    init(minimumBytes: Int, maxBytes: Int) {
        (self.minimumBytes, self.maxBytes) = (minimumBytes, maxBytes)
    }

    /// The reply kept for `call` at `stamp`, if any (older entries are dropped).
    mutating func reply(for call: Call, at stamp: Stamp) -> SharedReply? {
        entries.removeAll { $0.stamp != stamp }
        return entries.first { $0.call == call }?.reply
    }

    /// Keeps `reply` for `call` at `stamp` when it is large enough to be worth it and small
    /// enough to fit.
    mutating func keep(_ reply: SharedReply, for call: Call, at stamp: Stamp) {
        guard reply.bytes.count >= minimumBytes, reply.bytes.count <= maxBytes else { return }
        entries.removeAll { $0.call == call || $0.stamp != stamp }
        entries.append(Entry(call: call, stamp: stamp, reply: reply))
        while entries.count > Self.maxEntries || entries.reduce(0, { $0 + $1.reply.bytes.count }) > maxBytes {
            entries.removeFirst()
        }
    }
}
