import KVValues

/// The replies the loop keeps while nothing they read changes, stamped with what they read
/// before the reply is made (``GetReplyCache/Stamp``: the store's revision and the system
/// layer's version; for `History`, ``HistoryStamp``): hot `Get`s by the exact bytes of the call,
/// large `List`s by domain, large `History` replies by call, the current state a
/// `WatchAll(current: true)` starts with by prefix (apps starting together while nothing is
/// written get one encoding), shared by every connection that asks. Each call is answered from here when a kept reply is still good, else made and kept
/// (``list(_:at:making:)``, ``history(_:at:making:)``, ``get(_:in:at:)``). Loop thread only.
final class KeptReplies {
    /// What a `History` call asks for.
    struct HistoryCall: Equatable {
        var domain: Domain
        var key: Key?
        var limit: Int64? = nil
        var atRevision: Int64? = nil
        var beforeRevision: Int64? = nil
    }

    /// What a `History` reply read: the store's revision and its
    /// ``KVStorage/Store/historyVersion`` (a forget, a change of what keeps history, a fold that
    /// pruned), so that a forgotten value is never served from a kept reply.
    struct HistoryStamp: Equatable {
        var revision: Int64
        var historyVersion: Int
    }

    /// Fewest bytes of a `List` reply worth keeping.
    static let minimumListBytes = 64 << 10
    /// Fewest bytes of a `History` reply worth keeping.
    static let minimumHistoryBytes = 16 << 10

    /// Replies to the fast path's `Get` calls (``GetReplyCache``).
    @exclusivity(unchecked) private(set) var gets = GetReplyCache()
    /// Replies to `List` calls of large domains, by domain.
    @exclusivity(unchecked) private var lists: SharedReplyCache<Domain, GetReplyCache.Stamp>
    /// Replies to large `History` calls, by call.
    @exclusivity(unchecked) private var histories: SharedReplyCache<HistoryCall, HistoryStamp>
    /// The first replies of `WatchAll(current: true)` calls, by prefix (``CurrentStateStream``).
    @exclusivity(unchecked) private var currentStates: SharedReplyCache<String, GetReplyCache.Stamp>

    /// The `List` replies take at most `maxListBytes` in all, and so do the `History` replies.
    init(maxListBytes: Int) {
        lists = SharedReplyCache(minimumBytes: Self.minimumListBytes, maxBytes: maxListBytes)
        histories = SharedReplyCache(minimumBytes: Self.minimumHistoryBytes, maxBytes: maxListBytes)
        currentStates = SharedReplyCache(minimumBytes: 0, maxBytes: maxListBytes)
    }

    /// The first replies of a `WatchAll(current: true)` of the domains under `prefix`, at
    /// `stamp` (whose revision they are at): the kept ones, else `make`'s, kept when they are at
    /// the stamp's revision (no commit came between the stamp and the state they were made of).
    func currentState(
        _ prefix: String, at stamp: GetReplyCache.Stamp, making make: () -> (bytes: [UInt8], revision: Int64)
    ) -> (reply: SharedReply, revision: Int64) {
        if let kept = currentStates.reply(for: prefix, at: stamp) { return (kept, stamp.revision) }
        let (bytes, revision) = make()
        let reply = SharedReply(bytes)
        if revision == stamp.revision { currentStates.keep(reply, for: prefix, at: stamp) }
        return (reply, revision)
    }

    /// The reply to `List` of `domain` made at `stamp`: the kept one, else `make`'s (kept if large).
    func list(_ domain: Domain, at stamp: GetReplyCache.Stamp, making make: () -> SharedReply) -> SharedReply {
        if let kept = lists.reply(for: domain, at: stamp) { return kept }
        let reply = make()
        lists.keep(reply, for: domain, at: stamp)
        return reply
    }

    /// The reply to `History` `call` made at `stamp`: the kept one, else `make`'s (kept if large).
    func history(_ call: HistoryCall, at stamp: HistoryStamp, making make: () -> SharedReply) -> SharedReply {
        if let kept = kept(call, at: stamp) { return kept }
        let reply = make()
        histories.keep(reply, for: call, at: stamp)
        return reply
    }

    /// The kept reply to `History` `call`, if still good at `stamp`.
    func kept(_ call: HistoryCall, at stamp: HistoryStamp) -> SharedReply? {
        histories.reply(for: call, at: stamp)
    }

    /// The kept reply to the `Get` `call` (in ``GetReplyCache`` slot `slot`), if still good at `stamp`.
    func get(_ call: ArraySlice<UInt8>, in slot: Int, at stamp: GetReplyCache.Stamp) -> [UInt8]? {
        gets.reply(slot, for: call, at: stamp)
    }

    /// Keeps `reply`, made at `stamp`, to the `Get` `call` (in slot `slot`).
    func keep(_ reply: ArraySlice<UInt8>, forGet call: ArraySlice<UInt8>, in slot: Int, at stamp: GetReplyCache.Stamp) {
        gets.keep(reply, for: call, in: slot, at: stamp)
    }
}
