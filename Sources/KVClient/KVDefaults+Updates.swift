import KVValues
import Synchronization

/// Live updates: a callback or an `AsyncStream` of a key's value, by the search order, for every
/// change made by any process (and by this one). Backed by the suite's watch on kvd, which
/// reconnects by itself when kvd exits or restarts; after reconnecting, keys that changed
/// meanwhile are reported once with their current value.
extension KVDefaults {
    /// Calls `handler` (on a background thread) with the new value of `key` each time it
    /// changes; nil when it is removed everywhere. Stops when the observation is cancelled or
    /// released.
    ///
    /// ```swift
    /// let observation = defaults.observe("theme") { print("theme is now", $0?.description ?? "unset") }
    /// // after defaults.set("dark", forKey: "theme"): theme is now dark
    /// ```
    public func observe(_ key: String, handler: @escaping @Sendable (Value?) -> Void) -> KVObservation {
        startWatching()
        let id = observers.add(key: key, current: lookup(key)?.value, emit: handler)
        return KVObservation { [observers] in observers.remove(id) }
    }

    /// The values of `key`: its current value first, then each new one.
    ///
    /// ```swift
    /// for await theme in defaults.updates(forKey: "theme") { apply(theme) }
    /// ```
    public func updates(forKey key: String) -> AsyncStream<Value?> {
        AsyncStream { continuation in
            let observation = observe(key) { continuation.yield($0) }
            continuation.yield(lookup(key)?.value)
            continuation.onTermination = { _ in observation.cancel() }
        }
    }

    /// Calls `handler` with the key's new value (decoded; its default when removed or
    /// unreadable) each time the stored value changes.
    public func observe<T>(_ key: Key<T>, handler: @escaping @Sendable (T) -> Void) -> KVObservation {
        observe(key.name) { [weak self] _ in
            guard let self else { return }
            handler(self.value(for: key))
        }
    }

    /// The values of a typed key: its current value first, then each new one.
    ///
    /// ```swift
    /// for await quality in defaults.updates(.quality) { encoder.quality = quality }
    /// ```
    public func updates<T>(_ key: Key<T>) -> AsyncStream<T> {
        AsyncStream { continuation in
            let observation = observe(key) { continuation.yield($0) }
            continuation.yield(value(for: key))
            continuation.onTermination = { _ in observation.cancel() }
        }
    }
}

/// An observation of a key; ends when cancelled or released.
public final class KVObservation: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
    }

    deinit { cancel() }

    /// Stops the observation; the handler is not called after this returns, except for a call
    /// already running.
    public func cancel() {
        onCancel.withLock { body in
            defer { body = nil }
            return body
        }?()
    }
}

/// The observers of a suite, told by the domain caches which keys changed.
final class Observers: Sendable {
    struct Entry {
        let key: String
        var last: Value?
        let emit: @Sendable (Value?) -> Void
    }

    private let entries = Mutex<(next: UInt64, all: [UInt64: Entry])>((0, [:]))

    func add(key: String, current: Value?, emit: @escaping @Sendable (Value?) -> Void) -> UInt64 {
        entries.withLock { entries in
            entries.next += 1
            entries.all[entries.next] = Entry(key: key, last: current, emit: emit)
            return entries.next
        }
    }

    func remove(_ id: UInt64) {
        entries.withLock { _ = $0.all.removeValue(forKey: id) }
    }

    /// Emits the new value of each observed key among `changes` whose value by the search order
    /// is now different from the last one emitted.
    func changed(_ domain: Domain, _ changes: [String: Value?], in defaults: KVDefaults?) {
        guard let defaults else { return }
        let watched = entries.withLock { entries in entries.all.filter { changes[$0.value.key] != nil } }
        var emits: [(@Sendable (Value?) -> Void, Value?)] = []
        for (id, entry) in watched {
            let now = defaults.lookup(entry.key, wait: false)?.value
            let changed = entries.withLock { entries -> Bool in
                guard entries.all[id] != nil, entries.all[id]?.last != now else { return false }
                entries.all[id]?.last = now
                return true
            }
            if changed { emits.append((entry.emit, now)) }
        }
        for (emit, value) in emits { emit(value) }
    }
}
