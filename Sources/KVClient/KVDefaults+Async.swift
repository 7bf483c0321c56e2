import KVValues

/// Writes that do not block the caller: each is the blocking write of the same name without
/// `Async`, run on the suite's own write thread (a serial queue of the suite's async writes,
/// never Swift's cooperative pool), while the calling task is suspended.
///
/// ```swift
/// actor Editor {
///     func save(_ defaults: KVDefaults) async throws {
///         try await defaults.setAsync(0.5, for: .quality)   // durable when it returns
///         defaults[.quality]                                // 0.5
///     }
/// }
/// ```
///
/// Order: a suite's async writes run one at a time in the order they were called, and a blocking
/// write of the suite (``set(_:for:unread:)``, ``write(_:forKey:)-(Value?,_)``, ``apply(_:)``,
/// the `UserDefaults` setters) first waits for the async writes called before it, so
/// `await setAsync(a)` then `set(b)` stores `b` last, and so does a blocking write made on another
/// thread after an async write was called. Each returns, as its blocking form does, when kvd has
/// the change on disk, after ``didChangeNotification`` was posted; the notification and this
/// suite's observers run on the write thread. Cancelling the task does not cancel the write.
extension KVDefaults {
    /// ``set(_:for:unread:)`` on the suite's write thread; returns or throws when it has.
    public func setAsync<T>(_ value: T, for key: Key<T>, unread policy: UnreadPolicy = .refuse)
        async throws(KVDefaultsError)
    {
        try await writeQueue.run { () throws(KVDefaultsError) in try self.set(value, for: key, unread: policy) }
    }

    /// ``write(_:forKey:)-(Value?,_)`` on the suite's write thread (nil removes the key).
    public func writeAsync(_ value: Value?, forKey key: String) async throws(KVDefaultsError) {
        try await writeQueue.run { () throws(KVDefaultsError) in try self.write(value, forKey: key) }
    }

    /// ``write(_:forKey:)-(Any?,_)`` on the suite's write thread: a `String`, number, `Bool`,
    /// `Date`, `Data`, `URL`, ``Value``, or an array or `[String: Any]` of those (converted
    /// before the call suspends; one that is not a property-list value throws at once).
    public func writeAsync(_ value: Any?, forKey key: String) async throws(KVDefaultsError) {
        guard let value else { return try await writeAsync(Value?.none, forKey: key) }
        guard let converted = Coercion.value(from: value) else { throw Self.notPropertyList(value, key: key) }
        try await writeAsync(converted, forKey: key)
    }
}
