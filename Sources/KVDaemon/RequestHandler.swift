import KVFleet
import KVProtocol
import KVStorage
import KVValues

/// Turns validated requests into replies (reads) or store mutations (writes), and store
/// results into replies. Reads run on the caller's thread and never wait for I/O.
///
/// A user's kvd combines its store with the ``SystemLayer`` (see there for the search order)
/// in every read, and refuses writes to locked keys; the system instance (``isSystem``) also
/// serves `io.kvd.System`, keeping locks in the store's internal lock domains. Loop thread
/// only (the layer is the loop's). The handler reads the layer; only its ``SystemFollower``
/// changes it.
struct RequestHandler {
    let store: Store
    /// Follows the system instance: holds the layer reads combine with.
    let follower: SystemFollower
    /// The system layer a user's kvd combines with its store; empty for the system instance.
    var layer: SystemLayer { follower.layer }
    /// This is the system instance (`kvd --system`).
    let isSystem: Bool
    /// The system instance's fleet domains (`--etcd`): mirrored from etcd, changed there.
    let fleet: FleetLayout?
    /// The system instance's drop-in files, beneath what admins set (unused in a user's kvd).
    let dropIns = DropInLayer()
    /// `Mirror` snapshots shared by every caller with the same profile (system instance only).
    let mirrorSnapshots = MirrorSnapshots()

    init(store: Store, follower: SystemFollower = SystemFollower(), isSystem: Bool = false, fleet: FleetLayout? = nil) {
        self.store = store
        self.follower = follower
        self.isSystem = isSystem
        self.fleet = fleet
    }

    /// What to do with one request.
    enum Outcome {
        case reply(VarlinkReply)
        case commit(Domain, Mutation)
        case watch(Domain, Key?)
        /// `WatchAll`: stream every commit and layer change of the domains under the prefix
        /// (with `current`, after their current values).
        case watchAll(prefix: Domain?, current: Bool)
        /// `io.kvd.System.Mirror`: stream every domain and every commit (with dconf's profile
        /// the caller named).
        case mirror(dconfProfile: String?)
        /// A change to a fleet domain, to make in etcd (the system instance with `--etcd`).
        case fleetWrite(FleetWriter.Change)
        /// `io.kvd.System.Status`: answered with ``statusReply(fleet:)``.
        case status
        /// Replies made piece by piece as the client reads them (`Backup`'s); the client's
        /// next calls wait for the last.
        case stream(ReplyStream)
        /// `ForgetHistory` or `KeepHistory`: made on the store's commit queue, answered with
        /// the revision like a write.
        case historyChange(Domain, HistoryChange)
        /// `io.kvd.System.Source`: answered with ``sourceReply(_:_:for:)`` for the caller.
        case source(Domain, Key)
        /// `io.kvd.System.Locks`: answered with ``locksReply(_:for:)`` for the caller.
        case locks(Domain?)
    }

    /// What to do with `request`: a read is answered here, from the store and the layer,
    /// without waiting for I/O; a write becomes a mutation to commit, unless it touches a
    /// locked key (then the refusal); a fleet domain's write goes to etcd; a watch, a stream or
    /// a history change is handed back for the loop to start. `io.kvd.System` is served by the
    /// system instance only (`MethodNotFound` elsewhere).
    func handle(_ request: DefaultsRequest) -> Outcome {
        if fleet != nil, let write = fleetWrite(request) { return write }
        switch request {
        case .get(let domain, let key):
            return .reply(get(domain, key))
        case .list(let domain), .listAll(let domain):
            return .reply(list(domain, withUnreadable: request == .listAll(domain)))
        case .domains:
            return .reply(domainNames())
        case .set(let domain, let key, let value, let ifRevision):
            return refusal(domain, [key]) ?? .commit(domain, .set(key, value, ifRevision: ifRevision))
        case .delete(let domain, let key?):
            return refusal(domain, [key]) ?? .commit(domain, .delete(key))
        case .delete(let domain, nil):
            return refusal(domain, layer.layer(domain)?.locks.sorted() ?? []) ?? .commit(domain, .deleteDomain)
        case .apply(let domain, let changes, let ifRevision):
            return refusal(domain, changes.lazy.map(\.key)) ?? .commit(domain, .apply(changes, ifRevision: ifRevision))
        case .watch(let domain, let key):
            return .watch(domain, key)
        case .watchAll(let prefix, let current):
            return .watchAll(prefix: prefix, current: current)
        case .snapshot(let domain):
            return .reply(snapshot(domain))
        case .history, .blame, .forgetHistory, .keepHistory:
            return handleHistory(request)
        case .backup:
            return .stream(backupStream())
        case .permit, .revoke, .permits:
            return handlePermits(request)
        case .lock, .unlock, .locks, .mirror, .status, .reload, .systemSource:
            guard isSystem else {
                return .reply(.failure(ServiceInterface.Error.methodNotFound, ["method": .string(request.call.method)]))
            }
            return handleSystem(request)
        case .getInfo:
            return .reply(info())
        case .getInterfaceDescription(let name):
            return .reply(interfaceDescription(name))
        }
    }

    /// `Domains`: the user's domains (not the internal ones) and the system layer's domains
    /// that hold a value, sorted; only those `included` takes (a sandboxed caller's). A system
    /// domain that holds only locks has nothing to read: not listed (`Get` and `List` of it are
    /// NotFound).
    func domainNames(where included: (Domain) -> Bool = { _ in true }) -> VarlinkReply {
        var names = Set(store.domains().filter { !$0.isInternal && included($0) })
        names.formUnion(layer.domains.filter { !$0.value.values.isEmpty && included($0.key) }.map(\.key))
        return VarlinkReply(parameters: ["domains": .array(names.sorted().map { .string($0.name) })])
    }

    /// `org.varlink.service.GetInfo`: who made this kvd, its version, and the interfaces it
    /// serves (`io.kvd.System` on the system instance only).
    private func info() -> VarlinkReply {
        var interfaces = [ServiceInterface.name, DefaultsInterface.name]
        if isSystem { interfaces.append(SystemInterface.name) }
        return VarlinkReply(parameters: [
            "vendor": .string("kvd project"), "product": .string("kvd"),
            "version": .string(DaemonOptions.version), "url": .string("https://kvd.invalid/"),
            "interfaces": .array(interfaces.map(JSON.string)),
        ])
    }

    /// `org.varlink.service.GetInterfaceDescription`: the text of interface `name` as ``info()``
    /// lists it; `InterfaceNotFound` for any other (`io.kvd.System` on a user's kvd too).
    private func interfaceDescription(_ name: String) -> VarlinkReply {
        let description: String
        switch name {
        case DefaultsInterface.name: description = DefaultsInterface.description
        case ServiceInterface.name: description = ServiceInterface.description
        case SystemInterface.name where isSystem: description = SystemInterface.description
        default: return .failure(ServiceInterface.Error.interfaceNotFound, ["interface": .string(name)])
        }
        return VarlinkReply(parameters: ["description": .string(description)])
    }

    /// A write to a fleet domain: made in etcd by the ``FleetWriter`` (the mirror then holds
    /// what etcd holds).
    private func fleetWrite(_ request: DefaultsRequest) -> Outcome? {
        guard let fleet, request.isWrite else { return nil }
        let change: FleetWriter.Change
        switch request {
        case .set(let domain, let key, let value, let ifRevision):
            change = .mutation(domain, .set(key, value, ifRevision: ifRevision))
        case .delete(let domain, let key?): change = .mutation(domain, .delete(key))
        case .delete(let domain, nil): change = .mutation(domain, .deleteDomain)
        case .apply(let domain, let changes, let ifRevision):
            change = .mutation(domain, .apply(changes, ifRevision: ifRevision))
        case .lock(let domain, let key): change = .lock(domain, key)
        case .unlock(let domain, let key): change = .unlock(domain, key)
        default: return nil
        }
        return fleet.isFleetDomain(change.domain) ? .fleetWrite(change) : nil
    }

    /// `KeyLocked` for the first of `keys` the system layer locks in `domain`; `nil` if none is.
    /// Before the system layer's first snapshot, while the system instance answers, every
    /// write is refused (`StorageFailure`, saying to try again): which keys it locks is not
    /// known yet (``SystemFollower/awaitsFirstLayer``).
    private func refusal(_ domain: Domain, _ keys: some Sequence<Key>) -> Outcome? {
        if follower.awaitsFirstLayer {
            return .reply(
                Self.reply(
                    to: StorageError.failure(
                        "the system instance's locks have not arrived yet (kvd is starting): try again in a moment")))
        }
        guard !layer.isEmpty, let locks = layer.layer(domain)?.locks, !locks.isEmpty,
            let key = keys.first(where: locks.contains)
        else { return nil }
        return .reply(
            .failure(DefaultsInterface.Error.keyLocked, ["domain": .string(domain.name), "key": .string(key.name)]))
    }

    /// A `Get`, resolved: the value with its revision and source, or the error reply.
    enum Resolved {
        case value(Value, revision: Int64, source: ValueSource)
        case failure(VarlinkReply)
    }

    /// The value a `Get` finds, as the layers combine; never waits for I/O.
    func resolve(_ domain: Domain, _ key: Key) -> Resolved {
        let lookup = store.get(domain, key)
        if !layer.isEmpty, let system = layer.layer(domain) {
            var user: Value?
            var revision: Int64 = 0
            switch lookup {
            case .value(let value, let at): (user, revision) = (value, at)
            case .unreadable(let reason) where !system.locks.contains(key):
                return .failure(Self.unreadable(domain, key, reason))
            case .unreadable, .missing: break
            }
            guard let combined = system.combine(key, user: user) else { return .failure(Self.notFound(domain, key)) }
            return .value(combined.value, revision: revision, source: combined.source)
        }
        switch lookup {
        case .value(let value, let revision):
            return .value(
                value, revision: revision,
                source: isSystem && isLocked(domain, key) ? .locked : isSystem ? .system : .user)
        case .missing: return .failure(Self.notFound(domain, key))
        case .unreadable(let reason): return .failure(Self.unreadable(domain, key, reason))
        }
    }

    /// Appends the reply to `Get` to `out` (a value is written straight, without a
    /// ``VarlinkReply``); never waits for I/O.
    func writeGetReply(_ domain: Domain, _ key: Key, into out: inout [UInt8]) {
        if !isSystem, layer.isEmpty || layer.layer(domain) == nil {
            return writeStoredGetReply(domain, key, into: &out)
        }
        switch resolve(domain, key) {
        case .value(let value, let revision, let source):
            VarlinkReply.encodeValue(value.typedJSON, revision: revision, source: source, into: &out)
        case .failure(let reply): reply.encode(into: &out)
        }
    }

    /// ``writeGetReply(_:_:into:)`` in a user's instance, of a domain the system layer does not
    /// hold: the value's stored typed JSON copied into the reply as it is (the reply
    /// ``resolve(_:_:)`` gives, without decoding and encoding the value again).
    private func writeStoredGetReply(_ domain: Domain, _ key: Key, into out: inout [UInt8]) {
        var failure: VarlinkReply?
        store.withValueJSON(domain, key) { found in
            switch found {
            case .value(let json, let revision):
                VarlinkReply.encodeValue(typedJSON: json, revision: revision, source: .user, into: &out)
            case .missing: failure = Self.notFound(domain, key)
            case .unreadable(let reason): failure = Self.unreadable(domain, key, reason)
            }
        }
        failure?.encode(into: &out)
    }

    /// The reply to `Get`; never waits for I/O.
    func get(_ domain: Domain, _ key: Key) -> VarlinkReply {
        switch resolve(domain, key) {
        case .value(let value, let revision, let source): .value(value.typedJSON, revision: revision, source: source)
        case .failure(let reply): reply
        }
    }

    /// The reply to `List` (with `withUnreadable`, to `ListAll`), as the layers combine.
    func list(_ domain: Domain, withUnreadable: Bool) -> VarlinkReply {
        let system = layer.layer(domain)
        guard let view = combined(domain, system) else { return Self.notFound(domain, nil) }
        let bytes = combinedBudget(view.snapshot, system)
        guard bytes <= Limits.domainBytes else {
            return Self.tooLargeToList(domain, bytes: bytes, layered: system != nil)
        }
        return .list(
            view.values, revision: view.snapshot.revision, unreadable: withUnreadable ? view.snapshot.unreadable : nil,
            sources: view.sources)
    }

    /// The reply to `Snapshot`: ``currentChanges(_:_:)`` at the store's revision, in one reply.
    func snapshot(_ domain: Domain) -> VarlinkReply {
        let system = layer.layer(domain)
        if let view = combined(domain, system), case let bytes = combinedBudget(view.snapshot, system),
            bytes > Limits.domainBytes
        {
            return Self.tooLargeToList(domain, bytes: bytes, layered: system != nil)
        }
        let (changes, sources) = currentChanges(domain, nil)
        var reply = WatchReply(
            revision: store.revision, changes: changes, initial: true, sources: sources,
            systemRevision: layer.revision
        ).reply
        reply.continues = false
        return reply
    }

    /// A domain's current values (all, or the one key) as changes, sorted by key, as the layers
    /// combine, with the sources not the user's: what a `Watch` starts with. A key locked
    /// without a system value is a change with no value and the source "locked".
    func currentChanges(_ domain: Domain, _ key: Key?) -> (changes: [Change], sources: [Key: ValueSource]) {
        currentChanges(domain, key, user: store.list(domain))
    }

    /// ``currentChanges(_:_:)`` with the user's values `user` (taken from the store before).
    func currentChanges(_ domain: Domain, _ key: Key?, user: DomainSnapshot?) -> (
        changes: [Change], sources: [Key: ValueSource]
    ) {
        var changes: [Change] = []
        var sources: [Key: ValueSource] = [:]
        let system = layer.layer(domain)
        if let view = combined(domain, system, user: user) {
            for (name, value) in view.values where key == nil || key == name {
                changes.append(Change(key: name, value: value))
            }
            sources = view.sources
        }
        for name in system?.valuelessLocks ?? [] where key == nil || key == name {
            changes.append(Change(key: name, value: nil))
            sources[name] = .locked
        }
        changes.sort { $0.key < $1.key }
        return (changes, sources)
    }

    /// The user's domain and the system layer's, combined; `nil` when neither has it. What
    /// `List` reads and a `Watch` starts with (``WatchFanOut/initialWatchStream(_:_:revision:)``).
    func combined(_ domain: Domain, _ system: SystemLayer.DomainLayer?) -> (
        snapshot: DomainSnapshot, values: [Key: Value], sources: [Key: ValueSource]
    )? {
        combined(domain, system, user: store.list(domain))
    }

    /// ``combined(_:_:)`` with the user's values `snapshot` (taken from the store before).
    func combined(_ domain: Domain, _ system: SystemLayer.DomainLayer?, user snapshot: DomainSnapshot?) -> (
        snapshot: DomainSnapshot, values: [Key: Value], sources: [Key: ValueSource]
    )? {
        guard let system else { return snapshot.map { ($0, $0.values, [:]) } }
        let base = snapshot ?? DomainSnapshot(values: [:], revisions: [:], unreadable: [:], revision: 0)
        let (values, sources) = system.combine(user: base.values)
        if snapshot == nil, values.isEmpty { return nil }
        return (base, values, sources)
    }

    /// What the domain as the layers combine takes of ``Limits/domainBytes`` (``DomainBudget``):
    /// the user's entries, less those the layer hides, plus the system values it shows.
    func combinedBudget(_ user: DomainSnapshot, _ system: SystemLayer.DomainLayer?) -> Int {
        guard let system else { return user.budgetBytes }
        var bytes = user.budgetBytes
        for (key, value) in user.values where system.locks.contains(key) || system.values[key] != nil {
            bytes -= SystemLayer.DomainLayer.cost(key, value)
        }
        for (key, value) in system.values { bytes += SystemLayer.DomainLayer.cost(key, value) }
        return bytes
    }

    /// The system instance: whether `key` of `domain` is locked.
    func isLocked(_ domain: Domain, _ key: Key) -> Bool {
        if case .value = store.get(Domain.locks(of: domain), key) { return true }
        return false
    }

    /// The reply to a write once the store has finished with it.
    static func reply(to result: Result<Commit, StorageError>) -> VarlinkReply {
        switch result {
        case .success(let commit): VarlinkReply(members: ["revision": .integer(commit.revision)])
        case .failure(let error): reply(to: error)
        }
    }

    static func reply(to error: StorageError) -> VarlinkReply {
        switch error {
        case .notFound(let domain, let key): notFound(domain, key)
        case .revisionMismatch(let current):
            .failure(DefaultsInterface.Error.revisionMismatch, ["revision": .integer(current)])
        case .failure(let reason), .locked(let reason), .invalidStateDirectory(let reason):
            .failure(DefaultsInterface.Error.storageFailure, ["reason": .string(reason)])
        case .tooLarge(let limit, _):
            .failure(DefaultsInterface.Error.tooLarge, ["limit": .integer(Int64(limit))])
        case .invalidValue(let reason):
            .failure(DefaultsInterface.Error.invalidValue, ["reason": .string(reason)])
        case .outcomeUnknown(let reason):
            .failure(DefaultsInterface.Error.outcomeUnknown, ["reason": .string(reason)])
        }
    }

    /// The reply to `List` of a domain no reply can carry, `bytes` as ``DomainBudget`` counts
    /// them: only a hand-made file can be that large, or (`layered`) the user's values with the
    /// system layer's of the same domain. A `Watch` carries it in pieces.
    static func tooLargeToList(_ domain: Domain, bytes: Int, layered: Bool) -> VarlinkReply {
        let what = layered ? "with the system layer's values" : "as typed JSON"
        return .failure(
            DefaultsInterface.Error.tooLarge,
            [
                "limit": .integer(Int64(Limits.domainBytes)),
                "reason": .string(
                    "domain \(domain.name) takes \(bytes) bytes \(what), more than one List reply carries (\(Limits.domainBytes)); read its keys one by one, or watch it (kvctl watch), which sends it in pieces"
                ),
            ])
    }

    static func unreadable(_ domain: Domain, _ key: Key, _ reason: String) -> VarlinkReply {
        .failure(
            DefaultsInterface.Error.unreadableValue,
            ["domain": .string(domain.name), "key": .string(key.name), "reason": .string(reason)])
    }

    /// `NotFound`; for a lock domain (an `Unlock` of a key not locked), of the domain it locks.
    static func notFound(_ domain: Domain, _ key: Key?) -> VarlinkReply {
        var parameters: [String: JSON] = ["domain": .string((domain.lockedDomain ?? domain).name)]
        if let key { parameters["key"] = .string(key.name) }
        return .failure(DefaultsInterface.Error.notFound, parameters)
    }
}
