import FoundationEssentials
import KVProtocol
import KVValues

/// One past value of a typed key (``KVDefaults/history(for:limit:)``).
public struct KVHistoryEntry<T: Sendable>: Sendable {
    /// What the key held after the change.
    public enum Content: Sendable {
        /// The value, decoded as the key's type (through its version chain).
        case value(T)
        /// The key was removed.
        case removed
        /// A value that cannot be decoded as the key's type: as stored, with the reason (also
        /// given to the diagnostics handler).
        case raw(Value, reason: String)
    }

    /// The store revision of the change.
    public var revision: Int64
    /// When the change was committed (nil: a value the key had when kvd began to keep history).
    public var time: Date?
    /// The value after the change, decoded, removed, or raw.
    public var content: Content
    /// The user who made it (the system instance only).
    public var uid: UInt32?
    /// Who made it: the program, app id, pid and uid kvd learnt of the connection that asked
    /// for it; nil when unknown (a change kvd made itself, or older than writer records).
    public var writer: Writer? = nil
}

extension KVDefaults {
    /// Every kept value of `key` in this suite's domain, newest first (at most `limit`), each
    /// decoded as the key's type the way a read decodes it (a ``VersionedValue`` migrates from
    /// older versions). An old value that cannot be decoded is returned ``KVHistoryEntry/Content/raw(_:reason:)``
    /// and reported to the diagnostics handler, never dropped. Blocks until kvd answers.
    ///
    /// - Throws: ``KVDefaultsError/client(_:)`` when kvd cannot be reached or fails.
    public func history<T>(for key: Key<T>, limit: Int? = nil) throws(KVDefaultsError) -> [KVHistoryEntry<T>] {
        let name: KVValues.Key
        do { name = try KVValues.Key(validating: key.name) } catch { throw .invalidKey(key.name, reason: error.reason) }
        let records = try client.call { (connection) throws(ClientError) -> [HistoryRecord] in
            try connection.historyRecords(domain, key: name, limit: limit)
        } ifNotFound: {
            []
        }
        return records.map { record in
            KVHistoryEntry(
                revision: record.revision, time: record.time, content: decodeOld(record, as: T.self), uid: record.uid,
                writer: record.writer)
        }
    }

    /// An old value as the key's type, or raw (reported) when it cannot be decoded.
    private func decodeOld<T: Decodable>(_ record: HistoryRecord, as type: T.Type) -> KVHistoryEntry<T>.Content {
        guard let stored = record.value else { return .removed }
        let read = Self.typedRead(T.self, stored, argument: false)
        if let value = read.value { return .value(value) }
        let reason = read.findings.first?.message ?? "it is not a \(T.self)"
        report(
            record.key.name, .undecodable,
            "the value of revision \(record.revision) cannot be read as \(T.self): \(reason); history returns it as stored"
        )
        return .raw(stored, reason: reason)
    }
}

/// Secrets: forgetting past values, and keys that keep none.
extension KVDefaults {
    /// Removes every past value of `key` from
    /// every file kvd keeps: its history, its log and the copies it set aside; the current
    /// value stays. Durable when it returns. Blocks until kvd answers.
    ///
    /// ```swift
    /// try defaults.forgetHistory(of: .token)
    /// try defaults.history(for: .token)  // [] (or only the current value, of no known time)
    /// ```
    ///
    /// - Throws: ``KVDefaultsError/client(_:)`` when kvd cannot be reached or fails (on the
    ///   system instance, for a user who is not an admin).
    public func forgetHistory<T>(of key: Key<T>) throws(KVDefaultsError) {
        try forgetHistory(named: try Self.validName(key.name))
    }

    /// ``forgetHistory(of:)`` for every key of this suite's domain.
    public func forgetHistory() throws(KVDefaultsError) {
        try forgetHistory(named: nil)
    }

    private func forgetHistory(named name: KVValues.Key?) throws(KVDefaultsError) {
        _ = try client.call { (connection) throws(ClientError) -> Int64 in
            try connection.forgetHistory(domain, key: name)
        } ifNotFound: {
            0
        }
    }

    /// Marks `key` to keep no history (`keeps`
    /// false), for tokens and passwords: what was kept is forgotten at once, as by
    /// ``forgetHistory(of:)``, and later values are never written to a history file. `true`
    /// lifts the mark. Durable when it returns; the mark stays across restarts.
    ///
    /// ```swift
    /// try defaults.setKeepsHistory(false, for: .token)
    /// defaults[.token] = "s3cret"  // never in kvd's history
    /// ```
    public func setKeepsHistory<T>(_ keeps: Bool, for key: Key<T>) throws(KVDefaultsError) {
        try setKeepsHistory(keeps, named: try Self.validName(key.name))
    }

    /// ``setKeepsHistory(_:for:)`` for every key of this suite's domain (one mark for the
    /// domain: keys added later keep none either).
    public func setKeepsHistory(_ keeps: Bool) throws(KVDefaultsError) {
        try setKeepsHistory(keeps, named: nil)
    }

    private func setKeepsHistory(_ keeps: Bool, named name: KVValues.Key?) throws(KVDefaultsError) {
        _ = try client.call { (connection) throws(ClientError) -> Int64 in
            try connection.keepHistory(domain, key: name, keeps)
        } ifNotFound: {
            0
        }
    }

    private static func validName(_ name: String) throws(KVDefaultsError) -> KVValues.Key {
        do { return try KVValues.Key(validating: name) } catch { throw .invalidKey(name, reason: error.reason) }
    }
}
