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
/// unreachable it is `StorageFailure` and nothing changes. A transaction whose reply is lost
/// is read back (``write(_:)``): its outcome is found, or reported as `OutcomeUnknown` (never
/// as `StorageFailure`, which means nothing changed).
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

    init(
        store: Store, etcd: any EtcdAPI, layout: FleetLayout, mirror: FleetMirror,
        mirrorTimeout: Duration = .seconds(10)
    ) {
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
    ///
    /// - etcd behind the mirror (its revision went back: data wiped or restored): the mirror
    ///   lists again first, and the change is checked against what etcd holds now.
    /// - A lost reply (``EtcdError/outcomeUnknown(_:)``): the written keys are read back
    ///   (``readBack(_:after:before:reason:)``); committed, the write is acknowledged as any
    ///   other; certainly not committed, `StorageFailure`; otherwise `OutcomeUnknown`.
    func write(_ change: Change) throws(StorageError) -> Commit {
        let domain = change.domain
        var applied = mirror.appliedRevision
        // A linearizable read first: without a quorum it fails and the transaction is never
        // sent. A transaction sent to a leader that has lost its quorum times out, yet
        // commits once the quorum is back: the caller would have been told it failed.
        var before: Int64 = 0
        var replaced: String? = nil
        do throws(EtcdError) {
            before = try etcdRevision()
            if before < applied {
                replaced =
                    "etcd's revision (\(before)) is behind this host's mirror (\(applied)): its data was wiped or restored"
            }
        } catch .clusterChanged(let was, let now) {
            replaced = EtcdError.clusterChanged(was: was, now: now).description
        } catch {
            throw Self.storageError(error)
        }
        if let replaced {
            try relist(replaced, committed: false)
            applied = mirror.appliedRevision
            do throws(EtcdError) { before = try etcdRevision() } catch { throw Self.storageError(error) }
        }
        let transaction = try self.transaction(for: change, after: applied)
        let outcome: (succeeded: Bool, revision: Int64)
        do {
            outcome = try etcd.commit(transaction)
        } catch .outcomeUnknown(let reason) {
            outcome = try readBack(transaction, after: applied, before: before, reason: reason)
        } catch {
            throw Self.storageError(error)
        }
        guard outcome.succeeded else { throw .revisionMismatch(current: store.list(domain)?.revision ?? 0) }
        if outcome.revision <= applied {  // etcd went back meanwhile: the mirror's revision means nothing
            try relist(
                "etcd committed the change at revision \(outcome.revision), at or behind this host's mirror (\(applied)): its data was wiped or restored",
                committed: true)
        }
        try waitForMirror(outcome.revision)
        return Commit(revision: store.revision, domain: domain, changes: [])
    }

    /// etcd's newest revision, by a linearizable read.
    private func etcdRevision() throws(EtcdError) -> Int64 {
        try etcd.range(from: Array(layout.prefix.utf8), end: [], revision: nil, limit: 1).revision
    }

    /// Has the mirror list etcd again and waits for it. `committed`: the change is in etcd
    /// already (a timeout is then `OutcomeUnknown`, not `StorageFailure`).
    private func relist(_ reason: String, committed: Bool) throws(StorageError) {
        guard mirror.relistAndWait(reason, timeout: mirrorTimeout) else {
            let waited = "\(reason); this host's mirror has not listed etcd again within \(mirrorTimeout)"
            throw committed
                ? .outcomeUnknown(waited + "; the change will appear when it has")
                : .failure(waited + "; nothing changed")
        }
    }

    /// What became of a transaction whose reply was lost, from a linearizable read of each key
    /// it writes: committed (each put key holds its value, all at one revision above
    /// `applied`; each deleted key is gone), or not (etcd's revision is still `before`, or
    /// every key is as the mirror has it: the transaction's comparisons make it all or
    /// nothing). Anything else (another host wrote the keys meanwhile, the read fails) is
    /// ``StorageError/outcomeUnknown(_:)``.
    func readBack(_ transaction: EtcdTransaction, after applied: Int64, before: Int64, reason: String)
        throws(StorageError) -> (
            succeeded: Bool, revision: Int64
        )
    {
        func unknown(_ why: String) -> StorageError {
            .outcomeUnknown(
                "etcd's reply to the transaction was lost (\(reason)) and \(why); etcd may or may not have made the change: read the value back (kvctl --system get) before trying again"
            )
        }
        let tally: ReadBack
        do throws(EtcdError) {
            tally = try readKeysBack(transaction, after: applied, before: before)
        } catch {
            throw unknown("reading the keys back failed too (\(error))")
        }
        let count = transaction.success.count
        if tally.newest == before || tally.unchanged == count {
            throw .failure(
                "etcd's reply to the transaction was lost (\(reason)); read back, the keys are as this host's mirror has them, so etcd did not make the change; nothing changed"
            )
        }
        if tally.ours == count { return (true, tally.committedAt ?? tally.newest) }
        throw unknown("the keys read back changed, though not all as the change would")
    }

    /// What etcd holds of the keys a transaction writes, counted against the mirror: how many
    /// are as the transaction would leave them (`ours`, all puts at one revision), how many as
    /// the mirror has them (`unchanged`), the newest revision seen.
    struct ReadBack {
        var ours = 0
        var unchanged = 0
        var newest: Int64
        var committedAt: Int64?
    }

    /// Reads back each key `transaction` writes and counts them (see ``ReadBack``).
    private func readKeysBack(_ transaction: EtcdTransaction, after applied: Int64, before: Int64) throws(EtcdError)
        -> ReadBack
    {
        var tally = ReadBack(newest: before)
        for operation in transaction.success {
            let (key, end): ([UInt8], [UInt8])
            switch operation {
            case .put(let k, _), .delete(let k): (key, end) = (k, [])
            case .deleteRange(let k, let e): (key, end) = (k, e)
            }
            let page = try etcd.range(from: key, end: end, revision: nil, limit: 0)
            tally.newest = max(tally.newest, page.revision)
            switch operation {
            case .put(_, let value):
                if let found = page.keyValues.first, found.modRevision > applied {
                    guard found.value == value, tally.committedAt == nil || tally.committedAt == found.modRevision
                    else { continue }
                    tally.committedAt = found.modRevision
                    tally.ours += 1
                } else {
                    tally.unchanged += 1
                }
            case .delete, .deleteRange:
                if page.keyValues.isEmpty {
                    tally.ours += 1
                } else if page.keyValues.allSatisfy({ $0.modRevision <= applied }) {
                    tally.unchanged += 1
                }
            }
        }
        return tally
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
            guard case .value = store.get(Domain.locks(of: domain), key) else {
                throw .notFound(Domain.locks(of: domain), key)
            }
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
            // Not StorageFailure: that would say nothing changed.
            throw .outcomeUnknown(
                "etcd committed the change at its revision \(revision), but this host has not mirrored it within \(mirrorTimeout); it will appear when it has"
            )
        }
    }

    /// What an etcd failure means for the client.
    static func storageError(_ error: EtcdError) -> StorageError {
        switch error {
        case .tooLarge(let message):
            .tooLarge(
                limit: 1_572_864,
                reason: "etcd refused the change as too large (\(message)); nothing changed; make it in smaller parts")
        case .unreachable(let reason):
            .failure("etcd cannot be reached, so fleet domains cannot change now; nothing changed (\(reason))")
        case .outcomeUnknown:
            .outcomeUnknown("\(error); read the value back (kvctl --system get) before trying again")
        default:
            .failure("\(error); nothing changed")
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
