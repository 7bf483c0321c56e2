import KVValues

/// What is stored under one key: a value, or JSON from a file that is not a valid typed value,
/// kept verbatim so that it is written back unchanged.
enum StoredContent: Sendable, Equatable {
    case value(Value)
    case unreadable(raw: JSON, reason: String)
}

/// One key's content and the revision at which it last changed.
struct StoredEntry: Sendable, Equatable {
    var content: StoredContent
    var revision: Int64
}

/// The committed content of one domain in memory. A domain with no keys does not exist.
struct DomainState: Sendable, Equatable {
    var entries: [Key: StoredEntry] = [:]
    /// The revision at which the domain last changed.
    var revision: Int64 = 0

    func lookup(_ key: Key) -> KeyLookup {
        switch entries[key] {
        case nil: .missing
        case .some(let entry):
            switch entry.content {
            case .value(let value): .value(value, revision: entry.revision)
            case .unreadable(_, let reason): .unreadable(reason: reason)
            }
        }
    }

    var snapshot: DomainSnapshot {
        var snapshot = DomainSnapshot(values: [:], revisions: [:], unreadable: [:], revision: revision)
        snapshot.values.reserveCapacity(entries.count)
        snapshot.revisions.reserveCapacity(entries.count)
        for (key, entry) in entries {
            snapshot.revisions[key] = entry.revision
            switch entry.content {
            case .value(let value): snapshot.values[key] = value
            case .unreadable(_, let reason): snapshot.unreadable[key] = reason
            }
        }
        return snapshot
    }

    /// Applies absolute changes made at `revision`. Idempotent: replaying a log record twice
    /// gives the same state.
    mutating func apply(_ changes: [Change], at revision: Int64) {
        for change in changes {
            if let value = change.value {
                entries[change.key] = StoredEntry(content: .value(value), revision: revision)
            } else {
                entries[change.key] = nil
            }
        }
        self.revision = revision
    }
}

/// Turns mutations into the absolute changes they make, checking their conditions.
enum MutationPlanner {
    /// The changes `mutation` makes to `current` (nil: the domain does not exist); empty if it
    /// changes nothing. Throws `.notFound`, `.revisionMismatch`, or `.failure` for a value that
    /// cannot be stored (a non-finite real).
    static func changes(
        of mutation: Mutation, in domain: Domain, current: DomainState?
    ) throws(StorageError) -> [Change] {
        switch mutation {
        case .set(let key, let value, let condition):
            let revision = current?.entries[key]?.revision ?? 0
            if let condition, condition != revision { throw .revisionMismatch(current: revision) }
            try validate(value, key: key)
            return [Change(key: key, value: value)]
        case .delete(let key):
            guard current?.entries[key] != nil else { throw .notFound(domain, key) }
            return [Change(key: key, value: nil)]
        case .apply(let changes, let condition):
            return try applied(changes, condition: condition, current: current)
        case .deleteDomain:
            guard let current, !current.entries.isEmpty else { throw .notFound(domain, nil) }
            return current.entries.keys.sorted().map { Change(key: $0, value: nil) }
        }
    }

    private static func applied(
        _ changes: [Change], condition: Int64?, current: DomainState?
    ) throws(StorageError) -> [Change] {
        let revision = current?.revision ?? 0
        if let condition, condition != revision { throw .revisionMismatch(current: revision) }
        var present: [Key: Bool] = [:]  // keys this apply has set (true) or removed (false)
        var effective: [Change] = []
        for change in changes {
            let exists = present[change.key] ?? (current?.entries[change.key] != nil)
            if let value = change.value {
                try validate(value, key: change.key)
            } else if !exists {
                continue
            }
            present[change.key] = change.value != nil
            effective.append(change)
        }
        return effective
    }

    private static func validate(_ value: Value, key: Key) throws(StorageError) {
        do { try value.validate() } catch { throw .failure("value of key \"\(key)\" cannot be stored: \(error)") }
    }
}
