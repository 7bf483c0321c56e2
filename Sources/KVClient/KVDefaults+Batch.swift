import KVProtocol
import KVValues

/// Several writes committed at once (the protocol's `Apply`): all of them become durable
/// together, or none does.
///
/// ```swift
/// try defaults.apply { batch in
///     batch.set(0.5, for: .quality)
///     batch.set(templates, for: .templates, unread: .keep)
///     batch.write("dark", forKey: "theme")
///     batch.reset(.nickname)
/// }
/// ```
///
/// Adding to a batch never throws; the first write that cannot be made (a value that cannot be
/// encoded, an invalid key) is thrown by `apply`, which then commits nothing.
extension KVDefaults {
    /// The writes of one ``KVDefaults/apply(_:)``, in order (a later write of a key wins).
    public struct Batch {
        enum Entry {
            case plain(Value?)
            case typed(prepare: (WriteGuard.Stored) throws(KVDefaultsError) -> Value?)
        }

        var entries: [(key: KVValues.Key, entry: Entry)] = []
        /// The first write that could not be added; `apply` throws it.
        var failure: KVDefaultsError?

        /// Adds a typed write, guarded as ``KVDefaults/set(_:for:unread:)`` is, against the
        /// value stored when the batch commits.
        public mutating func set<T>(_ value: T, for key: KVDefaults.Key<T>, unread policy: UnreadPolicy = .refuse) {
            add(key.name) { () throws(KVDefaultsError) -> Entry in
                let node: Node
                do { node = try NodeEncoder().encode(value) } catch {
                    throw .invalidValue(key: key.name, reason: Versioning.describe(error))
                }
                return .typed { (stored) throws(KVDefaultsError) -> Value? in
                    try WriteGuard.prepare(node, as: T.self, over: stored, unread: policy, key: key.name)
                }
            }
        }

        /// Adds a plain write, as ``KVDefaults/write(_:forKey:)-(Value?,_)`` does (nil removes the key).
        public mutating func write(_ value: Value?, forKey key: String) {
            add(key) { () throws(KVDefaultsError) -> Entry in
                if let value { try KVDefaultsError.validate(value, key: key) }
                return .plain(value)
            }
        }

        /// Adds the removal of a typed key.
        public mutating func reset(_ key: Keys) {
            add(key.name) { .plain(nil) }
        }

        private mutating func add(_ key: String, _ entry: () throws(KVDefaultsError) -> Entry) {
            guard failure == nil else { return }
            do { entries.append((try KVDefaultsError.key(key), try entry())) } catch { failure = error }
        }
    }

    /// Builds a batch with `build` and commits it as one atomic `Apply`: returns when kvd has
    /// every change on disk, and posts ``KVDefaults/didChangeNotification`` once. If a write cannot be made (invalid key or value, or a typed write
    /// whose guard refuses), throws it and writes nothing. The typed writes are checked against
    /// the domain as it is at the commit (one `List`), and the commit is conditional on the
    /// domain not changing meanwhile (retried if it did). Blocks for two round trips to kvd.
    public func apply(_ build: (inout Batch) -> Void) throws(KVDefaultsError) {
        var batch = Batch()
        build(&batch)
        if let failure = batch.failure { throw failure }
        guard !batch.entries.isEmpty else { return }
        try commitConditionally(domain) { (listing) throws(KVDefaultsError) in
            var changes: [Change] = []
            for (key, entry) in batch.entries {
                switch entry {
                case .plain(let value): changes.append(Change(key: key, value: value))
                case .typed(let prepare):
                    changes.append(Change(key: key, value: try prepare(Self.stored(key, in: listing))))
                }
            }
            return changes
        }
    }

    private static func stored(_ key: KVValues.Key, in listing: DomainListing) -> WriteGuard.Stored {
        if let value = listing.values[key] { return .value(value) }
        if let reason = listing.unreadable[key] { return .unreadable(reason) }
        return .absent
    }
}
