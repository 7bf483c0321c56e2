import FoundationEssentials
import KVValues
import Synchronization

/// The getters and setters of Foundation's `UserDefaults`, with its conversions between types
/// (see ``Coercion``): `integer(forKey:)` of a stored `"42"` is 42, `string(forKey:)` of a
/// stored 42 is `"42"`, `bool(forKey:)` of `"YES"` is true.
extension KVDefaults {
    /// The value of `key` by the search order, as Foundation hands it out (`String`, `Int`,
    /// `Double`, `Bool`, `Date`, `Data`, `[Any]`, `[String: Any]`), or nil.
    public func object(forKey key: String) -> Any? {
        lookup(key).map { Coercion.any($0.value) }
    }

    /// The value of `key` by the search order, typed, or nil.
    public func value(forKey key: String) -> Value? {
        lookup(key)?.value
    }

    /// A string, or the digits of a number; nil for other types or a missing key.
    public func string(forKey key: String) -> String? {
        lookup(key).flatMap { Coercion.string($0.value) }
    }

    /// An integer, converted from a real, bool or numeric string; 0 if missing or not a number.
    public func integer(forKey key: String) -> Int {
        lookup(key).map { Coercion.integer($0.value) } ?? 0
    }

    /// A real, converted from an integer, bool or numeric string; 0 if missing or not a number.
    public func double(forKey key: String) -> Double {
        lookup(key).map { Coercion.double($0.value) } ?? 0
    }

    /// ``double(forKey:)`` as a `Float`.
    public func float(forKey key: String) -> Float {
        Float(double(forKey: key))
    }

    /// A bool, or true for a non-zero number or a string starting with Y/y/T/t or a non-zero
    /// number (`"YES"`, `"true"`, `"1"`); false if missing.
    public func bool(forKey key: String) -> Bool {
        lookup(key).map { Coercion.bool($0.value) } ?? false
    }

    /// A data value; nil for other types.
    public func data(forKey key: String) -> Data? {
        if case .data(let data)? = lookup(key)?.value { return data }
        return nil
    }

    /// An array; nil for other types.
    public func array(forKey key: String) -> [Any]? {
        if case .array(let values)? = lookup(key)?.value { return values.map(Coercion.any) }
        return nil
    }

    /// An array whose elements are all strings; nil otherwise (an array holding a number too),
    /// as in Foundation.
    public func stringArray(forKey key: String) -> [String]? {
        guard case .array(let values)? = lookup(key)?.value else { return nil }
        let strings = values.compactMap { if case .string(let text) = $0 { text } else { nil } }
        return strings.count == values.count ? strings : nil
    }

    /// A dictionary; nil for other types.
    public func dictionary(forKey key: String) -> [String: Any]? {
        if case .dictionary(let members)? = lookup(key)?.value { return members.mapValues(Coercion.any) }
        return nil
    }

    /// A URL stored as a string: a string with `://` (how ``set(_:forKey:)-(Any?,_)`` stores a URL that is
    /// not a file URL) as that URL, any other as a file path (with `~` expanded), as Foundation
    /// does; nil for other types.
    public func url(forKey key: String) -> URL? {
        guard case .string(let text)? = lookup(key)?.value else { return nil }
        if text.contains("://") { return URL(string: text) }
        var path = text
        if path == "~" || path.hasPrefix("~/"), let home = configuration.environment["HOME"] {
            path = home + path.dropFirst()
        }
        return URL(fileURLWithPath: path)
    }

    /// Stores `value` (a `String`, number, `Bool`, `Date`, `Data`, `URL`, ``Value``, their `NS`
    /// classes, or an array or `[String: Any]` of those; nil removes the key) and returns when
    /// kvd has it on disk, after posting ``didChangeNotification``.
    /// Failures go to the diagnostics handler (a key the system administrator locked as
    /// ``KVDiagnostic/Kind/keyLocked``; reads go on returning the locked value); use
    /// ``write(_:forKey:)-(Any?,_)`` to have them thrown.
    public func set(_ value: Any?, forKey key: String) {
        do {
            try write(value, forKey: key)
        } catch {
            reportWriteFailure(error, key: key, "not stored")
        }
    }

    /// Reports a failed non-throwing write: ``KVDiagnostic/Kind/keyLocked`` for a locked key,
    /// else ``KVDiagnostic/Kind/writeFailed``; `what` says what did not happen.
    func reportWriteFailure(_ error: KVDefaultsError, key: String?, _ what: String) {
        let kind: KVDiagnostic.Kind = if case .client(.keyLocked) = error { .keyLocked } else { .writeFailed }
        report(key, kind, "\(what): \(error)")
    }

    /// Stores an integer, as ``set(_:forKey:)-(Any?,_)`` does.
    public func set(_ value: Int, forKey key: String) { set(value as Any?, forKey: key) }
    /// Stores a real, as ``set(_:forKey:)-(Any?,_)`` does.
    public func set(_ value: Double, forKey key: String) { set(value as Any?, forKey: key) }
    /// Stores a `Float` widened to `Double`, as Foundation does: ``double(forKey:)`` then reads
    /// `Double(12.34 as Float)` (12.34000015258789) and ``float(forKey:)`` the same `Float`. (A
    /// typed key, `Key<Float>`, stores the decimal it prints as, `12.34`.)
    public func set(_ value: Float, forKey key: String) { set(value as Any?, forKey: key) }
    /// Stores a bool, as ``set(_:forKey:)-(Any?,_)`` does.
    public func set(_ value: Bool, forKey key: String) { set(value as Any?, forKey: key) }
    /// Stores a file URL as its path (as Foundation does), any other URL as its absolute string;
    /// nil removes the key. ``url(forKey:)`` reads either back.
    public func set(_ url: URL?, forKey key: String) { set(url as Any?, forKey: key) }

    /// ``set(_:forKey:)-(Any?,_)`` that throws instead of reporting.
    public func write(_ value: Any?, forKey key: String) throws(KVDefaultsError) {
        guard let value else {
            try write(Value?.none, forKey: key)
            return
        }
        guard let converted = Coercion.value(from: value) else { throw Self.notPropertyList(value, key: key) }
        try write(converted, forKey: key)
    }

    static func notPropertyList(_ value: Any, key: String) -> KVDefaultsError {
        .invalidValue(
            key: key, reason: "a \(type(of: value)) is not a property-list value (use a typed key for Codable types)")
    }

    /// Removes `key` from this suite's domain (the other domains of the search order keep theirs).
    public func removeObject(forKey key: String) {
        set(Any?.none, forKey: key)
    }

    /// Adds `defaults` to the registration domain: values returned when no other domain has the
    /// key. Kept in memory only, never written to kvd, so built-in presets stay in code.
    public func register(defaults: [String: Any]) {
        let values = converted(defaults, "not registered")
        registration.withLock { $0.merge(values) { $1 } }
    }

    /// Every key visible through the search order with its value (argument domain over this
    /// suite's domain over the added suites over `NSGlobalDomain` over the registration domain).
    public func dictionaryRepresentation() -> [String: Any] {
        valuesBySearchOrder().mapValues(Coercion.any)
    }

    /// ``dictionaryRepresentation()``, typed.
    public func valuesBySearchOrder() -> [String: Value] {
        var values = registration.withLock { $0 }
        for (domain, _) in storedDomains().reversed() { values.merge(cache(for: domain).values) { $1 } }
        values.merge(volatileValues(forName: Self.argumentDomain)) { $1 }
        return values
    }
}
