import FoundationEssentials
import KVValues
import Synchronization

/// Settings kept in this process's memory instead of kvd: for an app's unit tests, which need
/// settings that start empty and vanish, with no kvd, no socket and no files.
///
/// A suite on a store has the whole ``KVDefaults`` API (typed keys, versioned values, the
/// `UserDefaults` members, observation, ``KVSettings`` models, history); only what comes from
/// kvd itself (the system layer's defaults and locks, fleet values) is absent. Suites on one
/// store see each other's writes as two apps on one kvd do, with one difference that makes tests
/// simple: another suite's caches, observers and ``KVDefaults/didChangeNotification`` get a
/// write before the writing call returns (unless a handler called on that delivery writes
/// again; then that write is delivered right after the handler returns).
///
/// ```swift
/// let store = KVMemoryStore()
/// let defaults = KVDefaults(suiteName: "com.example.app", configuration: .inMemory(store))!
/// try defaults.set(0.5, for: .quality)
/// defaults[.quality]                       // 0.5; nothing reached kvd or the disk
/// ```
///
/// Revisions, conditional writes and `NotFound` follow kvd's contract (one store-wide revision
/// counter starting at 1), and so do its limits (docs/reference/names-and-limits.md): a value
/// nested too deep is refused as kvd refuses it, and a value, a batch or a domain too large for
/// kvd with the same ``ClientError/tooLarge(limit:)``. History keeps the last ``historyLimit``
/// changes of each domain. Safe to use from any thread; the values vanish when the store and
/// its suites are released.
public final class KVMemoryStore: Sendable {
    /// How many changes of each domain ``KVDefaults/history(for:limit:)`` can return.
    public static let historyLimit = 1_000

    struct Stored {
        var value: Value
        var revision: Int64
        /// The key and value as compact typed JSON, in bytes (``MemoryStoreLimits``).
        var bytes: Int
    }

    struct State {
        var revision: Int64 = 0
        var domains: [Domain: [Key: Stored]] = [:]
        /// The revision at which each domain last changed (kept after the domain is deleted).
        var domainRevisions: [Domain: Int64] = [:]
        /// Each domain's changes, oldest first, at most ``historyLimit``.
        var history: [Domain: [HistoryRecord]] = [:]
        /// Keys marked to keep no history, and domains marked whole (``keepHistory(_:key:_:)``).
        var keepsNoHistory: [Domain: Set<Key>] = [:]
        var domainsKeepingNoHistory: Set<Domain> = []
        /// Held weakly: a cache unsubscribes when released.
        var subscribers: [Domain: [ObjectIdentifier: Weak<DomainCache>]] = [:]
        /// Commits not yet given to the subscribers, in revision order.
        var pending: [(domain: Domain, changes: [Change], revision: Int64)] = []
        var delivering = false
    }

    private let state = Mutex(State())

    /// An empty store.
    public init() {}

    /// The domains holding at least one value, by name.
    public var domainNames: [String] {
        state.withLock { $0.domains.keys.map(\.name).sorted() }
    }

    // MARK: the watch, for DomainCache

    /// Gives `core` the domain's values now and each later commit of its domain, in order.
    func subscribe(_ core: DomainCache) {
        state.withLock { state in
            let values = state.domains[core.domain, default: [:]]
            core.reconcile(
                Dictionary(uniqueKeysWithValues: values.map { ($0.key.name, $0.value.value) }),
                revision: state.revision, streamed: true)
            state.subscribers[core.domain, default: [:]][ObjectIdentifier(core)] = Weak(core)
        }
    }

    /// Stops giving `core` commits.
    func unsubscribe(_ core: DomainCache) {
        core.setOnChange(nil)
        state.withLock { state in
            state.subscribers[core.domain]?[ObjectIdentifier(core)] = nil
            if state.subscribers[core.domain]?.isEmpty == true { state.subscribers[core.domain] = nil }
        }
    }

    /// Gives the pending commits to their subscribers, in order, unless another call is doing
    /// so (a handler that writes during a delivery): that call delivers them next.
    private func deliver() {
        let starts = state.withLock { state -> Bool in
            guard !state.delivering else { return false }
            state.delivering = true
            return true
        }
        guard starts else { return }
        while true {
            let batch = state.withLock { state -> [(changes: [Change], revision: Int64, cores: [DomainCache])]? in
                guard !state.pending.isEmpty else {
                    state.delivering = false
                    return nil
                }
                defer { state.pending = [] }
                return state.pending.map {
                    ($0.changes, $0.revision, state.subscribers[$0.domain, default: [:]].values.compactMap(\.object))
                }
            }
            guard let batch else { return }
            for commit in batch {
                for core in commit.cores { core.apply(commit.changes, revision: commit.revision, streamed: true) }
            }
        }
    }

    // MARK: committing

    /// Commits `changes` to `domain` (those that change nothing are left out) and delivers them;
    /// returns the revision, 0 if nothing changed. Refuses, changing nothing, what kvd would
    /// refuse for its size (``MemoryStoreLimits``).
    private func commit(
        _ domain: Domain, _ check: (State) throws(ClientError) -> Void,
        _ changes: (State) throws(ClientError) -> [Change]
    ) throws(ClientError) -> Int64 {
        let revision = try state.withLock { (state) throws(ClientError) -> Int64 in
            try check(state)
            let wanted = try changes(state)
            let effective = wanted.filter { $0.value != nil || state.domains[domain]?[$0.key] != nil }
            guard !effective.isEmpty else { return 0 }
            let sizes = try MemoryStoreLimits.check(effective, over: state.domains[domain, default: [:]])
            state.revision += 1
            state.record(zip(effective, sizes), in: domain, at: state.revision)
            state.pending.append((domain, effective, state.revision))
            return state.revision
        }
        deliver()
        return revision
    }
}

extension KVMemoryStore: SettingsBackend {
    func get(_ domain: Domain, _ key: Key) throws(ClientError) -> (value: Value, revision: Int64) {
        guard let stored = state.withLock({ $0.domains[domain]?[key] }) else {
            throw .notFound(domain: domain.name, key: key.name)
        }
        return (stored.value, stored.revision)
    }

    func set(_ domain: Domain, _ key: Key, _ value: Value, ifRevision: Int64?) throws(ClientError) -> Int64 {
        try commit(domain) { (state) throws(ClientError) in
            guard let expected = ifRevision else { return }
            let current = state.domains[domain]?[key]?.revision ?? 0
            if current != expected { throw .revisionMismatch(current: current) }
        } _: { _ in
            [Change(key: key, value: value)]
        }
    }

    func delete(_ domain: Domain, _ key: Key?) throws(ClientError) -> Int64 {
        try commit(domain) { (state) throws(ClientError) in
            guard let values = state.domains[domain] else { throw .notFound(domain: domain.name, key: key?.name) }
            if let key, values[key] == nil { throw .notFound(domain: domain.name, key: key.name) }
        } _: { state in
            if let key { return [Change(key: key, value: nil)] }
            return state.domains[domain, default: [:]].keys.map { Change(key: $0, value: nil) }
        }
    }

    func apply(_ domain: Domain, _ changes: [Change], ifRevision: Int64?) throws(ClientError) -> Int64 {
        try commit(domain) { (state) throws(ClientError) in
            guard let expected = ifRevision else { return }
            let current = state.domains[domain] == nil ? 0 : state.domainRevisions[domain] ?? 0
            if current != expected { throw .revisionMismatch(current: current) }
        } _: { _ in
            changes
        }
    }

    func list(_ domain: Domain) throws(ClientError) -> DomainListing {
        state.withLock { state in
            guard let values = state.domains[domain] else {
                return DomainListing(values: [:], unreadable: [:], revision: 0)
            }
            return DomainListing(
                values: values.mapValues(\.value), unreadable: [:], revision: state.domainRevisions[domain] ?? 0)
        }
    }

    func historyRecords(_ domain: Domain, key: Key?, limit: Int?) throws(ClientError) -> [HistoryRecord] {
        let records = state.withLock { $0.history[domain, default: []] }.reversed().filter {
            key == nil || $0.key == key
        }
        return Array(records.prefix(limit ?? records.count))
    }

    func forgetHistory(_ domain: Domain, key: Key?) throws(ClientError) -> Int64 {
        state.withLock { state in
            state.forget(domain, key)
            return state.revision
        }
    }

    func keepHistory(_ domain: Domain, key: Key?, _ keep: Bool) throws(ClientError) -> Int64 {
        state.withLock { state in
            switch (key, keep) {
            case (let key?, true): state.keepsNoHistory[domain]?.remove(key)
            case (let key?, false): state.keepsNoHistory[domain, default: []].insert(key)
            case (nil, true): state.domainsKeepingNoHistory.remove(domain)
            case (nil, false): state.domainsKeepingNoHistory.insert(domain)
            }
            if !keep { state.forget(domain, key) }
            return state.revision
        }
    }
}

extension KVMemoryStore.State {
    /// Stores `changes` (with their entry bytes) in `domain` at `revision`, and keeps them in
    /// its history (but for keys that keep none).
    mutating func record(_ changes: Zip2Sequence<[Change], [Int]>, in domain: Domain, at revision: Int64) {
        let now = Date()
        var kept = history[domain, default: []]
        for (change, bytes) in changes {
            if let value = change.value {
                domains[domain, default: [:]][change.key] = .init(value: value, revision: revision, bytes: bytes)
            } else {
                domains[domain]?[change.key] = nil
            }
            if !keepsNoHistory(domain, change.key) {
                kept.append(HistoryRecord(revision: revision, time: now, key: change.key, value: change.value))
            }
        }
        if kept.count > KVMemoryStore.historyLimit { kept.removeFirst(kept.count - KVMemoryStore.historyLimit) }
        history[domain] = kept
        if domains[domain]?.isEmpty == true { domains[domain] = nil }
        domainRevisions[domain] = revision
    }

    /// Whether changes of `key` in `domain` are kept out of the history.
    func keepsNoHistory(_ domain: Domain, _ key: Key) -> Bool {
        domainsKeepingNoHistory.contains(domain) || keepsNoHistory[domain]?.contains(key) == true
    }

    /// Drops the past values of `key` (every key, if nil) from `domain`'s history, keeping each
    /// key's newest record while the key holds that value, as kvd keeps current values.
    mutating func forget(_ domain: Domain, _ key: Key?) {
        guard let records = history[domain] else { return }
        var newest: [Key: Int] = [:]
        for (index, record) in records.enumerated() { newest[record.key] = index }
        history[domain] = records.enumerated().compactMap { index, record in
            guard key == nil || record.key == key else { return record }
            let current = domains[domain]?[record.key] != nil && newest[record.key] == index
            return current ? record : nil
        }
    }
}
