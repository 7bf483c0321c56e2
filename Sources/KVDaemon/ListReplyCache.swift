import KVValues

/// Encoded replies to `List` calls of large domains, shared by every connection that asks while
/// nothing a `List` reads has changed, so that many clients listing one large domain cost one
/// encoding, and its bytes are held once however many connections have yet to send them
/// (``SharedReply``).
///
/// An entry is stamped as ``GetReplyCache``'s are (the store's revision and the system layer's
/// version, read before the reply was made) and used only while both are unchanged. Replies
/// under ``minimumBytes`` are not kept (encoding them costs little). At most ``maxEntries``
/// entries and `maxBytes` in all; the oldest goes first. Loop thread only.
struct ListReplyCache {
    static let minimumBytes = 64 << 10
    static let maxEntries = 4

    private struct Entry {
        var domain: Domain
        var stamp: GetReplyCache.Stamp
        var reply: SharedReply
    }

    /// Most bytes of replies kept.
    let maxBytes: Int
    private var entries: [Entry] = []

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
    }

    /// The reply kept for `domain` at `stamp`, if any (older entries are dropped).
    mutating func reply(for domain: Domain, at stamp: GetReplyCache.Stamp) -> SharedReply? {
        entries.removeAll { $0.stamp != stamp }
        return entries.first { $0.domain == domain }?.reply
    }

    /// Keeps `reply` for `domain` at `stamp` when it is large enough to be worth it and small
    /// enough to fit.
    mutating func keep(_ reply: SharedReply, for domain: Domain, at stamp: GetReplyCache.Stamp) {
        guard reply.bytes.count >= Self.minimumBytes, reply.bytes.count <= maxBytes else { return }
        entries.removeAll { $0.domain == domain || $0.stamp != stamp }
        entries.append(Entry(domain: domain, stamp: stamp, reply: reply))
        while entries.count > Self.maxEntries || entries.reduce(0, { $0 + $1.reply.bytes.count }) > maxBytes {
            entries.removeFirst()
        }
    }
}
