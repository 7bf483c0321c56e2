import KVValues

/// The replies the loop keeps while nothing they read changes, stamped with what they read
/// before the reply is made (``GetReplyCache/Stamp``: the store's revision and the system
/// layer's version; for `History`, ``HistoryStamp``): hot `Get`s by the exact bytes of the call,
/// large `List`s by domain, large `History` replies by call, shared by every connection that
/// asks. Loop thread only.
struct KeptReplies {
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
    var gets = GetReplyCache()
    /// Replies to `List` calls of large domains, by domain.
    var lists: SharedReplyCache<Domain, GetReplyCache.Stamp>
    /// Replies to large `History` calls, by call.
    var histories: SharedReplyCache<HistoryCall, HistoryStamp>

    /// The `List` replies take at most `maxListBytes` in all, and so do the `History` replies.
    init(maxListBytes: Int) {
        lists = SharedReplyCache(minimumBytes: Self.minimumListBytes, maxBytes: maxListBytes)
        histories = SharedReplyCache(minimumBytes: Self.minimumHistoryBytes, maxBytes: maxListBytes)
    }
}
