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
            KVHistoryEntry(revision: record.revision, time: record.time, content: decodeOld(record, as: T.self), uid: record.uid)
        }
    }

    /// An old value as the key's type, or raw (reported) when it cannot be decoded.
    private func decodeOld<T: Decodable>(_ record: HistoryRecord, as type: T.Type) -> KVHistoryEntry<T>.Content {
        guard let stored = record.value else { return .removed }
        let read = Self.typedRead(T.self, stored, argument: false)
        if let value = read.value { return .value(value) }
        let reason = read.findings.first?.message ?? "it is not a \(T.self)"
        report(record.key.name, .undecodable, "the value of revision \(record.revision) cannot be read as \(T.self): \(reason); history returns it as stored")
        return .raw(stored, reason: reason)
    }
}
