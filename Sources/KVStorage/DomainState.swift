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
    /// Returns whether the domain is empty afterwards.
    @discardableResult
    mutating func apply(_ changes: [Change], at revision: Int64) -> Bool {
        defer { self.revision = revision }
        for change in changes {
            if let value = change.value {
                entries[change.key] = StoredEntry(content: .value(value), revision: revision)
            } else {
                entries[change.key] = nil
            }
        }
        return entries.isEmpty
    }
}

/// A domain as a batch being planned sees it: the published state, shared and never copied,
/// plus the changes planned before in the same batch. Planning a change to a domain of 100,000
/// keys then costs as much as one to a domain of ten.
struct DomainView {
    private let base: DomainState?
    /// Keys changed earlier in this batch: their entry now, `nil` when removed.
    private var overlay: [Key: StoredEntry?] = [:]
    private var overlayRevision: Int64?
    /// How many keys the domain has with the overlay applied.
    private(set) var count: Int

    init(_ base: DomainState?) {
        self.base = base
        count = base?.entries.count ?? 0
    }

    func entry(_ key: Key) -> StoredEntry? {
        if let changed = overlay[key] { return changed }
        return base?.entries[key]
    }

    /// The revision at which the domain last changed; 0 when it does not exist (no keys).
    var revision: Int64 {
        count == 0 ? 0 : overlayRevision ?? base?.revision ?? 0
    }

    /// Every key, sorted (costs a pass over the domain: only a domain deletion needs it).
    var sortedKeys: [Key] {
        var keys = Set(base?.entries.keys ?? [:].keys)
        for (key, entry) in overlay {
            if entry == nil { keys.remove(key) } else { keys.insert(key) }
        }
        return keys.sorted()
    }

    /// Records changes planned at `revision`, as ``DomainState/apply(_:at:)`` will make them.
    mutating func apply(_ changes: [Change], at revision: Int64) {
        for change in changes {
            let now = change.value.map { StoredEntry(content: .value($0), revision: revision) }
            let existed: Bool
            if let earlier = overlay.updateValue(now, forKey: change.key) {  // one lookup, not three
                existed = earlier != nil
            } else {
                existed = base?.entries[change.key] != nil
            }
            count += (now != nil ? 1 : 0) - (existed ? 1 : 0)
        }
        overlayRevision = revision
    }
}

/// Turns mutations into the absolute changes they make, checking their conditions.
enum MutationPlanner {
    /// The changes `mutation` makes to `current`; empty if it changes nothing. Throws
    /// `.notFound`, `.revisionMismatch`, or `.failure` for a value that cannot be stored (a
    /// non-finite real).
    static func changes(
        of mutation: Mutation, in domain: Domain, current: DomainView
    ) throws(StorageError) -> [Change] {
        switch mutation {
        case .set(let key, let value, let condition):
            let revision = current.entry(key)?.revision ?? 0
            if let condition, condition != revision { throw .revisionMismatch(current: revision) }
            try validate(value, key: key)
            return [Change(key: key, value: value)]
        case .delete(let key):
            guard current.entry(key) != nil else { throw .notFound(domain, key) }
            return [Change(key: key, value: nil)]
        case .apply(let changes, let condition):
            return try applied(changes, condition: condition, current: current)
        case .deleteDomain:
            guard current.count > 0 else { throw .notFound(domain, nil) }
            return current.sortedKeys.map { Change(key: $0, value: nil) }
        }
    }

    private static func applied(
        _ changes: [Change], condition: Int64?, current: DomainView
    ) throws(StorageError) -> [Change] {
        let revision = current.revision
        if let condition, condition != revision { throw .revisionMismatch(current: revision) }
        var present: [Key: Bool] = [:]  // keys this apply has set (true) or removed (false)
        var effective: [Change] = []
        for change in changes {
            let exists = present[change.key] ?? (current.entry(change.key) != nil)
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
