/// The replies the loop keeps while nothing they read changes, both stamped alike
/// (``GetReplyCache/Stamp``: the store's revision and the system layer's version, read before
/// the reply is made): hot `Get`s by the exact bytes of the call, large `List`s by domain, shared
/// by every connection that asks. Loop thread only.
struct KeptReplies {
    /// Replies to the fast path's `Get` calls (``GetReplyCache``).
    var gets = GetReplyCache()
    /// Replies to `List` calls of large domains (``ListReplyCache``).
    var lists: ListReplyCache

    /// The `List` replies take at most `maxListBytes` in all.
    init(maxListBytes: Int) {
        lists = ListReplyCache(maxBytes: maxListBytes)
    }
}
