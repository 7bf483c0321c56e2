import KVProtocol
import KVStorage
import KVValues

/// The machine's system defaults and locks as a user's kvd last saw them (from the system
/// instance, through ``SystemMirror``), and how they combine with the user's own values.
///
/// The search order for one key: a locked system value, else the user's value, else the system
/// default. A locked key the system has no value for reads as missing. The user's value under
/// a lock stays in the user's store, unseen, and is served again once the lock goes.
///
/// A value: the loop's copy is ``SystemFollower/layer``, which only the follower changes; the
/// mirror's thread keeps its own copy to save. Empty until the first snapshot arrives, and then
/// kept, unchanged, while the system instance is away: kvd serves the last system layer it saw.
struct SystemLayer {
    /// One domain's system values and locked keys.
    struct DomainLayer: Equatable {
        var values: [Key: Value] = [:]
        var locks = LockSet()
        /// What ``values`` would add to a reply (``DomainBudget``), for the size check of the
        /// combined domain.
        var budgetBytes = 0

        var isEmpty: Bool { values.isEmpty && locks.isEmpty }

        mutating func set(_ key: Key, _ value: Value?) {
            if let old = values[key] { budgetBytes -= Self.cost(key, old) }
            values[key] = value
            if let value { budgetBytes += Self.cost(key, value) }
        }

        static func cost(_ key: Key, _ value: Value) -> Int {
            DomainBudget.cost(entryBytes: key.name.utf8.count + 2 + JSONWriter().bytes(value.typedJSON).count)
        }
    }

    /// What the system instance reported: a whole snapshot (after each connection, or the one
    /// saved in the state folder), or the changes of one of its commits; each with the system
    /// instance's revision it brings the layer to.
    enum Update: Sendable {
        case snapshot([Domain: [Key: Value]], locks: [Domain: Set<Key>], revision: Int64)
        case values(Domain, [Change], revision: Int64)
        case locks(Domain, [(key: Key, locked: Bool)], revision: Int64)

        var revision: Int64 {
            switch self {
            case .snapshot(_, _, let revision), .values(_, _, let revision), .locks(_, _, let revision): revision
            }
        }
    }

    private(set) var domains: [Domain: DomainLayer] = [:]
    /// Moves with every ``apply(_:)``: what a reply made from the layer was made from.
    private(set) var version = 0
    /// The system instance's revision the layer reflects (`systemRevision` in `Watch` replies):
    /// nil until a layer was received or loaded. It grows with each change of the system layer,
    /// and a snapshot after a reconnection brings the revision the system instance is at.
    private(set) var revision: Int64?

    /// Whether any system value or lock is known: when not, every read is the user's alone.
    var isEmpty: Bool { domains.isEmpty }

    func layer(_ domain: Domain) -> DomainLayer? { domains[domain] }

    /// The keys whose system value or lock `update` may change, per domain (a snapshot: every
    /// key it or the current layer holds).
    func touchedKeys(by update: Update) -> [Domain: Set<Key>] {
        switch update {
        case .snapshot(let values, let locks, _):
            var touched: [Domain: Set<Key>] = [:]
            for (domain, layer) in domains { touched[domain] = Set(layer.values.keys).union(layer.locks) }
            for (domain, entries) in values { touched[domain, default: []].formUnion(entries.keys) }
            for (domain, keys) in locks { touched[domain, default: []].formUnion(keys) }
            return touched
        case .values(let domain, let changes, _): return [domain: Set(changes.map(\.key))]
        case .locks(let domain, let changes, _): return [domain: Set(changes.map(\.key))]
        }
    }

    /// Applies `update`.
    mutating func apply(_ update: Update) {
        version &+= 1
        revision = update.revision
        switch update {
        case .snapshot(let values, let locks, _):
            var fresh: [Domain: DomainLayer] = [:]
            for (domain, entries) in values {
                for (key, value) in entries { fresh[domain, default: .init()].set(key, value) }
            }
            for (domain, keys) in locks where !keys.isEmpty { fresh[domain, default: .init()].locks = LockSet(keys) }
            domains = fresh.filter { !$0.value.isEmpty }
        case .values(let domain, let changes, _):
            var layer = domains[domain] ?? .init()
            for change in changes { layer.set(change.key, change.value) }
            store(layer, for: domain)
        case .locks(let domain, let changes, _):
            var layer = domains[domain] ?? .init()
            for change in changes {
                if change.locked { layer.locks.insert(change.key) } else { layer.locks.remove(change.key) }
            }
            store(layer, for: domain)
        }
    }

    private mutating func store(_ layer: DomainLayer, for domain: Domain) {
        domains[domain] = layer.isEmpty ? nil : layer
    }

    /// The layer as ``SystemLayerFile`` saves it; nil before any layer was received.
    var saved: SavedSystemLayer? {
        guard let revision else { return nil }
        return SavedSystemLayer(
            revision: revision, values: domains.mapValues(\.values).filter { !$0.value.isEmpty },
            locks: domains.mapValues(\.locks.entries).filter { !$0.value.isEmpty })
    }
}

/// The locked keys of one domain: each an exact key, or a glob (a key holding `*`, see
/// ``LockPattern``) that locks every key it matches. ``contains(_:)`` answers for any key.
struct LockSet: Equatable, Sequence, ExpressibleByArrayLiteral {
    /// Every lock entry as received (keys and globs).
    private(set) var entries: Set<Key> = []
    private var patterns: [Key] = []

    init() {}
    init(arrayLiteral elements: Key...) { self.init(Set(elements)) }
    init(_ entries: Set<Key>) {
        self.entries = entries
        patterns = entries.filter(LockPattern.isPattern).sorted()
    }

    var isEmpty: Bool { entries.isEmpty }
    var hasPatterns: Bool { !patterns.isEmpty }

    /// Whether `key` is locked: named, or matched by a glob.
    func contains(_ key: Key) -> Bool {
        entries.contains(key) || (!patterns.isEmpty && patterns.contains { LockPattern.matches($0, key) })
    }

    mutating func insert(_ key: Key) {
        guard entries.insert(key).inserted, LockPattern.isPattern(key) else { return }
        patterns = (patterns + [key]).sorted()
    }

    mutating func remove(_ key: Key) {
        entries.remove(key)
        patterns.removeAll { $0 == key }
    }

    func makeIterator() -> Set<Key>.Iterator { entries.makeIterator() }
}

/// A value as the layers combine, with where it comes from.
struct LayeredValue: Equatable {
    var value: Value
    var source: ValueSource
}

extension SystemLayer.DomainLayer {
    /// The value of `key` with the user's own `user` value (`nil`: none) beneath this layer.
    func combine(_ key: Key, user: Value?) -> LayeredValue? {
        if locks.contains(key) { return values[key].map { LayeredValue(value: $0, source: .locked) } }
        if let user { return LayeredValue(value: user, source: .user) }
        return values[key].map { LayeredValue(value: $0, source: .system) }
    }

    /// The whole domain, the user's values `user` beneath this layer, with the source of every
    /// value that is not the user's, and `.locked` for each key locked without a system value
    /// (it has no value, and is not writable).
    func combine(user: [Key: Value]) -> (values: [Key: Value], sources: [Key: ValueSource]) {
        var combined = user
        var sources: [Key: ValueSource] = [:]
        for (key, value) in values where locks.contains(key) || combined[key] == nil {
            combined[key] = value
            sources[key] = locks.contains(key) ? .locked : .system
        }
        for key in valuelessLocks {
            combined[key] = nil
            sources[key] = .locked
        }
        if locks.hasPatterns {
            for key in user.keys where values[key] == nil && locks.contains(key) {
                combined[key] = nil
                sources[key] = .locked
            }
        }
        return (combined, sources)
    }

    /// The keys locked by name without a system value: they read as missing and refuse writes.
    /// (A glob lock is not a key: the keys it matches are named only where a value has them.)
    var valuelessLocks: [Key] { locks.filter { values[$0] == nil && !LockPattern.isPattern($0) } }
}
