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

    /// Called with each change of a watched domain's cache (`streamed`: the watch's revision, nil
    /// for an own acknowledged write): posts ``didChangeNotification`` unless every change is
    /// one of this suite's own writes (announced by the write itself).
    func announceIfNotOwn(_ domain: Domain, _ changes: [String: Value?], streamed: Int64?) {
        guard storedDomains().contains(where: { $0.0 == domain }),
            !ownWrites.explains(domain, changes, streamed: streamed)
        else { return }
        postDidChange()
    }
}

/// The writes of one suite that its domain's watch may still deliver: those sent and not yet
/// acknowledged, and those acknowledged whose watch event has not come yet (the watch runs on
/// its own connection and thread, so its event may come before the acknowledgement or after).
/// This tells the watch that such a change is the suite's own, which the write announces
/// itself. An acknowledged write is forgotten once the watch of its domain delivers a later
/// revision; at most ``keptAcknowledged`` are kept. Thread-safe.
final class OwnWrites: Sendable {
    private struct Write {
        var domain: Domain
        var changes: [String: Value?]
        /// The revision kvd acknowledged it at; nil while in flight.
        var revision: Int64?
    }

    /// Acknowledged writes kept for a watch that lags (or was cut and resumed from a snapshot).
    static let keptAcknowledged = 256

    private let state = Mutex<(next: UInt64, writes: [UInt64: Write])>((0, [:]))

    /// Records a write about to be sent; returns the id to end it with.
    func begin(_ domain: Domain, _ changes: [Change]) -> UInt64 {
        var values: [String: Value?] = [:]
        for change in changes { values[change.key.name] = .some(change.value) }
        return state.withLock { state in
            state.next += 1
            state.writes[state.next] = Write(domain: domain, changes: values, revision: nil)
            return state.next
        }
    }

    /// The write `id` was applied to the cache: acknowledged at `revision` (kept until the watch
    /// passes it), or failed or watched by nobody (`nil`: forgotten now).
    func end(_ id: UInt64, acknowledgedAt revision: Int64?) {
        state.withLock { state in
            guard let revision else {
                _ = state.writes.removeValue(forKey: id)
                return
            }
            state.writes[id]?.revision = revision
            let acknowledged = state.writes.filter { $0.value.revision != nil }
            if acknowledged.count > Self.keptAcknowledged, let oldest = acknowledged.keys.min() {
                state.writes[oldest] = nil
            }
        }
    }

    /// Whether each of `changes` (of `domain`) sets the value one of the writes sets: one in
    /// flight, or one acknowledged at `streamed` (the watch event's revision; the writes of the
    /// domain acknowledged before it are forgotten, as the watch has passed them).
    func explains(_ domain: Domain, _ changes: [String: Value?], streamed: Int64?) -> Bool {
        state.withLock { state in
            if let streamed {
                state.writes = state.writes.filter {
                    $0.value.domain != domain || ($0.value.revision ?? .max) >= streamed
                }
            }
            let candidates = state.writes.values.filter {
                $0.domain == domain && ($0.revision == nil || $0.revision == streamed)
            }
            return changes.allSatisfy { key, value in candidates.contains { $0.changes[key] == .some(value) } }
        }
    }
}
