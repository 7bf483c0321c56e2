import FoundationEssentials
import KVProtocol
import KVValues

/// Typed keys, declared once with their type and default:
///
/// ```swift
/// extension KVDefaults.Keys {
///     static let quality = Key<Double>("quality", default: 0.8)
///     static let templates = Key<[Template]>("templates", default: [])
/// }
/// defaults[.quality]                          // 0.8 until set
/// try defaults.set(0.5, for: .quality)        // durable when it returns
/// ```
///
/// Reads never throw: a missing value reads as the default, and so does one that cannot be
/// decoded (the reason goes to the diagnostics handler). Any `Codable` type works; a
/// ``VersionedValue`` migrates from older versions; an array decodes leniently (an element that
/// cannot be read is skipped and reported, and kept: see ``set(_:for:)``). A value stored as
/// data holding JSON (how `UserDefaults` apps stored Codable values, `JSONEncoder` defaults:
/// dates as seconds since 2001) is read too, and stored as typed JSON on the next write.
extension KVDefaults {
    /// The namespace typed keys are declared in, as static members.
    public class Keys: @unchecked Sendable {
        /// The key's name in the domain.
        public let name: String

        fileprivate init(name: String) { self.name = name }

        /// So that `Key<T>(...)` inside `extension KVDefaults.Keys` names a typed key.
        public typealias Key<T: Codable & Sendable> = KVDefaults.Key<T>
    }

    /// A key with its value type and default value.
    public final class Key<T: Codable & Sendable>: Keys, @unchecked Sendable {
        /// What reads return when nothing readable is stored.
        public let defaultValue: T

        public init(_ name: String, default defaultValue: T) {
            self.defaultValue = defaultValue
            super.init(name: name)
        }
    }

    /// The key's value by the search order, or its default.
    public subscript<T>(key: Key<T>) -> T { value(for: key) }

    /// The key's value by the search order, or its default if missing or unreadable.
    public func value<T>(for key: Key<T>) -> T {
        guard let (stored, source) = lookup(key.name) else { return key.defaultValue }
        return decode(T.self, stored, source: source, key: key.name) ?? key.defaultValue
    }

    /// Stores `value` as the key's value and returns when kvd has it on disk; a nil `Optional`
    /// removes the key.
    ///
    /// Two guards keep what the app cannot read: if the stored value has a newer schema version
    /// than `T` knows, this throws ``KVDefaultsError/newerVersionStored(key:stored:known:)`` and
    /// changes nothing (``reset(_:)`` first to replace it on purpose); and when `T` is an array,
    /// the stored elements it cannot decode (malformed, or of a newer version) are appended after
    /// `value`'s elements, so saving never drops them. Both read and write in one conditional
    /// commit, retried if another process wrote meanwhile.
    public func set<T>(_ value: T, for key: Key<T>) throws(KVDefaultsError) {
        let node: Node
        do { node = try NodeEncoder().encode(value) } catch {
            throw .invalidValue(key: key.name, reason: Versioning.describe(error))
        }
        guard node != .null else { return try write(Value?.none, forKey: key.name) }
        guard Versioning.needsGuardedWrite(T.self) else {
            return try write(try Self.stored(node, key.name), forKey: key.name)
        }
        try writeKeepingUnreadable(node, as: T.self, key: key.name)
    }

    /// Removes the key from this suite's domain, so it reads as its default.
    public func reset(_ key: Keys) throws(KVDefaultsError) {
        try write(Value?.none, forKey: key.name)
    }

    // MARK: decoding

    /// Decodes a stored value as `T`, reporting why not (once per stored value).
    func decode<T: Decodable>(_ type: T.Type, _ stored: Value, source: Source, key: String) -> T? {
        var attempt = Versioning.decode(T.self, from: Node(stored))
        if case .failure = attempt.result, let node = Self.jsonInData(stored) {
            attempt = Versioning.decode(T.self, from: node)
        }
        if case .failure = attempt.result, source == .argument, case .string(let text) = stored,
            let parsed = try? Value(typedJSONText: Array(text.utf8))
        {
            attempt = Versioning.decode(T.self, from: Node(parsed))
        }
        var problems = attempt.skipped.map { skipped -> (KVDiagnostic.Kind, String) in
            (.skippedElement(index: skipped.index),
             "element \(skipped.index) skipped: \(skipped.failure.message); it stays stored and is kept when the array is saved")
        }
        switch attempt.result {
        case .success(let value):
            reportOnce(key, stored: stored, problems)
            return value
        case .failure(let failure):
            problems.append((failure.kind, "reading the default instead: \(failure.message)"))
            reportOnce(key, stored: stored, problems)
            return nil
        }
    }

    /// A data value holding a JSON document, as the plain JSON node it holds.
    static func jsonInData(_ stored: Value) -> Node? {
        guard case .data(let bytes) = stored, let json = try? JSONParser.parse(bytes) else { return nil }
        return Node(plainJSON: json)
    }

    /// The node to compare with when writing: the JSON inside a data value, else the value.
    static func storedNode(_ stored: Value) -> Node {
        jsonInData(stored) ?? Node(stored)
    }

    static func stored(_ node: Node, _ key: String) throws(KVDefaultsError) -> Value {
        do { return try node.value() } catch { throw .invalidValue(key: key, reason: error.description) }
    }

    // MARK: guarded writes

    private func writeKeepingUnreadable<T>(_ node: Node, as type: T.Type, key: String) throws(KVDefaultsError) {
        let name = try KVDefaultsError.key(key)
        for attempt in 1...5 {
            let current = try client.call { (connection) throws(ClientError) -> (value: Value, revision: Int64)? in
                try connection.get(domain, name)
            } ifNotFound: { nil }
            var final = node
            if let current {
                let storedNode = Self.storedNode(current.value)
                if let newer = Versioning.newerVersion(storedNode, for: T.self) {
                    throw .newerVersionStored(key: key, stored: newer, known: (Versioning.unwrapped(T.self) as! any VersionedValue.Type).schemaVersion)
                }
                let kept = Versioning.undecodableElements(storedNode, for: T.self).filter { (try? $0.value()) != nil }
                if !kept.isEmpty, case .array(let elements) = node { final = .array(elements + kept) }
            }
            let value = try Self.stored(final, key)
            do { try value.validate() } catch { throw .invalidValue(key: key, reason: error.description) }
            do {
                let revision = try client.call { (connection) throws(ClientError) in
                    try connection.set(domain, name, value, ifRevision: current?.revision ?? 0)
                } ifNotFound: { 0 }
                cacheIfWatching(domain)?.apply([Change(key: name, value: value)], revision: revision)
                return
            } catch .client(let error) where error.remoteName == DefaultsInterface.Error.revisionMismatch && attempt < 5 {
                continue
            }
        }
    }
}
