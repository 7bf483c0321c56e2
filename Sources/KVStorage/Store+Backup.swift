import KVValues
import Synchronization

/// Every domain of a store at one revision (``Store/snapshotAll()``).
public struct StoreSnapshot: Sendable {
    /// The store revision the copy was taken at: it holds every change up to it, and no other.
    public var revision: Int64
    /// Each existing domain (one with a key a request can name), sorted by name.
    public var domains: [(domain: Domain, snapshot: DomainSnapshot)]
}

extension Store {
    /// A consistent copy of every domain at one revision (for a backup). Takes the lock once
    /// (the domains are shared, not copied, under it), then builds the snapshots outside it.
    /// Never blocks on I/O; thread-safe.
    public func snapshotAll() -> StoreSnapshot {
        let (domains, revision) = state.withLock { ($0.domains, $0.revision) }
        let existing = domains.filter { !$0.value.entries.isEmpty }.sorted { $0.key < $1.key }
        return StoreSnapshot(revision: revision, domains: existing.map { ($0.key, $0.value.snapshot) })
    }
}
