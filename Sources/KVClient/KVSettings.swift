import Observation
import Synchronization

/// A settings model for the Observation framework: subclass it and declare each setting as a
/// property that reads and writes a typed key. `withObservationTracking` (and whatever builds on
/// it) then learns of every change of a key the tracked code read — made through this model,
/// through another suite, by another process (another app, `kvctl`), or by the system
/// administrator's system layer (a machine default, a lock).
///
/// ```swift
/// extension KVDefaults.Keys {
///     static let theme = Key<String>("theme", default: "light")
/// }
///
/// final class AppSettings: KVSettings, @unchecked Sendable {
///     var theme: String {
///         get { self[.theme] }
///         set { self[.theme] = newValue }
///     }
/// }
///
/// let settings = AppSettings(KVDefaults(suiteName: "com.example.app")!)
/// withObservationTracking {
///     print(settings.theme)                        // light
/// } onChange: {
///     print("theme changed")                       // after `kvctl set com.example.app theme dark`
/// }
/// ```
///
/// The subclass restates `@unchecked Sendable`: ``KVSettings`` is `Sendable` by its own locks
/// (it is open, so the compiler cannot check it), and in the Swift 6 language mode a subclass
/// that does not restate it warns "must restate inherited '@unchecked Sendable' conformance". A
/// subclass whose properties only read and write keys, as above, adds no state of its own to
/// guard. (scripts/check-consumer.sh builds this example in an app in the Swift 6 mode with
/// warnings as errors.)
///
/// A read goes to the suite's cache (no IPC), and reads as the suite reads (the search order;
/// the default when missing or unreadable). Assigning through the subscript stores the value
/// durably before it returns, as Foundation's `UserDefaults` would: over a stored value it cannot
/// read cleanly too (another app's `"huge"` for an `Int`, an unknown enum case), which kvd keeps
/// in the key's history and the diagnostics handler hears of
/// (``KVDiagnostic/Kind/replacedUnreadValue``, naming `kvctl history` and `kvctl restore`). A
/// failure (a locked key, kvd unreachable) changes nothing and goes to the diagnostics handler.
/// ``set(_:for:unread:)`` throws instead, and by default refuses to write over what it did not
/// read (``KVDefaultsError/wouldLoseStoredData(key:report:)``). As Observation does, `onChange` is called once, on
/// the thread that delivered the change (this process's writing thread, or the suite's watch
/// thread), and only for a change of the value the tracked code read: a key written with the
/// value it has already is no change. The model watches each key from its first read until it
/// is released. Safe to use from any thread.
open class KVSettings: Observable, @unchecked Sendable {
    /// The suite the settings are read from and written to.
    public let defaults: KVDefaults
    private let registrar = ObservationRegistrar()
    /// The keys watched so far, by name.
    private let observations = Mutex<[String: KVObservation]>([:])

    /// A model of the settings in `defaults`.
    public init(_ defaults: KVDefaults) {
        self.defaults = defaults
    }

    /// The key's value by the search order (its default if missing or unreadable); assigning
    /// stores it durably, as Foundation's `UserDefaults` would, even over a stored value it
    /// cannot read (kvd keeps that in the key's history; the diagnostics handler hears of it as
    /// ``KVDiagnostic/Kind/replacedUnreadValue``, with how to get it back), and reports a
    /// failure to the diagnostics handler. Observable.
    public subscript<T>(key: KVDefaults.Key<T>) -> T {
        get {
            access(key.name)
            return defaults[key]
        }
        set { defaults.saveReporting(newValue, for: key) }
    }

    /// The key's value by the search order as stored, nil if missing. Observable.
    public func value(forKey name: String) -> Value? {
        access(name)
        return defaults.lookup(name)?.value
    }

    /// Stores `value` as the key's value, as ``KVDefaults/set(_:for:unread:)`` does (durable
    /// when it returns; throws what stopped it).
    public func set<T>(_ value: T, for key: KVDefaults.Key<T>, unread policy: KVDefaults.UnreadPolicy = .refuse)
        throws(KVDefaultsError)
    {
        try defaults.set(value, for: key, unread: policy)
    }

    // MARK: observation

    /// The property Observation tracks for the key `name` (its value is not used).
    subscript(tracked name: String) -> Bool { false }

    /// Tells Observation the tracked code read `name`, and starts watching it.
    private func access(_ name: String) {
        registrar.access(self, keyPath: \KVSettings[tracked: name])
        guard observations.withLock({ $0[name] == nil }) else { return }
        let observation = defaults.observe(name) { [weak self] _ in self?.changed(name) }
        observations.withLock { observations in
            if observations[name] == nil { observations[name] = observation }
        }
    }

    /// Tells Observation that `name`'s value changed.
    private func changed(_ name: String) {
        registrar.withMutation(of: self, keyPath: \KVSettings[tracked: name]) {}
    }
}
