import KVValues

extension Change {
    /// The `Change` varlink object: `{"key": ..., "value": ...}`, no `value` for a removal.
    public var json: JSON { json(source: .user) }

    /// The `Change` object of a `Watch` reply: with `"source"` when the value is not the user's.
    public func json(source: ValueSource) -> JSON {
        var members: [String: JSON] = ["key": .string(key.name)]
        if let value { members["value"] = value.typedJSON }
        if source != .user { members["source"] = .string(source.rawValue) }
        return .object(members)
    }
}

extension Change {
    /// Validates an array of `Change` objects (of a call or a reply) named `name`: every key and
    /// value by the contract's rules. Throws the error reply a call with them gets.
    public static func list(_ json: JSON, named name: String) throws(RequestError) -> [Change] {
        guard case .array(let elements) = json else { throw Parameters.invalid(name) }
        var changes: [Change] = []
        for element in elements {
            guard case .object(let change) = element, case .string(let keyName)? = change["key"] else {
                throw Parameters.invalid(name)
            }
            let key = try Parameters.key(keyName)
            switch change["value"] {
            case nil, .null?: changes.append(Change(key: key, value: nil))
            case let json?: changes.append(Change(key: key, value: try Parameters.value(json)))
            }
        }
        return changes
    }
}

/// Where a value a user's kvd serves comes from, as the layers combine.
public enum ValueSource: String, Sendable, Equatable, CaseIterable {
    /// The user's own value.
    case user
    /// The default the machine's system instance holds (no lock; the user has no value).
    case system
    /// The system instance's value of a key it locked (any value of the user's is kept, unseen).
    case locked
}

extension VarlinkReply {
    /// The reply to `List`: every value of a domain, and the revision at which it last changed.
    /// Its size is what ``DomainBudget`` counts, with less overhead per key than a ``WatchReply``.
    /// With `unreadable`, the reply to `ListAll`, which also names the keys whose stored values
    /// cannot be read, with the reason.
    /// `sources` names the values that do not come from the user (a user's kvd with a system layer).
    public static func list(
        _ values: [Key: Value], revision: Int64, unreadable: [Key: String]? = nil, sources: [Key: ValueSource] = [:]
    ) -> VarlinkReply {
        let members = values.reduce(into: [String: JSON]()) { $0[$1.key.name] = $1.value.typedJSON }
        var parameters: [String: JSON] = ["values": .object(members), "revision": .integer(revision)]
        if !sources.isEmpty {
            parameters["sources"] = .object(sources.reduce(into: [:]) { $0[$1.key.name] = .string($1.value.rawValue) })
        }
        if let unreadable {
            parameters["unreadable"] = .object(unreadable.reduce(into: [:]) { $0[$1.key.name] = .string($1.value) })
        }
        return VarlinkReply(parameters: parameters)
    }
}

/// A call to kvd, validated: names are `Domain`/`Key`, values are `Value`.
///
/// Built once at the edge by ``init(call:)``; the daemon dispatches on it and never re-checks.
public enum DefaultsRequest: Sendable, Equatable {
    case get(Domain, Key)
    case set(Domain, Key, Value, ifRevision: Int64?)
    case delete(Domain, Key?)
    case apply(Domain, [Change], ifRevision: Int64?)
    case list(Domain)
    /// `ListAll`: `List` plus the keys whose stored values cannot be read.
    case listAll(Domain)
    case domains
    case watch(Domain, Key?)
    /// `WatchAll` (needs `more`): the changes of every domain whose name starts with the prefix
    /// (of every domain when nil), one reply per domain and commit; with `current`, first the
    /// current values of those domains, within a budget (the others named as withheld).
    case watchAll(prefix: Domain?, current: Bool = false)
    /// `Snapshot`: a domain's current values as a `Watch`'s first reply, at the store's revision.
    case snapshot(Domain)
    case getInfo
    case getInterfaceDescription(String)
    /// `io.kvd.System.Lock` (system instance only).
    case lock(Domain, Key)
    /// `io.kvd.System.Unlock` (system instance only).
    case unlock(Domain, Key)
    /// `io.kvd.System.Locks`, of one domain or all (system instance only).
    case locks(Domain?)
    /// `io.kvd.System.Mirror` (system instance only): every domain, then every commit;
    /// `dconfProfile`: the caller's `DCONF_PROFILE` (which of dconf's profiles it gets).
    case mirror(dconfProfile: String?)
    /// `io.kvd.System.Status` (system instance only): revision, domains, the fleet's state.
    case status
    /// `io.kvd.System.Reload` (system instance only, admins): reads the drop-in files again.
    case reload
    /// `io.kvd.System.Source` (system instance only): which layer and file `key` comes from.
    case systemSource(Domain, Key)
    /// `History`: the kept changes of a domain (or key), newest first, at most `limit`, older
    /// than `beforeRevision` if given; with `atRevision`, the entries that made its state at
    /// that revision.
    case history(Domain, Key?, limit: Int64?, atRevision: Int64?, beforeRevision: Int64? = nil)
    /// `ForgetHistory`: removes the past values of a key (of the whole domain, if nil) from
    /// every file kvd keeps.
    case forgetHistory(Domain, Key?)
    /// `KeepHistory`: marks a key (the whole domain, if nil) to keep history, or none.
    case keepHistory(Domain, Key?, keep: Bool)
    /// `Backup` (needs `more`): every domain at one revision, one reply per domain.
    case backup
    /// `Blame`: for each current key of a domain (or the one key), who set its value.
    case blame(Domain, Key?)
    /// `Permit`: grants a sandboxed app the domains a pattern reaches (`kvctl permit`).
    case permit(Permit)
    /// `Revoke`: takes back what `Permit` granted the app for the pattern.
    case revoke(AppID, DomainPattern)
    /// `Permits`: what users granted sandboxed apps (one app's, or every app's).
    case permits(AppID?)

    /// Whether the request changes anything (what only admins may do on a system instance).
    public var isWrite: Bool {
        switch self {
        case .set, .delete, .apply, .lock, .unlock, .forgetHistory, .keepHistory, .permit, .revoke: true
        case .get, .list, .listAll, .domains, .watch, .watchAll, .snapshot, .getInfo, .getInterfaceDescription,
            .locks, .mirror, .status, .history, .backup, .reload, .systemSource, .blame, .permits:
            false
        }
    }

    /// Whether only admins may make the request on a system instance: every write, and
    /// `History`, `Blame` (past and deleted values, and who set them, are the admins' alone)
    /// and `Permits`.
    public var isPrivileged: Bool {
        if case .history = self { return true }
        if case .permits = self { return true }
        if case .blame = self { return true }
        if case .reload = self { return true }
        return isWrite
    }

    /// Validates `call`. Throws the error reply to send: `MethodNotFound`, `InvalidParameter`
    /// (a missing or mistyped parameter), `InvalidName`, `InvalidValue` or `ExpectedMore`.
    public init(call: VarlinkCall) throws(RequestError) {
        let p = Parameters(call.parameterMembers)
        switch call.method {
        case "io.kvd.Defaults.Get": self = .get(try p.domain(), try p.key())
        case "io.kvd.Defaults.Set":
            self = .set(try p.domain(), try p.key(), try p.value("value"), ifRevision: try p.optionalInt("ifRevision"))
        case "io.kvd.Defaults.Delete": self = .delete(try p.domain(), try p.optionalKey())
        case "io.kvd.Defaults.Apply":
            self = .apply(try p.domain(), try p.changes(), ifRevision: try p.optionalInt("ifRevision"))
        case "io.kvd.Defaults.List": self = .list(try p.domain())
        case "io.kvd.Defaults.ListAll": self = .listAll(try p.domain())
        case "io.kvd.Defaults.Domains": self = .domains
        case "io.kvd.Defaults.History": self = try Self.history(p)
        case "io.kvd.Defaults.Blame": self = .blame(try p.domain(), try p.optionalKey())
        case "io.kvd.Defaults.ForgetHistory": self = .forgetHistory(try p.domain(), try p.optionalKey())
        case "io.kvd.Defaults.KeepHistory":
            self = .keepHistory(try p.domain(), try p.optionalKey(), keep: try p.bool("keep"))
        case "io.kvd.Defaults.Backup":
            guard call.more else { throw RequestError(.failure(ServiceInterface.Error.expectedMore)) }
            self = .backup
        case "io.kvd.Defaults.Watch":
            guard call.more else { throw RequestError(.failure(ServiceInterface.Error.expectedMore)) }
            self = .watch(try p.domain(), try p.optionalKey())
        case "io.kvd.Defaults.Snapshot": self = .snapshot(try p.domain())
        case "io.kvd.Defaults.WatchAll":
            guard call.more else { throw RequestError(.failure(ServiceInterface.Error.expectedMore)) }
            self = .watchAll(prefix: try p.optionalDomain("prefix"), current: try p.optionalBool("current") ?? false)
        case "io.kvd.Defaults.Permit", "io.kvd.Defaults.Revoke", "io.kvd.Defaults.Permits":
            self = try Self.permits(call.method, p)
        case let method where method.hasPrefix("io.kvd.System."): self = try Self.system(call, p)
        case "org.varlink.service.GetInfo": self = .getInfo
        case "org.varlink.service.GetInterfaceDescription": self = .getInterfaceDescription(try p.string("interface"))
        default:
            throw RequestError(.failure(ServiceInterface.Error.methodNotFound, ["method": .string(call.method)]))
        }
    }

    /// A call of `io.kvd.System`.
    private static func system(_ call: VarlinkCall, _ p: Parameters) throws(RequestError) -> DefaultsRequest {
        switch call.method {
        case "io.kvd.System.Lock": return .lock(try p.domain(), try p.key())
        case "io.kvd.System.Unlock": return .unlock(try p.domain(), try p.key())
        case "io.kvd.System.Locks": return .locks(try p.optionalDomain())
        case "io.kvd.System.Mirror":
            guard call.more else { throw RequestError(.failure(ServiceInterface.Error.expectedMore)) }
            return .mirror(dconfProfile: try p.optionalString("dconfProfile"))
        case "io.kvd.System.Status": return .status
        case "io.kvd.System.Reload": return .reload
        case "io.kvd.System.Source": return .systemSource(try p.domain(), try p.key())
        default:
            throw RequestError(.failure(ServiceInterface.Error.methodNotFound, ["method": .string(call.method)]))
        }
    }

    /// `History`: a limit above 0, a revision from 0, a `beforeRevision` above 0, each optional.
    private static func history(_ p: Parameters) throws(RequestError) -> DefaultsRequest {
        let limit = try p.optionalInt("limit")
        guard limit.map({ $0 > 0 }) ?? true else { throw Parameters.invalid("limit") }
        let revision = try p.optionalInt("atRevision")
        guard revision.map({ $0 >= 0 }) ?? true else { throw Parameters.invalid("atRevision") }
        let before = try p.optionalInt("beforeRevision")
        guard before.map({ $0 > 0 }) ?? true else { throw Parameters.invalid("beforeRevision") }
        return .history(try p.domain(), try p.optionalKey(), limit: limit, atRevision: revision, beforeRevision: before)
    }
}

/// A request refused at the edge, carrying the error reply to send.
public struct RequestError: Error, Sendable, Equatable {
    public var reply: VarlinkReply

    public init(_ reply: VarlinkReply) {
        self.reply = reply
    }
}

/// Typed access to call parameters; every failure is the reply the caller gets.
struct Parameters {
    let members: JSONMembers

    init(_ members: JSONMembers) {
        self.members = members
    }

    static func invalid(_ name: String) -> RequestError {
        RequestError(.failure(ServiceInterface.Error.invalidParameter, ["parameter": .string(name)]))
    }

    func string(_ name: String) throws(RequestError) -> String {
        guard case .string(let text)? = members[name] else { throw Self.invalid(name) }
        return text
    }

    func bool(_ name: String) throws(RequestError) -> Bool {
        guard case .bool(let flag)? = members[name] else { throw Self.invalid(name) }
        return flag
    }

    func optionalBool(_ name: String) throws(RequestError) -> Bool? {
        switch members[name] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw Self.invalid(name)
        }
    }

    func optionalString(_ name: String) throws(RequestError) -> String? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw Self.invalid(name)
        }
    }

    func optionalInt(_ name: String) throws(RequestError) -> Int64? {
        switch members[name] {
        case nil, .null?: return nil
        case .integer(let number)?: return number
        default: throw Self.invalid(name)
        }
    }

    func domain() throws(RequestError) -> Domain {
        let name = try string("domain")
        do { return try Domain(validating: name) } catch { throw RequestError(Self.nameFailure(error)) }
    }

    func optionalDomain(_ name: String = "domain") throws(RequestError) -> Domain? {
        switch members[name] {
        case nil, .null?: return nil
        case .string(let text)?:
            do { return try Domain(validating: text) } catch { throw RequestError(Self.nameFailure(error)) }
        default: throw Self.invalid(name)
        }
    }

    func key() throws(RequestError) -> Key {
        try Self.key(try string("key"))
    }

    func optionalKey() throws(RequestError) -> Key? {
        switch members["key"] {
        case nil, .null?: return nil
        case .string(let name)?: return try Self.key(name)
        default: throw Self.invalid("key")
        }
    }

    func value(_ name: String) throws(RequestError) -> Value {
        guard let json = members[name], json != .null else { throw Self.invalid(name) }
        return try Self.value(json)
    }

    func changes() throws(RequestError) -> [Change] {
        guard let json = members["changes"] else { throw Self.invalid("changes") }
        return try Change.list(json, named: "changes")
    }

    static func key(_ name: String) throws(RequestError) -> Key {
        do { return try Key(validating: name) } catch { throw RequestError(nameFailure(error)) }
    }

    static func value(_ json: JSON) throws(RequestError) -> Value {
        do {
            let value = try Value(typedJSON: json)
            try value.validate()
            return value
        } catch {
            throw RequestError(.failure(DefaultsInterface.Error.invalidValue, ["reason": .string(error.description)]))
        }
    }

    static func nameFailure(_ error: NameError) -> VarlinkReply {
        .failure(DefaultsInterface.Error.invalidName, ["name": .string(error.name), "reason": .string(error.reason)])
    }
}
