import KVProtocol
import KVValues

/// One reply of a watch: the changes of one commit, or (`initial`) the current values.
public struct WatchEvent: Sendable, Equatable {
    /// The store revision of the commit (for the initial event: the revision when the watch began).
    public var revision: Int64
    /// What changed; a change with no value is a removal.
    public var changes: [Change]
    /// Whether this is the first event, listing the current values.
    public var initial: Bool
    /// The changes whose value is not the user's own (`system`: the machine's default, `locked`:
    /// the system administrator's locked value); every other change is the user's.
    public var sources: [Key: ValueSource]
    /// In a user's kvd that follows a system instance, the system instance's revision the event
    /// reflects (nil from a kvd that knows no system layer). A change of the system layer comes
    /// at an unchanged ``revision`` and a larger `systemRevision`: the events of one watch come
    /// in increasing order of (``revision``, `systemRevision`), compared as a pair.
    public var systemRevision: Int64?
    /// Who made the commit: the program, app id, pid and uid kvd learnt of the connection that
    /// asked for it; nil for the initial event, a change of the system layer, a change kvd made
    /// itself, a kvd that does not say, or (on the system instance) another user's change.
    public var writer: Writer?

    /// An event with these members (for tests and fakes; kvd's replies are decoded by ``Connection/watch(_:_:onEvent:)``).
    public init(
        revision: Int64, changes: [Change], initial: Bool, sources: [Key: ValueSource] = [:],
        systemRevision: Int64? = nil
    ) {
        self.revision = revision
        self.changes = changes
        self.initial = initial
        self.sources = sources
        self.systemRevision = systemRevision
    }

    /// The event a `Watch` reply (or a whole first reply gathered from its pieces) carries.
    init(_ reply: WatchReply) {
        self.init(
            revision: reply.revision, changes: reply.changes, initial: reply.initial, sources: reply.sources,
            systemRevision: reply.systemRevision)
        writer = reply.writer
    }

    /// Whether this event comes after one at `revision` and `systemRevision` (nil: 0): by
    /// revision, then by system revision.
    public func isAfter(revision: Int64, systemRevision: Int64?) -> Bool {
        (self.revision, self.systemRevision ?? 0) > (revision, systemRevision ?? 0)
    }
}

/// A domain as `List` returns it.
public struct DomainListing: Sendable, Equatable {
    /// The values kvd can read.
    public var values: [Key: Value]
    /// Keys whose stored values kvd cannot read (it keeps them as they are), with the reason.
    public var unreadable: [Key: String]
    /// The revision at which the domain last changed.
    public var revision: Int64
    /// The keys whose value is not the user's own (`system` or `locked`).
    public var sources: [Key: ValueSource]

    /// A listing with these members (for tests and fakes; kvd's replies are decoded by ``Connection/list(_:)``).
    public init(values: [Key: Value], unreadable: [Key: String], revision: Int64, sources: [Key: ValueSource] = [:]) {
        self.values = values
        self.unreadable = unreadable
        self.revision = revision
        self.sources = sources
    }
}

/// The methods of `io.kvd.Defaults`, typed.
extension Connection {
    /// A key's value and the revision at which it last changed. Throws `NotFound` for a missing key.
    public func get(_ domain: Domain, _ key: Key) throws(ClientError) -> (value: Value, revision: Int64) {
        let found = try getWithSource(domain, key)
        return (found.value, found.revision)
    }

    /// ``get(_:_:)`` with where the value comes from: the user's own value, the machine's
    /// default, or a value the system administrator locked (`user` from a kvd that does not say).
    /// `revision` is that of the user's own value (0 when the user has none).
    public func getWithSource(_ domain: Domain, _ key: Key) throws(ClientError) -> (
        value: Value, revision: Int64, source: ValueSource
    ) {
        let reply = try call(.get(domain, key))
        let source = try Decode.source(reply.parameters["source"], "source")
        return (try Decode.value(reply.parameters["value"], "value"), try Decode.revision(reply), source)
    }

    /// Sets a key; with `ifRevision`, only if it last changed then (0: only if absent).
    /// Returns the revision of the commit, which is durable when this returns.
    @discardableResult
    public func set(_ domain: Domain, _ key: Key, _ value: Value, ifRevision: Int64? = nil) throws(ClientError) -> Int64
    {
        try Decode.revision(try call(.set(domain, key, value, ifRevision: ifRevision)))
    }

    /// Removes a key, or with `key == nil` the whole domain. Returns the revision of the commit.
    @discardableResult
    public func delete(_ domain: Domain, _ key: Key? = nil) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.delete(domain, key)))
    }

    /// Commits all `changes` atomically; with `ifRevision`, only if the domain last changed then.
    @discardableResult
    public func apply(_ domain: Domain, _ changes: [Change], ifRevision: Int64? = nil) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.apply(domain, changes, ifRevision: ifRevision)))
    }

    /// All values of a domain, the keys whose stored values kvd cannot read, and the revision
    /// at which the domain last changed (`ListAll`; from a kvd older than `ListAll`, `List`,
    /// without the unreadable keys).
    ///
    /// A domain that with the system layer's values is larger than one reply (kvd answers
    /// `TooLarge`) is read through a `Watch`, which carries it in pieces: its listing has no
    /// unreadable keys then.
    public func list(_ domain: Domain) throws(ClientError) -> DomainListing {
        let reply: VarlinkReply
        do {
            reply = try call(.listAll(domain))
        } catch .methodNotFound {
            reply = try call(.list(domain))
        } catch .tooLarge {
            return try listByWatching(domain)
        }
        guard case .object(let members)? = reply.parameters["values"] else {
            throw .protocolError("List reply without a \"values\" object")
        }
        var listing = DomainListing(values: [:], unreadable: [:], revision: try Decode.revision(reply))
        for (name, json) in members {
            listing.values[try Decode.key(name)] = try Decode.value(json, "values.\(name)")
        }
        switch reply.parameters["unreadable"] {
        case nil: break
        case .object(let unreadable)?:
            for (name, reason) in unreadable {
                guard case .string(let text) = reason else {
                    throw .protocolError("List reply with a reason that is not a string")
                }
                listing.unreadable[try Decode.key(name)] = text
            }
        case _?: throw .protocolError("List reply whose \"unreadable\" is not an object")
        }
        switch reply.parameters["sources"] {
        case nil: break
        case .object(let sources)?:
            for (name, source) in sources {
                listing.sources[try Decode.key(name)] = try Decode.source(source, "sources.\(name)")
            }
        case _?: throw .protocolError("List reply whose \"sources\" is not an object")
        }
        return listing
    }

    /// The domain's current values from the first event of a `Watch` (on a connection of its
    /// own: this one is closed when the watch stops).
    private func listByWatching(_ domain: Domain) throws(ClientError) -> DomainListing {
        var listing: DomainListing?
        let own = try Connection(socketPath: socketPath, system: system)
        defer { own.close() }
        try own.watch(domain) { event in
            var values: [Key: Value] = [:]
            for change in event.changes { values[change.key] = change.value }
            listing = DomainListing(values: values, unreadable: [:], revision: event.revision, sources: event.sources)
            return false
        }
        guard let listing else { throw .protocolError("the watch ended before its first reply") }
        guard !listing.values.isEmpty else { throw .notFound(domain: domain.name, key: nil) }
        return listing
    }

    /// The names of all domains.
    public func domains() throws(ClientError) -> [Domain] {
        let reply = try call(.domains)
        guard case .array(let names)? = reply.parameters["domains"] else {
            throw .protocolError("Domains reply without a \"domains\" array")
        }
        var domains: [Domain] = []
        for name in names {
            guard case .string(let text) = name, let domain = try? Domain(validating: text) else {
                throw .protocolError("Domains reply with an invalid domain name")
            }
            domains.append(domain)
        }
        return domains
    }

    /// Watches a key (or with `key == nil` a whole domain): calls `onEvent` first with the current
    /// values (`initial: true`), then once per commit that touches them, until `onEvent` returns
    /// false (then the connection is closed) or kvd ends the stream. A lost connection throws.
    /// `onEvent` must not use this connection.
    ///
    /// A domain too large for one reply comes in several, the first with `initial` and all but
    /// the last with `partial`: they are given to `onEvent` as one initial event.
    public func watch(_ domain: Domain, _ key: Key? = nil, onEvent: (WatchEvent) -> Bool) throws(ClientError) {
        var gathering: WatchEvent?
        try stream(.watch(domain, key)) { (reply) throws(ClientError) -> Bool in
            let decoded = try Decode.watchReply(reply)
            let partial = decoded.partial
            var event = WatchEvent(decoded)
            if var first = gathering {
                first.changes += event.changes
                first.sources.merge(event.sources) { $1 }
                event = first
            } else if !event.initial || !partial {
                return onEvent(event)
            }
            gathering = partial ? event : nil
            return partial ? true : onEvent(event)
        }
    }
}

/// Reading typed results out of replies; anything unexpected is a ``ClientError/protocolError(_:)``.
enum Decode {
    static func revision(_ reply: VarlinkReply) throws(ClientError) -> Int64 {
        guard case .integer(let revision)? = reply.parameters["revision"] else {
            throw .protocolError("reply without an integer \"revision\"")
        }
        return revision
    }

    static func value(_ json: JSON?, _ member: String) throws(ClientError) -> Value {
        guard let json else { throw .protocolError("reply without \"\(member)\"") }
        do { return try Value(typedJSON: json) } catch {
            throw .protocolError("\"\(member)\" is not a typed value: \(error)")
        }
    }

    static func key(_ name: String) throws(ClientError) -> Key {
        do { return try Key(validating: name) } catch { throw .protocolError("reply with an invalid key: \(error)") }
    }

    /// A `Watch` reply (``WatchReply``), or why it is not one.
    static func watchReply(_ reply: VarlinkReply) throws(ClientError) -> WatchReply {
        do { return try WatchReply(decoding: reply) } catch {
            switch error {
            case .noChanges: throw .protocolError("Watch reply without a \"changes\" array")
            case .changeWithoutKey: throw .protocolError("Watch change without a \"key\"")
            case .invalidKey(let why): throw .protocolError("reply with an invalid key: \(why)")
            case .invalidValue(let why): throw .protocolError("\"changes.value\" is not a typed value: \(why)")
            case .invalidSource: throw .protocolError("\"changes.source\" is not \"user\", \"system\" or \"locked\"")
            case .noRevision: throw .protocolError("reply without an integer \"revision\"")
            default: throw .protocolError("malformed Watch reply: \(error)")
            }
        }
    }

    /// `"user"`, `"system"` or `"locked"`; absent means `user` (a kvd without a system layer).
    static func source(_ json: JSON?, _ member: String) throws(ClientError) -> ValueSource {
        guard let json else { return .user }
        guard case .string(let name) = json, let source = ValueSource(rawValue: name) else {
            throw .protocolError("\"\(member)\" is not \"user\", \"system\" or \"locked\"")
        }
        return source
    }
}
