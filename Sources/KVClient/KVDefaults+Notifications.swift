import Foundation
import KVValues
import Synchronization

/// `didChangeNotification`, posted on `NotificationCenter.default` with the suite as its object,
/// on the thread that caused it:
///
/// - once per change made through this suite: each `set`/`removeObject`/`write` that kvd
///   committed (not the removal of a missing key, not a write that failed), each typed-key `set`
///   and `apply`, each ``setPersistentDomain(_:forName:)`` and ``removePersistentDomain(forName:)``
///   (as Foundation on macOS; corelibs posts only for the persistent-domain calls), posted before
///   the call returns;
/// - beyond Foundation: once per commit of another process (or another suite object of this one)
///   that changes a stored domain this suite reads (its own, the added suites,
///   `NSGlobalDomain`), as soon as the suite's watch delivers it, on the watch's thread. The watch
///   starts at the suite's first read (or ``synchronize()``, or an observation): changes
///   before that, and the values the first read loads, are not announced (values that arrive
///   only after kvd could not be reached at the first read are).
///
/// ```swift
/// NotificationCenter.default.addObserver(forName: KVDefaults.didChangeNotification, object: defaults, queue: nil) { _ in
///     reloadSettings()
/// }
/// ```
extension KVDefaults {
    /// The name Foundation posts `UserDefaults` changes under (`NSUserDefaultsDidChangeNotification`).
    public static let didChangeNotification = NSNotification.Name(rawValue: "NSUserDefaultsDidChangeNotification")

    /// Posts ``didChangeNotification`` with this suite as the object.
    func postDidChange() {
        NotificationCenter.default.post(name: Self.didChangeNotification, object: self)
    }

    /// Called with each change of a watched domain's cache: posts ``didChangeNotification``
    /// unless every change is one of this suite's own writes in flight (announced by the write).
    func announceIfNotOwn(_ domain: Domain, _ changes: [String: Value?]) {
        guard storedDomains().contains(where: { $0.0 == domain }), !ownWrites.explains(domain, changes) else { return }
        postDidChange()
    }
}

/// The writes of one suite sent to kvd and not yet acknowledged. The watch may deliver a write
/// before its acknowledgement arrives; this tells the watch that the change is the suite's own,
/// which the write announces itself. Thread-safe.
final class OwnWrites: Sendable {
    private let pending = Mutex<(next: UInt64, writes: [UInt64: (domain: Domain, changes: [String: Value?])])>((0, [:]))

    /// Records a write about to be sent; returns the id to end it with.
    func begin(_ domain: Domain, _ changes: [Change]) -> UInt64 {
        var values: [String: Value?] = [:]
        for change in changes { values[change.key.name] = .some(change.value) }
        return pending.withLock { pending in
            pending.next += 1
            pending.writes[pending.next] = (domain, values)
            return pending.next
        }
    }

    /// The write `id` was acknowledged (or failed) and applied to the cache.
    func end(_ id: UInt64) {
        pending.withLock { _ = $0.writes.removeValue(forKey: id) }
    }

    /// Whether each of `changes` (of `domain`) sets the value a write in flight sets.
    func explains(_ domain: Domain, _ changes: [String: Value?]) -> Bool {
        pending.withLock { pending in
            changes.allSatisfy { key, value in
                pending.writes.values.contains { $0.domain == domain && $0.changes[key] == .some(value) }
            }
        }
    }
}
