import KVProtocol
import KVStorage
import KVValues

/// Turns validated requests into replies (reads) or store mutations (writes), and store
/// results into replies. Reads run on the caller's thread and never wait for I/O.
struct RequestHandler: Sendable {
    let store: Store

    /// What to do with one request.
    enum Outcome {
        case reply(VarlinkReply)
        case commit(Domain, Mutation)
        case watch(Domain, Key?)
    }

    func handle(_ request: DefaultsRequest) -> Outcome {
        switch request {
        case .get(let domain, let key):
            return .reply(get(domain, key))
        case .list(let domain), .listAll(let domain):
            guard let snapshot = store.list(domain) else { return .reply(Self.notFound(domain, nil)) }
            guard snapshot.fitsOneReply else { return .reply(Self.tooLargeToList(domain, snapshot)) }
            if case .listAll = request {
                return .reply(.list(snapshot.values, revision: snapshot.revision, unreadable: snapshot.unreadable))
            }
            return .reply(.list(snapshot.values, revision: snapshot.revision))
        case .domains:
            return .reply(VarlinkReply(parameters: ["domains": .array(store.domains().map { .string($0.name) })]))
        case .set(let domain, let key, let value, let ifRevision):
            return .commit(domain, .set(key, value, ifRevision: ifRevision))
        case .delete(let domain, let key?):
            return .commit(domain, .delete(key))
        case .delete(let domain, nil):
            return .commit(domain, .deleteDomain)
        case .apply(let domain, let changes, let ifRevision):
            return .commit(domain, .apply(changes, ifRevision: ifRevision))
        case .watch(let domain, let key):
            return .watch(domain, key)
        case .lock, .unlock, .locks, .mirror:
            return .reply(.failure(ServiceInterface.Error.methodNotFound, ["method": .string(request.call.method)]))
        case .getInfo:
            return .reply(
                VarlinkReply(parameters: [
                    "vendor": .string("kvd project"), "product": .string("kvd"),
                    "version": .string(DaemonOptions.version), "url": .string("https://kvd.invalid/"),
                    "interfaces": .array([.string(ServiceInterface.name), .string(DefaultsInterface.name)]),
                ]))
        case .getInterfaceDescription(let name):
            switch name {
            case DefaultsInterface.name: return .reply(VarlinkReply(parameters: ["description": .string(DefaultsInterface.description)]))
            case ServiceInterface.name: return .reply(VarlinkReply(parameters: ["description": .string(ServiceInterface.description)]))
            default: return .reply(.failure(ServiceInterface.Error.interfaceNotFound, ["interface": .string(name)]))
            }
        }
    }

    /// Appends the reply to `Get` to `out` (a value is written straight, without a
    /// ``VarlinkReply``); never waits for I/O.
    func writeGetReply(_ domain: Domain, _ key: Key, into out: inout [UInt8]) {
        if case .value(let value, let revision) = store.get(domain, key) {
            VarlinkReply.encodeValue(value.typedJSON, revision: revision, into: &out)
        } else {
            get(domain, key).encode(into: &out)
        }
    }

    /// The reply to `Get`; never waits for I/O.
    func get(_ domain: Domain, _ key: Key) -> VarlinkReply {
        switch store.get(domain, key) {
        case .value(let value, let revision):
            VarlinkReply(members: ["value": value.typedJSON, "revision": .integer(revision)])
        case .missing:
            Self.notFound(domain, key)
        case .unreadable(let reason):
            .failure(
                DefaultsInterface.Error.unreadableValue,
                [
                    "domain": .string(domain.name), "key": .string(key.name), "reason": .string(reason),
                ])
        }
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
        }
    }

    /// The reply to `List` of a domain no reply can carry (only a hand-made file can be that
    /// large: kvd refuses writes that would make one).
    static func tooLargeToList(_ domain: Domain, _ snapshot: DomainSnapshot) -> VarlinkReply {
        .failure(
            DefaultsInterface.Error.storageFailure,
            [
                "reason": .string(
                    "domain \(domain.name) takes \(snapshot.budgetBytes) bytes as typed JSON, more than one reply carries (\(Limits.domainBytes)); read its keys one by one, or remove some"
                )
            ])
    }

    static func notFound(_ domain: Domain, _ key: Key?) -> VarlinkReply {
        var parameters: [String: JSON] = ["domain": .string(domain.name)]
        if let key { parameters["key"] = .string(key.name) }
        return .failure(DefaultsInterface.Error.notFound, parameters)
    }

    /// The first reply of a watch: the current values (all, or the one key) as changes.
    func initialWatchReply(_ domain: Domain, _ key: Key?, revision: Int64) -> VarlinkReply {
        var changes: [Change] = []
        if let snapshot = store.list(domain) {
            for (name, value) in snapshot.values where key == nil || key == name {
                changes.append(Change(key: name, value: value))
            }
        }
        changes.sort { $0.key < $1.key }
        return Self.watchReply(revision: revision, changes: changes, initial: true)
    }

    static func watchReply(revision: Int64, changes: [Change], initial: Bool) -> VarlinkReply {
        .watch(revision: revision, changes: changes, initial: initial)
    }
}
