import Dispatch
import KVFleet
import KVStorage
import KVValues
import Synchronization

/// The system instance's copy of the fleet (`--etcd`): a ``FleetReflector`` on its own thread
/// lists and watches etcd, and each update it hands over is committed to the store as one group
/// (``Store/submitGroup(_:completion:)``) together with the etcd revision it reaches, kept in the
/// internal domain ``Domain/fleetState``. A SIGKILL between two updates therefore never applies an
/// event twice or skips one: at start the reflector goes on from the revision the store holds.
///
/// Fleet values live in their own domains and fleet locks in the lock domains, where users'
/// kvds already follow them (`Mirror`); each group's commits are announced to the loop, which
/// sends them to watchers and mirrors.
///
/// Threading: ``start()`` and ``stop()`` from the loop's thread; the mirror's own work runs on
/// its thread. Blocks nothing but that thread (etcd calls, the store's sync).
final class FleetMirror: Sendable {
    let store: Store
    let reflector: FleetReflector
    let layout: FleetLayout
    /// The etcd client, for the status command (nil in tests with a scripted etcd).
    let gateway: EtcdGateway?
    private let announce: @Sendable (Commit) -> Void
    let log: Logger
    /// Whether ``waitUntilApplied(_:timeout:)`` waits (one caller at a time: the fleet writer).
    private let waiting = Mutex(false)
    private let applied = DispatchSemaphore(value: 0)
    /// Listings committed (``relistAndWait(_:timeout:)`` waits for the next one).
    private let listings = Mutex(0)
    /// What the journal was last told (the mirror's thread writes it; ``status`` reads it).
    let told = Mutex(Told())

    /// The key of ``Domain/fleetState`` holding the etcd revision the store's mirror reached.
    static let revisionKey = Key(constant: "etcdRevision")
    /// The key of ``Domain/fleetState`` holding the etcd cluster ID of the last listing (text).
    static let clusterKey = Key(constant: "etcdCluster")

    init(
        store: Store, reflector: FleetReflector, layout: FleetLayout, gateway: EtcdGateway? = nil, log: Logger,
        announce: @escaping @Sendable (Commit) -> Void
    ) {
        self.store = store
        self.gateway = gateway
        self.reflector = reflector
        self.layout = layout
        self.log = log
        self.announce = announce
    }

    /// The etcd revision the store's mirror holds (0: none yet).
    var appliedRevision: Int64 {
        if case .value(.integer(let revision), _) = store.get(.fleetState, Self.revisionKey) { return revision }
        return 0
    }

    func start() {
        let from = appliedRevision
        if case .value(.string(let text), _) = store.get(.fleetState, Self.clusterKey), let id = UInt64(text) {
            gateway?.expectCluster(id)
        }
        log.info(
            "fleet: mirroring \(layout.patterns.map(\.text).joined(separator: " ")) under \(layout.prefix) from etcd revision \(from)"
        )
        DispatchQueue(label: "kvd.fleet-mirror").async { [self] in
            reflector.run(from: from, reporting: { event in tell(event) }) { update throws(StorageError) in
                try commit(update)
            }
        }
    }

    func stop() { reflector.stop() }

    /// Commits `update` as one group with its etcd revision; returns once it is durable.
    func commit(_ update: FleetUpdate) throws(StorageError) {
        var parts = changes(of: update)
        parts[.fleetState, default: [:]][Self.revisionKey] = .some(.integer(update.revision))
        if case .replace = update, let id = gateway?.clusterID {  // the cluster the listing came from
            parts[.fleetState, default: [:]][Self.clusterKey] = .some(.string(String(id)))
        }
        let group = parts.map { domain, changes in
            DomainChanges(
                domain: domain, changes: changes.map { Change(key: $0.key, value: $0.value) }.sorted { $0.key < $1.key }
            )
        }
        let announce = self.announce
        _ = try store.commitGroup(group) { commits in
            for commit in commits where commit.domain != .fleetState { announce(commit) }
        }
        if case .replace = update { listings.withLock { $0 += 1 } }
        if waiting.withLock({ $0 }) { applied.signal() }
        told.withLock { $0.failure = nil }
    }

    /// Waits until the mirror holds etcd's `revision`; false when `timeout` passed first. For
    /// one caller at a time (the fleet writer's queue). Blocks.
    func waitUntilApplied(_ revision: Int64, timeout: Duration) -> Bool {
        waiting.withLock { $0 = true }
        defer { waiting.withLock { $0 = false } }
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        while appliedRevision < revision {
            if applied.wait(timeout: deadline) == .timedOut { return appliedRevision >= revision }
        }
        return true
    }

    /// Asks the reflector to list again (`reason`) and waits until a listing has been
    /// committed; false when `timeout` passed first. For one caller at a time (the fleet
    /// writer's queue). Blocks.
    func relistAndWait(_ reason: String, timeout: Duration) -> Bool {
        waiting.withLock { $0 = true }
        defer { waiting.withLock { $0 = false } }
        let before = listings.withLock { $0 }
        reflector.relist(reason)
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        while listings.withLock({ $0 }) == before {
            if applied.wait(timeout: deadline) == .timedOut { return listings.withLock { $0 } != before }
        }
        return true
    }

    /// Per domain, the key changes that make the store's fleet domains what `update` says.
    private func changes(of update: FleetUpdate) -> [Domain: [Key: Value?]] {
        var parts: [Domain: [Key: Value?]] = [:]
        switch update {
        case .apply(let changes, _):
            for change in changes {
                switch change {
                case .set(let domain, let key, let value): parts[domain, default: [:]][key] = .some(value)
                case .remove(let domain, let key): parts[domain, default: [:]][key] = .some(nil)
                case .lock(let domain, let key): parts[Domain.locks(of: domain), default: [:]][key] = .some(.bool(true))
                case .unlock(let domain, let key): parts[Domain.locks(of: domain), default: [:]][key] = .some(nil)
                }
            }
        case .replace(let snapshot, _):
            var wanted: [Domain: [Key: Value]] = snapshot.values
            for (domain, keys) in snapshot.locks {
                wanted[Domain.locks(of: domain)] = Dictionary(uniqueKeysWithValues: keys.map { ($0, Value.bool(true)) })
            }
            for domain in store.domains()
            where layout.isFleetDomain(domain.lockedDomain ?? domain) && wanted[domain] == nil {
                wanted[domain] = [:]  // a fleet domain etcd no longer has: emptied
            }
            for (domain, values) in wanted {
                let current = store.list(domain)?.values ?? [:]
                for (key, value) in values where current[key] != value {
                    parts[domain, default: [:]][key] = .some(value)
                }
                for key in current.keys where values[key] == nil { parts[domain, default: [:]][key] = .some(nil) }
            }
        }
        return parts
    }
}
