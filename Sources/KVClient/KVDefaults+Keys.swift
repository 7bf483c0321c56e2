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
/// decoded (the reason goes to the diagnostics handler; ``KVDefaults/read(_:)`` returns it as a
/// ``KVReadReport``). Any `Codable` type works; a ``VersionedValue`` migrates from older
/// versions; arrays and string-keyed dictionaries decode leniently at every depth (an element or
/// entry that cannot be read is skipped and reported), and an optional member that cannot be
/// read reads as nil (reported). A value stored as data holding JSON (how `UserDefaults` apps
/// stored Codable values, `JSONEncoder` defaults: dates as seconds since 2001) is read too, and
/// stored as typed JSON on the next write. A scalar key converts as the getters do, where
/// nothing is lost: `Key<Int>` reads the string `"20"` (and an integral real, and a bool as
/// 1/0), `Key<Double>` a numeric string, an integer or a bool, `Key<Bool>` the strings
/// `YES`/`NO`/`true`/`false`/`Y`/`N`/`T`/`F`/`1`/`0` (any case) and the integers 0 and 1,
/// `Key<String>` an integer or a real as its digits.
///
/// Saves never lose what a read did not understand: see ``KVDefaults/set(_:for:unread:)``.
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

        /// The key named `name` (its name in the domain), reading as `defaultValue` when
        /// nothing readable is stored.
        public init(_ name: String, default defaultValue: T) {
            self.defaultValue = defaultValue
            super.init(name: name)
        }
    }

    /// What ``set(_:for:unread:)`` does when the stored value did not read cleanly as the key's
    /// type (something skipped, unknown, newer, or read as a fallback, at any depth).
    public enum UnreadPolicy: Sendable, Equatable {
        /// Write nothing and throw ``KVDefaultsError/wouldLoseStoredData(key:report:)`` (the default).
        case refuse
        /// Put each unread part back where it provably belongs (by member names from the root:
        /// skipped elements appended to their array, unknown members and untouched unreadable
        /// members restored); throw as `.refuse` if a part cannot be placed (inside an array
        /// element or a migrated value, or the whole value).
        case keep
        /// Write the new value; the unread parts are lost, on purpose.
        case replace
    }

    /// The key's value by the search order, or its default.
    public subscript<T>(key: Key<T>) -> T { read(key).value }

    /// The key's value by the search order, or its default if missing or unreadable.
    public func value<T>(for key: Key<T>) -> T { read(key).value }

    /// The key's value by the search order (its default if missing or unreadable), with what the
    /// read skipped or did not know: ``KVReadReport/isClean``, ``KVReadReport/newerVersion``
    /// (a newer app wrote part of it), and each finding with its path.
    public func read<T>(_ key: Key<T>) -> KVReading<T> {
        guard let (stored, source) = lookup(key.name) else {
            return KVReading(value: key.defaultValue, report: KVReadReport(), isStored: false)
        }
        let read = typedRead(T.self, stored, source: source, key: key.name)
        return KVReading(
            value: read.value ?? key.defaultValue, report: KVReadReport(findings: read.findings.map(\.visible)),
            isStored: true)
    }

    /// Stores `value` as the key's value and returns when kvd has it on disk, after posting
    /// ``didChangeNotification``; a nil `Optional` removes the key.
    ///
    /// Never overwrites what was not read cleanly: the stored value is read as `T` first, and if
    /// anything in it was skipped, unknown, newer or read as a fallback, `unread` decides
    /// (``UnreadPolicy``; by default the save throws
    /// ``KVDefaultsError/wouldLoseStoredData(key:report:)`` and changes nothing). The read and
    /// the write are one conditional commit, retried if another process wrote meanwhile; after
    /// a failed save, reads still return what is stored. Blocks for two round trips to kvd.
    public func set<T>(_ value: T, for key: Key<T>, unread policy: UnreadPolicy = .refuse) throws(KVDefaultsError) {
        _ = try save(value, for: key, unread: policy)
    }

    /// What a save with `unread: .replace` wrote over without having read it.
    struct Replaced {
        /// What did not read cleanly.
        var report: KVReadReport
        /// The revision at which the replaced value was stored (what `kvctl restore` takes);
        /// nil when not known (a value kvd cannot read).
        var revision: Int64?
    }

    /// ``set(_:for:unread:)``, returning what `.replace` wrote over (nil if nothing was).
    func save<T>(_ value: T, for key: Key<T>, unread policy: UnreadPolicy) throws(KVDefaultsError) -> Replaced? {
        let node: Node
        do { node = try NodeEncoder().encode(value) } catch {
            throw .invalidValue(key: key.name, reason: Versioning.describe(error))
        }
        let name = try KVDefaultsError.key(key.name)
        writeQueue.waitForEarlier()  // the stored value as the async writes called before left it
        for attempt in 1...5 {
            let (stored, revision) = try storedForWrite(name)
            let prepared = try WriteGuard.prepareReporting(
                node, as: T.self, over: stored, unread: policy, key: key.name)
            let final = prepared.value
            do {
                try commit(domain, [Change(key: name, value: final)]) { (connection) throws(ClientError) -> Int64 in
                    guard let final else { return try connection.delete(domain, name) }
                    return try connection.set(domain, name, final, ifRevision: revision)
                }
                return prepared.replaced.map { Replaced(report: $0, revision: revision) }
            } catch .client(.revisionMismatch) where attempt < 5 {
                continue
            }
        }
        return nil
    }

    /// The typed save that does not throw (a ``KVSettings`` property setter): writes as
    /// Foundation's `UserDefaults` would, over a stored value it cannot read cleanly
    /// (`unread: .replace`; kvd keeps the replaced value in the key's history), and reports
    /// that as ``KVDiagnostic/Kind/replacedUnreadValue`` with how to get it back; a failure goes
    /// to the diagnostics handler as ``set(_:forKey:)-(Any?,_)``'s do.
    func saveReporting<T>(_ value: T, for key: Key<T>) {
        do {
            guard let replaced = try save(value, for: key, unread: .replace) else { return }
            let (domain, name) = (ClientError.shellWord(domain.name), ClientError.shellWord(key.name))
            let revision = replaced.revision.map(String.init) ?? "N"
            report(
                key.name, .replacedUnreadValue,
                "replaced a stored value that did not read as \(T.self) (\(replaced.report)); kvd keeps it in the "
                    + "key's history: see it with `kvctl history \(domain) \(name)`, put it back with "
                    + "`kvctl restore \(domain) \(name) --revision \(revision)`")
        } catch {
            reportWriteFailure(error, key: key.name, "not stored")
        }
    }

    /// Removes the key from this suite's domain, so it reads as its default; this is how to
    /// replace a stored value a save refused to overwrite.
    public func reset(_ key: Keys) throws(KVDefaultsError) {
        try write(Value?.none, forKey: key.name)
    }

    // MARK: decoding

    /// Decodes a stored value as `T` (nil if it cannot), reporting what it could not read once
    /// per stored value.
    func decode<T: Decodable>(_ type: T.Type, _ stored: Value, source: Source, key: String) -> T? {
        typedRead(T.self, stored, source: source, key: key).value
    }

    /// ``typedRead(_:_:argument:)``, with what blocks a save reported once per stored value.
    private func typedRead<T: Decodable>(_ type: T.Type, _ stored: Value, source: Source, key: String) -> (
        value: T?, findings: [Finding]
    ) {
        let read = Self.typedRead(T.self, stored, argument: source == .argument)
        reportOnce(key, stored: stored, read.findings.filter(\.blocksWrite).map(Self.diagnostic))
        return read
    }

    /// A stored value read as `T`: as typed JSON, else converted as the getters do (scalars),
    /// else as the JSON inside a data value, else (`argument`) as typed JSON text. The findings
    /// are those of the attempt that read it, or of the most telling failure.
    static func typedRead<T: Decodable>(_ type: T.Type, _ stored: Value, argument: Bool) -> (
        value: T?, findings: [Finding]
    ) {
        let direct = Versioning.read(T.self, from: Node(stored))
        if direct.value != nil { return direct }
        if let converted = Coercion.typed(T.self, stored) { return (converted, []) }
        if let node = jsonInData(stored) { return Versioning.read(T.self, from: node) }
        if argument, case .string(let text) = stored, let parsed = try? Value(typedJSONText: Array(text.utf8)) {
            let fromText = Versioning.read(T.self, from: Node(parsed))
            if fromText.value != nil { return fromText }
        }
        return direct
    }

    /// A finding as a diagnostic: the whole value (the default was read), an element of a
    /// top-level array (skipped), or a part deeper in.
    static func diagnostic(_ finding: Finding) -> (KVDiagnostic.Kind, String) {
        let keeping = "it stays stored, and a save refuses to overwrite it unless told to keep or replace it"
        let path = PathStep.text(finding.steps)
        switch finding.kind {
        case .newerVersion(let stored, let known) where finding.steps.isEmpty:
            return (
                .newerSchema(stored: stored, known: known),
                "reading the default instead: \(finding.message); \(keeping)"
            )
        case _ where finding.steps.isEmpty:
            return (.undecodable, "reading the default instead: \(finding.message)")
        case .undecodable, .newerVersion:
            guard finding.steps.count == 1, case .index(let index) = finding.steps[0] else { fallthrough }
            return (.skippedElement(index: index), "element \(index) \(finding.message); \(keeping)")
        default:
            return (.notRead(path: path), "\(path): \(finding.message); \(keeping)")
        }
    }

    /// A data value holding a JSON document, as the plain JSON node it holds.
    static func jsonInData(_ stored: Value) -> Node? {
        guard case .data(let bytes) = stored, let json = try? JSONParser.parse(bytes) else { return nil }
        return Node(plainJSON: json)
    }

    /// What is stored under `name` in this suite's domain, and the revision a conditional write
    /// over it needs (0: absent; nil: unconditional, for a value kvd cannot read).
    private func storedForWrite(_ name: KVValues.Key) throws(KVDefaultsError) -> (WriteGuard.Stored, Int64?) {
        do {
            let current = try client.call { (connection) throws(ClientError) -> (value: Value, revision: Int64)? in
                try connection.get(domain, name)
            } ifNotFound: {
                nil
            }
            guard let current else { return (.absent, 0) }
            return (.value(current.value), current.revision)
        } catch .client(.unreadableValue(_, _, let reason)) {
            return (.unreadable(reason), nil)
        }
    }
}
