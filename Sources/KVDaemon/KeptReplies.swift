/// The replies the loop keeps while nothing they read changes, stamped with what they read
/// before the reply is made (``GetReplyCache/Stamp``: the store's revision and the system
/// layer's version; for `History`, the store's revision and history version): hot `Get`s by the
/// exact bytes of the call, large `List`s by domain, large `History` replies by call, shared by
/// every connection that asks. Loop thread only.
struct KeptReplies {
    /// Replies to the fast path's `Get` calls (``GetReplyCache``).
    var gets = GetReplyCache()
    /// Replies to `List` calls of large domains (``ListReplyCache``).
    var lists: ListReplyCache
    /// Replies to large `History` calls (``HistoryReplyCache``).
    var histories: HistoryReplyCache

    /// The `List` replies take at most `maxListBytes` in all, and so do the `History` replies.
    init(maxListBytes: Int) {
        lists = ListReplyCache(maxBytes: maxListBytes)
        histories = HistoryReplyCache(maxBytes: maxListBytes)
    }
}
