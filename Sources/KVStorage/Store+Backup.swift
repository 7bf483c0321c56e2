import KVValues
import Synchronization

/// Every domain of a store at one revision (``Store/snapshotAll()``): the store's own domains
/// as they were, shared with it (copy-on-write), not copied.
///
/// Holding one costs nothing while the store does not change; a domain the store changes
/// afterwards is copied by the store (its entries, not the values), and the values it
/// replaces or removes stay alive in this copy until it is released. So a snapshot holds at
/// most the store as it was at ``revision``, whatever is written meanwhile.
public struct StoreSnapshot: Sendable {
    /// The store revision the copy was taken at: it holds every change up to it, and no other.
    public let revision: Int64
    /// Each existing domain (one with a key a request can name), sorted by name.
    public let domains: [Domain]
    private let states: [Domain: DomainState]

    init(revision: Int64, states: [Domain: DomainState]) {
        self.revision = revision
        self.states = states
        self.domains = states.compactMap { $0.value.entries.isEmpty ? nil : $0.key }.sorted()
    }

    /// One domain of the copy (nil if it is not one of ``domains``), made when asked for.
    public func snapshot(of domain: Domain) -> DomainSnapshot? {
        states[domain].flatMap { $0.entries.isEmpty ? nil : $0.snapshot }
    }

    /// What the domain takes as ``DomainSnapshot/budgetBytes`` counts (0: no such domain),
    /// without a snapshot of it (nothing decoded).
    public func budgetBytes(of domain: Domain) -> Int {
        states[domain].map { $0.entries.isEmpty ? 0 : $0.budgetBytes } ?? 0
    }
}

extension Store {
    /// A consistent copy of every domain at one revision (for a backup). Takes the lock once,
    /// sharing the domains under it; each domain's snapshot is made outside it, when asked for.
    /// Never blocks on I/O; thread-safe.
    public func snapshotAll() -> StoreSnapshot {
        let (states, revision) = state.withLock { ($0.domains, $0.revision) }
        return StoreSnapshot(revision: revision, states: states)
    }
}
