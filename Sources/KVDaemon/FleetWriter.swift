import Dispatch
import KVFleet
import KVStorage
import KVValues

/// An admin's change to a fleet domain through a host's system instance (`kvctl --system set`,
/// `delete`, `lock`, `unlock`, `Apply`): made in etcd, the fleet's source of truth, as one
/// transaction, and acknowledged once etcd has committed it and this host's mirror has applied
/// it, so the writing host reads its own write.
///
/// Each value or lock the change writes is compared in the transaction with what the mirror
/// holds: etcd's copy must not have changed after the revision the mirror reached, so a change
/// made on another host meanwhile is never overwritten unseen (the loser gets
/// `RevisionMismatch`). A change etcd refuses as too large (1.5 MiB per request, 128 operations
/// per transaction by default) is `TooLarge` and is never split into partial commits; with etcd
/// unreachable it is `StorageFailure` and nothing changes.
///
/// Threading: writes run one at a time on the writer's own queue; `completion` runs there.
final class FleetWriter: Sendable {
    /// One change, as the system instance's handler passes it on.
    enum Change: Sendable {
        case mutation(Domain, Mutation)
        case lock(Domain, Key)
        case unlock(Domain, Key)
    }

    let store: Store
    let etcd: any EtcdAPI
    let layout: FleetLayout
    let mirror: FleetMirror
    /// How long to wait for the mirror to apply a committed change before answering anyway.
    let mirrorTimeout: Duration
    private let queue = DispatchQueue(label: "kvd.fleet-writer")

    init(store: Store, etcd: any EtcdAPI, layout: FleetLayout, mirror: FleetMirror, mirrorTimeout: Duration = .seconds(10)) {
        self.store = store
        self.etcd = etcd
        self.layout = layout
        self.mirror = mirror
        self.mirrorTimeout = mirrorTimeout
    }

    /// Makes `change` in etcd on the writer's queue; `completion` gets the outcome there.
    func submit(_ change: Change, completion: @escaping @Sendable (Result<Commit, StorageError>) -> Void) {
        queue.async { [self] in completion(Result { () throws(StorageError) in try write(change) }) }
    }

    /// Makes `change` in etcd and waits until the mirror holds it. Blocks.
    func write(_ change: Change) throws(StorageError) -> Commit {
        let domain = change.domain
        let transaction = try self.transaction(for: change, after: mirror.appliedRevision)
        let outcome: (succeeded: Bool, revision: Int64)
        do {
            // A linearizable read first: without a quorum it fails and the transaction is never
            // sent. A transaction sent to a leader that has lost its quorum times out, yet
            // commits once the quorum is back: the caller would have been told it failed.
            _ = try etcd.range(from: Array(layout.prefix.utf8), end: [], revision: nil, limit: 1)
            outcome = try etcd.commit(transaction)
        } catch {
            throw Self.storageError(error)
        }
        guard outcome.succeeded else { throw .revisionMismatch(current: store.list(domain)?.revision ?? 0) }
        try waitForMirror(outcome.revision)
        return Commit(revision: store.revision, domain: domain, changes: [])
    }

    /// The transaction of `change`, comparing each key it writes against the mirror's revision.
    private func transaction(for change: Change, after applied: Int64) throws(StorageError) -> EtcdTransaction {
        var operations: [EtcdTransaction.Operation] = []
        var written: [[UInt8]] = []
        func put(_ name: FleetName, _ value: Value) throws(StorageError) {
            let bytes: [UInt8]
            do { bytes = try layout.etcdValue(value) } catch { throw .invalidValue(error.description) }
            written.append(layout.etcdKey(name))
            operations.append(.put(key: layout.etcdKey(name), value: bytes))
        }
        func delete(_ name: FleetName) {
            written.append(layout.etcdKey(name))
            operations.append(.delete(key: layout.etcdKey(name)))
        }
        switch change {
        case .mutation(let domain, .set(let key, let value, let ifRevision)):
            try check(ifRevision, current: revision(of: domain, key))
            try put(FleetName(kind: .value, domain: domain, key: key), value)
        case .mutation(let domain, .delete(let key)):
            guard revision(of: domain, key) != 0 else { throw .notFound(domain, key) }
            delete(FleetName(kind: .value, domain: domain, key: key))
        case .mutation(let domain, .apply(let changes, let ifRevision)):
            try check(ifRevision, current: store.list(domain)?.revision ?? 0)
            for change in changes {
                let name = FleetName(kind: .value, domain: domain, key: change.key)
                if let value = change.value { try put(name, value) } else { delete(name) }
            }
        case .mutation(let domain, .deleteDomain):
            guard store.list(domain) != nil else { throw .notFound(domain, nil) }
            let folder = layout.etcdFolder(of: domain, kind: .value)
            operations.append(.deleteRange(key: folder, end: etcdPrefixEnd(folder)))
        case .lock(let domain, let key):
            try put(FleetName(kind: .lock, domain: domain, key: key), .bool(true))
        case .unlock(let domain, let key):
            guard case .value = store.get(Domain.locks(of: domain), key) else { throw .notFound(Domain.locks(of: domain), key) }
            delete(FleetName(kind: .lock, domain: domain, key: key))
        }
        let comparisons = written.map { EtcdTransaction.Comparison.modRevisionBelow(key: $0, revision: applied + 1) }
        return EtcdTransaction(comparisons: comparisons, success: operations)
    }

    private func revision(of domain: Domain, _ key: Key) -> Int64 {
        if case .value(_, let revision) = store.get(domain, key) { return revision }
        return 0
    }

    private func check(_ expected: Int64?, current: Int64) throws(StorageError) {
        if let expected, expected != current { throw .revisionMismatch(current: current) }
    }

    /// Waits until the mirror has applied etcd's `revision`: the writer reads its own write.
    private func waitForMirror(_ revision: Int64) throws(StorageError) {
        guard mirror.waitUntilApplied(revision, timeout: mirrorTimeout) else {
            throw .failure("etcd committed the change at its revision \(revision), but this host has not mirrored it within \(mirrorTimeout); it will appear when it has")
        }
    }

    /// What an etcd failure means for the client.
    static func storageError(_ error: EtcdError) -> StorageError {
        switch error {
        case .tooLarge(let message):
            .tooLarge(limit: 1_572_864, reason: "etcd refused the change as too large (\(message)); nothing changed; make it in smaller parts")
        case .unreachable(let reason):
            .failure("etcd cannot be reached, so fleet domains cannot change now; nothing changed (\(reason))")
        default:
            .failure("\(error); nothing changed, unless etcd said the outcome is unknown: then read the value back before trying again")
        }
    }
}

extension FleetWriter.Change {
    var domain: Domain {
        switch self {
        case .mutation(let domain, _), .lock(let domain, _), .unlock(let domain, _): domain
        }
    }
}
