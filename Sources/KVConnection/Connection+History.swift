import FoundationEssentials
import KVProtocol
import KVValues

/// One kept change of one key, as `History` returns it.
public struct HistoryRecord: Sendable, Equatable {
    /// The store revision of the change.
    public var revision: Int64
    /// When it was committed; nil for a value the key already had when kvd began to keep its
    /// domain's history.
    public var time: Date?
    /// The key that changed.
    public var key: Key
    /// The value the key got; nil: it was removed.
    public var value: Value?
    /// The user who made it (the writer's uid).
    public var uid: UInt32?
    /// Who made it: the program, app id, pid and uid of the connection that asked for it; nil
    /// when unknown (a change kvd made itself, or older than writer records).
    public var writer: Writer?

    /// A change as `History` describes it (tests and tools that build their own).
    public init(revision: Int64, time: Date?, key: Key, value: Value?, uid: UInt32? = nil) {
        self.revision = revision
        self.time = time
        self.key = key
        self.value = value
        self.uid = uid
    }
}

/// Who set one current value, as `Blame` returns it.
public struct BlameRecord: Sendable, Equatable {
    /// The key.
    public var key: Key
    /// The store revision that set its value.
    public var revision: Int64
    /// When, if history holds the change.
    public var time: Date?
    /// Who, if history holds the change with its writer; nil: unknown.
    public var writer: Writer?

    /// A record with these members (tests and tools that build their own).
    public init(key: Key, revision: Int64, time: Date?, writer: Writer?) {
        self.key = key
        self.revision = revision
        self.time = time
        self.writer = writer
    }
}

/// A domain's (or key's) kept changes, newest first.
public struct HistoryListing: Sendable, Equatable {
    /// The changes, newest first.
    public var entries: [HistoryRecord]
    /// The oldest revision whose state kvd can rebuild (0: the whole history is kept).
    public var oldestRevision: Int64
    /// The domain (or the key asked for) is marked to keep no history
    /// (``Connection/keepHistory(_:key:_:)``).
    public var keepsNone = false
}

extension Connection {
    /// The kept changes of `domain` (of `key` only, if given), newest first, at most `limit`.
    /// A reply carries what fits one message; this asks for the next page (`beforeRevision`)
    /// until it has them all, or `limit`. Blocks until kvd answers.
    public func history(_ domain: Domain, key: Key? = nil, limit: Int? = nil) throws(ClientError) -> HistoryListing {
        var listing = HistoryListing(entries: [], oldestRevision: 0)
        var before: Int64?
        repeat {
            let wanted = limit.map { Int64($0 - listing.entries.count) }
            let reply = try call(.history(domain, key, limit: wanted, atRevision: nil, beforeRevision: before))
            guard case .integer(let oldest)? = reply.parameters["oldestRevision"] else {
                throw .protocolError("History reply without an integer \"oldestRevision\"")
            }
            listing.oldestRevision = oldest
            listing.keepsNone = reply.parameters["keepsNone"] == .bool(true)
            listing.entries += try Decode.historyEntries(reply)
            switch reply.parameters["nextBeforeRevision"] {
            case nil, .null?: before = nil
            case .integer(let next)? where next < before ?? .max: before = next
            case _?:
                throw .protocolError(
                    "History reply with a \"nextBeforeRevision\" that is not an integer below the last")
            }
        } while before != nil && listing.entries.count < limit ?? .max
        return listing
    }

    /// What `domain` (or its `key`) held after `revision`: for each key that had a value then,
    /// the entry that set it, sorted by key. Throws `HistoryTruncated` (as
    /// ``ClientError/remote(name:parameters:)``, with `oldestRevision`) for a revision older
    /// than kvd keeps.
    public func history(_ domain: Domain, at revision: Int64, key: Key? = nil) throws(ClientError) -> [HistoryRecord] {
        try Decode.historyEntries(try call(.history(domain, key, limit: nil, atRevision: revision)))
    }

    /// Who set each value `domain` holds now (only `key`'s, if given), sorted by key, from its
    /// history: ``BlameRecord/writer`` nil where history does not say (history off or not kept
    /// for the key, a value older than history or than writer records, forgotten). Throws
    /// `NotFound` when the domain (or key) holds no value. Blocks until kvd answers.
    public func blame(_ domain: Domain, key: Key? = nil) throws(ClientError) -> [BlameRecord] {
        try Decode.blameEntries(try call(.blame(domain, key)))
    }

    /// Removes the past values of `key` (of every key of `domain`, if nil) from every file kvd
    /// keeps: its history, its log, the copies it set aside. The domain's current values stay.
    /// Durable when it returns; returns the store's revision then.
    @discardableResult
    public func forgetHistory(_ domain: Domain, key: Key? = nil) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.forgetHistory(domain, key)))
    }

    /// Marks `key` (every key of `domain`, if nil) to keep no history (`keep` false: what was
    /// kept is forgotten at once, as by ``forgetHistory(_:key:)``), or to keep it again.
    /// Durable when it returns; returns the store's revision then.
    @discardableResult
    public func keepHistory(_ domain: Domain, key: Key? = nil, _ keep: Bool) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.keepHistory(domain, key, keep: keep)))
    }
}

extension Decode {
    static func historyEntries(_ reply: VarlinkReply) throws(ClientError) -> [HistoryRecord] {
        guard case .array(let items)? = reply.parameters["entries"] else {
            throw .protocolError("History reply without an \"entries\" array")
        }
        var entries: [HistoryRecord] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard case .integer(let revision)? = item["revision"], case .string(let name)? = item["key"] else {
                throw .protocolError("History entry without an integer \"revision\" and a \"key\"")
            }
            var time: Date?
            if case .string(let text)? = item["time"] {
                guard let date = RFC3339.parse(text) else {
                    throw .protocolError("History entry with a \"time\" that is not RFC 3339")
                }
                time = date
            }
            var uid: UInt32?
            if case .integer(let number)? = item["uid"] { uid = UInt32(exactly: number) }
            let value: Value? =
                switch item["value"] {
                case nil, .null?: nil
                case let json?: try Decode.value(json, "entries.value")
                }
            var entry = HistoryRecord(revision: revision, time: time, key: try key(name), value: value, uid: uid)
            entry.writer = item["writer"].flatMap(Writer.init(json:))
            entries.append(entry)
        }
        return entries
    }

    static func blameEntries(_ reply: VarlinkReply) throws(ClientError) -> [BlameRecord] {
        guard case .array(let items)? = reply.parameters["entries"] else {
            throw .protocolError("Blame reply without an \"entries\" array")
        }
        var entries: [BlameRecord] = []
        for item in items {
            guard case .integer(let revision)? = item["revision"], case .string(let name)? = item["key"] else {
                throw .protocolError("Blame entry without an integer \"revision\" and a \"key\"")
            }
            var time: Date?
            if case .string(let text)? = item["time"] {
                guard let date = RFC3339.parse(text) else {
                    throw .protocolError("Blame entry with a \"time\" that is not RFC 3339")
                }
                time = date
            }
            entries.append(
                BlameRecord(
                    key: try key(name), revision: revision, time: time,
                    writer: item["writer"].flatMap(Writer.init(json:))))
        }
        return entries
    }
}
