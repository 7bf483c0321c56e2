import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.System`, served by the system instance only. A lock is a key of the domain's
/// internal lock domain (``Domain/locks(of:)``), so locking and unlocking are ordinary durable
/// commits: the same log, recovery and crash points as values.
extension RequestHandler {
    func handleSystem(_ request: DefaultsRequest) -> Outcome {
        switch request {
        case .lock(let domain, let key):
            return .commit(Domain.locks(of: domain), .set(key, .bool(true), ifRevision: nil))
        case .unlock(let domain, let key):
            return .commit(Domain.locks(of: domain), .delete(key))
        case .locks(let domain):
            return .locks(domain)
        case .mirror(let profile):
            return .mirror(dconfProfile: profile)
        case .status:
            return .status
        case .reload:
            guard let marker = dropIns.reload(because: "Reload") else {
                return .reply(VarlinkReply(parameters: ["revision": .integer(store.revision)]))
            }
            return .commit(.dropInState, marker)
        case .systemSource(let domain, let key):
            return .source(domain, key)
        default:
            preconditionFailure("\(request) is not an io.kvd.System call")
        }
    }

    /// The `Source` reply for `peer` (the caller; nil: unknown): the drop-in files that reach
    /// them count, those for some users or groups among them.
    func sourceReply(_ domain: Domain, _ key: Key, for peer: DropInPeer?) -> VarlinkReply {
        VarlinkReply(parameters: dropIns.source(domain, key, store: store, for: peer))
    }

    /// The `Status` reply: the store's revision, its domains (internal ones left out), and
    /// `fleet` when the instance mirrors one.
    func statusReply(fleet: FleetStatus?) -> VarlinkReply {
        let domains = store.domains().lazy.filter { !$0.isInternal }.count
        let status = SystemStatus(revision: store.revision, domains: domains, fleet: fleet, dropIns: dropIns.status)
        return VarlinkReply(parameters: status.json)
    }

    /// The `Locks` reply for `peer` (the caller; nil: unknown): `{"domain": D, "key": K}` for
    /// every admin's lock and `{"domain": D, "key": K, "file": F}` for every lock of the drop-in
    /// files that reach the caller, of `domain` or of all, sorted by domain and key (an admin's
    /// lock before a file's of the same key).
    func locksReply(_ domain: Domain?, for peer: DropInPeer?) -> VarlinkReply {
        let files = dropIns.combination(for: peer)
        var locks: [(domain: Domain, key: Key, file: String?)] = []
        let lockDomains = domain.map { [Domain.locks(of: $0)] } ?? store.domains().filter { $0.lockedDomain != nil }
        for lockDomain in lockDomains {
            guard let target = lockDomain.lockedDomain, let snapshot = store.list(lockDomain) else { continue }
            locks += snapshot.values.keys.map { (target, $0, nil) }
        }
        for (target, keys) in files.locks where domain == nil || target == domain {
            locks += keys.map { (target, $0, files.lockFiles[target]?[$0] ?? "") }
        }
        locks.sort { ($0.domain, $0.key, $0.file ?? "") < ($1.domain, $1.key, $1.file ?? "") }
        let items = locks.map { lock -> JSON in
            var item: [String: JSON] = ["domain": .string(lock.domain.name), "key": .string(lock.key.name)]
            if let file = lock.file { item["file"] = .string(file) }
            return .object(item)
        }
        return VarlinkReply(parameters: ["locks": .array(items)])
    }

    /// The first replies of a `Mirror`, made piece by piece (``ReplyStream``): each domain's
    /// values and locks (the admins' over the drop-in files' for `peer`, ``DropInLayer``), in replies of about ``ReplyStream/pieceBytes``
    /// (several for one domain when it is larger), then `synced`. All at `revision`. The
    /// snapshot is made once per profile and state (``MirrorSnapshots``): a flood of `Mirror`
    /// calls costs the loop one snapshot, then only the pieces, a turn at a time.
    func initialMirrorStream(revision: Int64, for peer: DropInPeer? = nil) -> ReplyStream {
        let stamp = MirrorSnapshots.Stamp(
            profile: dropIns.profile(of: peer), revision: store.revision, replacements: dropIns.replacements)
        let stream = {
            ReplyStream(runs: mirrorRuns(for: peer)) { run, slice, _, last in
                Self.mirrorReply(revision: revision, domain: run.domain, changes: Array(slice), synced: last)
            }
        }
        // Pieces name `revision`: shared only when it is the store's (a new `Mirror`'s).
        guard revision == stamp.revision else { return stream() }
        return ReplyStream(sharing: mirrorSnapshots.pieces(at: stamp, make: stream))
    }

    /// A `Mirror` snapshot's runs for `peer`: every mirrored domain's values and locks, in
    /// domain order, then an empty run (the end).
    private func mirrorRuns(for peer: DropInPeer?) -> [ReplyStream.Run] {
        var runs: [ReplyStream.Run] = []
        let files = dropIns.combination(for: peer)
        var domains = Set(store.domains().filter(\.isMirrored))
        domains.formUnion(files.values.keys)
        domains.formUnion(files.locks.keys.map(Domain.locks(of:)))
        for domain in domains.sorted() {
            var values = store.list(domain)?.values ?? [:]
            if let target = domain.lockedDomain {
                for key in files.locks[target] ?? [] { values[key] = .bool(true) }
            } else {
                values = DropInLayer.snapshotValues(domain, admin: values, files: files)
            }
            guard !values.isEmpty else { continue }
            runs.append(
                .init(
                    domain: domain,
                    changes: values.map { Change(key: $0.key, value: $0.value) }.sorted { $0.key < $1.key }))
        }
        runs.append(.init(domain: nil, changes: []))
        return runs
    }

    /// A `Mirror` reply: the changes of `domain` (values; for a lock domain, locks of the domain
    /// it locks: a value locks, a removal unlocks), or with no domain the end of the snapshot.
    /// `synced`: the snapshot is complete (false for the snapshot's own replies).
    static func mirrorReply(revision: Int64, domain: Domain?, changes: [Change], synced: Bool) -> VarlinkReply {
        guard let domain else { return MirrorReply(revision: revision, synced: synced, domain: nil).reply }
        guard let target = domain.lockedDomain else {
            return MirrorReply(revision: revision, synced: synced, domain: domain, changes: changes).reply
        }
        let locks = changes.map { (key: $0.key, locked: $0.value != nil) }
        return MirrorReply(revision: revision, synced: synced, domain: target, locks: locks).reply
    }
}
