import KVValues

/// A reply of `io.kvd.Defaults.Watch`, typed: the one spelling of its members, encoded by kvd
/// (``reply``) and decoded by every reader (``init(decoding:)``).
///
/// The first reply lists the current values as changes (``initial``); each later one the
/// changes of one commit, or of the system layer. A domain too large for one reply comes in
/// several: all but the last with ``partial``, the later ones not ``initial``.
public struct WatchReply: Sendable, Equatable {
    /// The store revision of the commit (for the first reply: the revision when the watch began).
    public var revision: Int64
    /// What changed; a change with no value is a removal.
    public var changes: [Change]
    /// The first reply (or the first piece of it): the current values.
    public var initial: Bool
    /// The changes whose value is not the user's own; every other change is the user's.
    public var sources: [Key: ValueSource]
    /// The system instance's revision the reply's values reflect, in a user's kvd that follows
    /// one (nil: none known; not sent).
    public var systemRevision: Int64?
    /// More pieces of the same first reply follow.
    public var partial: Bool
    /// A `WatchAll` reply's domain (nil for its first reply, and in every `Watch` reply).
    public var domain: Domain?
    /// A `WatchAll(current: true)`'s domains left out of its current state, to be read apart
    /// (in the pieces of its first reply; the last piece has it, maybe empty; nil: not sent).
    public var withheld: [Domain]?
    /// Who made the commit (a later reply of a commit only; nil: unknown, or not shown to this
    /// watcher).
    public var writer: Writer?

    public init(
        revision: Int64, changes: [Change], initial: Bool, sources: [Key: ValueSource] = [:],
        systemRevision: Int64? = nil, partial: Bool = false, domain: Domain? = nil, withheld: [Domain]? = nil,
        writer: Writer? = nil
    ) {
        self.domain = domain
        self.withheld = withheld
        self.writer = writer
        self.revision = revision
        self.changes = changes
        self.initial = initial
        self.sources = sources
        self.systemRevision = systemRevision
        self.partial = partial
    }

    /// The reply as it goes on the wire (more replies follow). ``DomainBudget`` counts what
    /// one costs, per key. Its members in one order, `changes` last: a reader may find the end
    /// of a `WatchAll` current state's values from the message's end, without scanning them
    /// (libkvd's `kvd_watch_all_current_raw_new` does).
    public var reply: VarlinkReply {
        let items = sources.isEmpty ? changes.map(\.json) : changes.map { $0.json(source: sources[$0.key] ?? .user) }
        var members = JSONMembers()
        if let domain { members.pairs.append((name: "domain", value: .string(domain.name))) }
        members.pairs.append((name: "revision", value: .integer(revision)))
        if let systemRevision { members.pairs.append((name: "systemRevision", value: .integer(systemRevision))) }
        members.pairs.append((name: "initial", value: .bool(initial)))
        if partial { members.pairs.append((name: "partial", value: .bool(true))) }
        if let writer { members.pairs.append((name: "writer", value: writer.json)) }
        if let withheld { members.pairs.append((name: "withheld", value: .array(withheld.map { .string($0.name) }))) }
        members.pairs.append((name: "changes", value: .array(items)))
        return VarlinkReply(members: members, continues: true)
    }

    /// Reads a `Watch` reply; throws what is wrong with it. `initial` and `partial` absent (or
    /// not booleans) are false, `systemRevision` absent is nil, a change's `source` absent is
    /// the user's, a `writer` absent or unreadable is unknown.
    public init(decoding reply: VarlinkReply) throws(StreamReplyError) {
        let parameters = reply.parameters
        guard case .array(let items)? = parameters["changes"] else { throw .noChanges }
        var changes: [Change] = []
        var sources: [Key: ValueSource] = [:]
        for item in items {
            guard case .string(let name)? = item["key"] else { throw .changeWithoutKey }
            let key: Key
            do { key = try Key(validating: name) } catch { throw .invalidKey("\(error)") }
            switch item["value"] {
            case nil, .null?: changes.append(Change(key: key, value: nil))
            case let json?:
                do { changes.append(Change(key: key, value: try Value(typedJSON: json))) } catch {
                    throw .invalidValue("\(error)")
                }
            }
            let source = try Self.source(item["source"])
            if source != .user { sources[key] = source }
        }
        var initial = false
        if case .bool(let flag)? = parameters["initial"] { initial = flag }
        var systemRevision: Int64?
        if case .integer(let number)? = parameters["systemRevision"] { systemRevision = number }
        guard case .integer(let revision)? = parameters["revision"] else { throw .noRevision }
        var domain: Domain?
        if case .string(let name)? = parameters["domain"] {
            do { domain = try Domain(validating: name) } catch { throw .invalidDomain("\(error)") }
        }
        // A writer kvd cannot describe is no reason to drop the change: it reads as unknown.
        let writer = parameters["writer"].flatMap(Writer.init(json:))
        self.init(
            revision: revision, changes: changes, initial: initial, sources: sources, systemRevision: systemRevision,
            partial: parameters["partial"] == .bool(true), domain: domain,
            withheld: try Self.domains(parameters["withheld"]), writer: writer)
    }

    /// A list of domain names (`withheld`); nil when absent.
    private static func domains(_ json: JSON?) throws(StreamReplyError) -> [Domain]? {
        guard let json, json != .null else { return nil }
        guard case .array(let items) = json else { throw .invalidDomain("withheld is not an array") }
        var domains: [Domain] = []
        for item in items {
            guard case .string(let name) = item else { throw .invalidDomain("withheld holds a non-string") }
            do { domains.append(try Domain(validating: name)) } catch { throw .invalidDomain("\(error)") }
        }
        return domains
    }

    /// `"user"`, `"system"` or `"locked"`; absent means `user` (a kvd without a system layer).
    private static func source(_ json: JSON?) throws(StreamReplyError) -> ValueSource {
        guard let json else { return .user }
        guard case .string(let name) = json, let source = ValueSource(rawValue: name) else { throw .invalidSource }
        return source
    }
}

/// A reply of `io.kvd.System.Mirror`, typed: the one spelling of its members, encoded by the
/// system instance (``reply``) and decoded by a user's kvd (``init(decoding:)``).
///
/// The snapshot comes first, one reply per domain, then a reply with no domain and ``synced``;
/// each later reply, ``synced``, is the changes of one domain in one commit: its values and its
/// locks. The replies of one change that spans several domains (a reload of drop-in files) all
/// but the last carry ``batch``: a reader applies them together.
public struct MirrorReply: Sendable {
    /// The system instance's revision.
    public var revision: Int64
    /// The snapshot is complete (false for the snapshot's own replies).
    public var synced: Bool
    /// The domain the reply changes; nil for the end of the snapshot.
    public var domain: Domain?
    /// The domain's changed values (a change with no value is a removal).
    public var changes: [Change]
    /// The domain's locked and unlocked keys.
    public var locks: [(key: Key, locked: Bool)]
    /// The next reply belongs to the same change.
    public var batch: Bool

    public init(
        revision: Int64, synced: Bool, domain: Domain?, changes: [Change] = [], locks: [(key: Key, locked: Bool)] = [],
        batch: Bool = false
    ) {
        self.revision = revision
        self.synced = synced
        self.domain = domain
        self.changes = changes
        self.locks = locks
        self.batch = batch
    }

    /// The reply as it goes on the wire (more replies follow).
    public var reply: VarlinkReply {
        var parameters: [String: JSON] = [
            "revision": .integer(revision), "synced": .bool(synced), "changes": .array(changes.map(\.json)),
            "locks": .array(locks.map { .object(["key": .string($0.key.name), "locked": .bool($0.locked)]) }),
        ]
        if let domain { parameters["domain"] = .string(domain.name) }
        if batch { parameters["batch"] = .bool(true) }
        return VarlinkReply(parameters: parameters, continues: true)
    }

    /// Reads a `Mirror` reply (not an error reply); throws what is wrong with it. `changes` and
    /// `locks` absent are empty, `synced` and `batch` absent are false.
    public init(decoding reply: VarlinkReply) throws(StreamReplyError) {
        let parameters = reply.parameters
        var domain: Domain?
        if case .string(let name)? = parameters["domain"] {
            guard let valid = try? Domain(validating: name) else { throw .invalidDomain(name) }
            domain = valid
        }
        let changes: [Change]
        do { changes = try Change.list(parameters["changes"] ?? .array([]), named: "changes") } catch {
            throw .invalidChanges
        }
        let locks = try Self.locks(parameters["locks"])
        let synced = parameters["synced"] == .bool(true)
        guard case .integer(let revision)? = parameters["revision"] else { throw .noRevision }
        self.init(
            revision: revision, synced: synced, domain: domain, changes: changes, locks: locks,
            batch: parameters["batch"] == .bool(true))
    }

    private static func locks(_ json: JSON?) throws(StreamReplyError) -> [(key: Key, locked: Bool)] {
        guard case .array(let items)? = json else { return [] }
        var locks: [(key: Key, locked: Bool)] = []
        for item in items {
            guard case .object(let members) = item, case .string(let name)? = members["key"],
                let key = try? Key(validating: name),
                case .bool(let locked)? = members["locked"]
            else { throw .invalidLockChange }
            locks.append((key, locked))
        }
        return locks
    }
}

/// What is wrong with a `Watch` or `Mirror` reply (``WatchReply/init(decoding:)``,
/// ``MirrorReply/init(decoding:)``); each reader says it in its own words.
public enum StreamReplyError: Error, Sendable, Equatable {
    /// No integer `revision`.
    case noRevision
    /// A `Watch` reply without a `changes` array.
    case noChanges
    /// A `Watch` change without a string `key`.
    case changeWithoutKey
    /// A `Watch` change whose key is not valid (why).
    case invalidKey(String)
    /// A `Watch` change whose value is not a typed value (why).
    case invalidValue(String)
    /// A `Watch` change whose `source` is not `"user"`, `"system"` or `"locked"`.
    case invalidSource
    /// A `Mirror` reply naming a domain that is not valid.
    case invalidDomain(String)
    /// A `Mirror` reply whose `changes` are not valid changes.
    case invalidChanges
    /// A `Mirror` reply with a lock change that is not `{"key": KEY, "locked": BOOL}`.
    case invalidLockChange
}
