import KVValues

/// What is stored under one key: a value, or the text of a hand-edited value that is not valid
/// typed JSON, kept verbatim so that it is written back unchanged.
enum StoredContent: Sendable, Equatable {
    case value(Value)
    /// Boxed: rare, and unboxed it would make every entry 8 bytes larger (a value takes 17).
    indirect case unreadable(raw: [UInt8], reason: String)

    var isValue: Bool {
        if case .value = self { return true }
        return false
    }
}

/// One key's content, the revision at which it last changed, and its size: an entry as read
/// from a file, or decoded from an ``EntryTable`` (which keeps the value as typed JSON).
struct StoredEntry: Sendable, Equatable {
    let revision: Int64
    let content: StoredContent
    /// ``bytes``, which a domain's budget keeps below 2^32 (``Limits/domainBytes``).
    private let size: UInt32

    /// The key and the value as compact typed JSON, in bytes (for an unreadable value, the key
    /// and the text kept): what the entry costs in a reply (see ``DomainBudget``).
    var bytes: Int { Int(size) }

    init(content: StoredContent, revision: Int64, bytes: Int) {
        self.revision = revision
        self.content = content
        self.size = UInt32(clamping: bytes)
    }

    /// The size of `key` with `value` as ``bytes`` counts it (encodes them: for loading).
    static func measure(_ key: String, _ value: Value) -> Int {
        var out: [UInt8] = []
        JSONWriter.writeString(key, into: &out)
        JSONWriter().write(value.typedJSON, into: &out)
        return out.count
    }

    /// The size of `key` with a kept text of `raw` bytes.
    static func measure(_ key: String, raw: Int) -> Int {
        var out: [UInt8] = []
        JSONWriter.writeString(key, into: &out)
        return out.count + raw
    }
}

/// What planning needs of a stored entry, read without decoding its value: the revision at
/// which the key last changed and the entry's size as ``DomainBudget`` counts it.
struct EntryInfo: Sendable, Equatable {
    let revision: Int64
    /// The key and the value as compact typed JSON, in bytes (for an unreadable value, the key
    /// and the text kept).
    let bytes: Int
}

/// A key's stored typed JSON as ``EntryTable/withValueJSON(_:_:)`` gives it.
enum StoredJSON {
    /// The value's compact typed JSON (keys sorted in objects) and the revision at which the
    /// key last changed.
    case value(UnsafeBufferPointer<UInt8>, revision: Int64)
    case missing
    /// The key exists but its stored JSON is not a valid typed value (kept verbatim).
    case unreadable(reason: String)
}

/// The committed content of one domain in memory. A domain with no (nameable) keys does not
/// exist for requests.
struct DomainState: Sendable, Equatable {
    /// The entries a request can name, each value kept as its compact typed JSON.
    private(set) var entries = EntryTable()
    /// Entries of a hand-edited file whose key no request can name (`""`, over 1024 bytes):
    /// never served, kept verbatim and written back, so that nothing of the file is dropped.
    private(set) var foreign: [String: StoredEntry] = [:]
    /// The revision at which the domain last changed.
    private(set) var revision: Int64
    /// What all entries, foreign ones too, take of ``Limits/domainBytes`` (``DomainBudget``).
    private(set) var budgetBytes = 0

    /// An empty domain, last changed at `revision`.
    init(revision: Int64 = 0) {
        self.revision = revision
    }

    /// Whether nothing at all is stored (then the domain's file is removed).
    var isEmpty: Bool { entries.isEmpty && foreign.isEmpty }

    /// `key`'s value, decoded from its stored typed JSON.
    func lookup(_ key: Key) -> KeyLookup {
        switch entries.entry(key) {
        case nil: .missing
        case .some(let entry):
            switch entry.content {
            case .value(let value): .value(value, revision: entry.revision)
            case .unreadable(_, let reason): .unreadable(reason: reason)
            }
        }
    }

    var snapshot: DomainSnapshot {
        var snapshot = DomainSnapshot(
            values: [:], revisions: [:], unreadable: [:], revision: revision, budgetBytes: budgetBytes)
        snapshot.values.reserveCapacity(entries.count)
        snapshot.revisions.reserveCapacity(entries.count)
        entries.forEachEntry { key, entry in
            snapshot.revisions[key] = entry.revision
            switch entry.content {
            case .value(let value): snapshot.values[key] = value
            case .unreadable(_, let reason): snapshot.unreadable[key] = reason
            }
        }
        return snapshot
    }

    /// Adds an entry read from a file, under `key`, or under `name` when no request can name it
    /// (`key` nil). Returns whether it replaced one (a key the file gives twice).
    mutating func load(_ key: Key?, name: String, _ entry: StoredEntry) -> Bool {
        let replaced: Int?
        if let key {
            replaced = entries[key]?.bytes
            entries.set(key, entry)
        } else {
            replaced = foreign.updateValue(entry, forKey: name)?.bytes
        }
        budgetBytes +=
            DomainBudget.cost(entryBytes: entry.bytes) - (replaced.map { DomainBudget.cost(entryBytes: $0) } ?? 0)
        return replaced != nil
    }

    /// Applies absolute changes made at `revision`, each of `entryBytes` (as
    /// ``LogFormat/append(_:to:entryBytes:)`` measures them), leaving the domain at `budgetBytes` (as
    /// ``budgetBytes(_:after:entryBytes:entry:)`` computed it). Idempotent: replaying a log
    /// record twice gives the same state. With `json` (for one change only), its value is
    /// stored as those bytes (its compact typed JSON, keys sorted: the log record's), not
    /// encoded again.
    /// Returns whether the domain is empty afterwards.
    @discardableResult
    mutating func apply(
        _ changes: [Change], entryBytes: ArraySlice<Int>, budgetBytes: Int, at revision: Int64,
        json: UnsafeRawBufferPointer? = nil
    ) -> Bool {
        precondition(json == nil || changes.count == 1, "the JSON of one change's value")
        defer { self.revision = revision }
        for index in changes.indices {
            let change = changes[index]
            let bytes = entryBytes[entryBytes.startIndex + index]
            if let value = change.value {
                let entry = StoredEntry(content: .value(value), revision: revision, bytes: bytes)
                entries.set(change.key, entry, json: json)
            } else {
                entries.remove(change.key)
            }
        }
        self.budgetBytes = budgetBytes
        return isEmpty
    }

    /// The budget of a domain at `current` after `changes` of `entryBytes`, where `entry` finds
    /// the entries before them. Costs a lookup per change (a second for a key changed twice).
    static func budgetBytes(
        _ current: Int, after changes: [Change], entryBytes: ArraySlice<Int>, entry: (Key) -> EntryInfo?
    ) -> Int {
        var total = current
        var changed: [Key: Int] = [:]  // the cost now of keys changed earlier in `changes`
        for (change, bytes) in zip(changes, entryBytes) {
            let before = changed[change.key] ?? entry(change.key).map { DomainBudget.cost(entryBytes: $0.bytes) } ?? 0
            let after = change.value == nil ? 0 : DomainBudget.cost(entryBytes: bytes)
            total += after - before
            if changes.count > 1 { changed[change.key] = after }
        }
        return total
    }
}

/// A domain as a batch being planned sees it: the published state, shared and never copied,
/// plus the changes planned before in the same batch. Planning a change to a domain of 100,000
/// keys then costs as much as one to a domain of ten.
struct DomainView {
    private let base: DomainState?
    /// Keys changed earlier in this batch: their entry now, `nil` when removed.
    private var overlay: [Key: EntryInfo?] = [:]
    private var overlayRevision: Int64?
    /// How many (nameable) keys the domain has with the overlay applied.
    private(set) var count: Int
    /// The domain's budget with the overlay applied.
    private(set) var budgetBytes: Int

    init(_ base: DomainState?) {
        self.base = base
        count = base?.entries.count ?? 0
        budgetBytes = base?.budgetBytes ?? 0
    }

    func entry(_ key: Key) -> EntryInfo? {
        if let changed = overlay[key] { return changed }
        return base?.entries[key]
    }

    /// The revision at which the domain last changed; 0 when it does not exist (no keys).
    var revision: Int64 {
        count == 0 ? 0 : overlayRevision ?? base?.revision ?? 0
    }

    /// Every key, sorted (costs a pass over the domain: only a domain deletion needs it).
    var sortedKeys: [Key] {
        var keys = Set(base?.entries.keys ?? [])
        for (key, entry) in overlay {
            if entry == nil { keys.remove(key) } else { keys.insert(key) }
        }
        return keys.sorted()
    }

    /// The budget after `planned` with `entryBytes`, as ``DomainState/apply(_:entryBytes:budgetBytes:at:)``
    /// will leave it: a few additions when planning knew the entry replaced, else a lookup per change.
    func budgetBytes(after planned: PlannedChanges, entryBytes: ArraySlice<Int>) -> Int {
        if let replaced = planned.replacedCost, planned.changes.count == 1, let bytes = entryBytes.first {
            return budgetBytes - replaced + (planned.changes[0].value == nil ? 0 : DomainBudget.cost(entryBytes: bytes))
        }
        return DomainState.budgetBytes(budgetBytes, after: planned.changes, entryBytes: entryBytes, entry: entry)
    }

    /// Records changes planned at `revision`, as ``DomainState/apply(_:entryBytes:budgetBytes:at:)`` will make them.
    mutating func apply(_ changes: [Change], entryBytes: ArraySlice<Int>, budgetBytes: Int, at revision: Int64) {
        for index in changes.indices {
            let change = changes[index]
            let now = change.value.map { _ in
                EntryInfo(revision: revision, bytes: entryBytes[entryBytes.startIndex + index])
            }
            let existed: Bool
            if let earlier = overlay.updateValue(now, forKey: change.key) {  // one lookup, not three
                existed = earlier != nil
            } else {
                existed = base?.entries[change.key] != nil
            }
            count += (now != nil ? 1 : 0) - (existed ? 1 : 0)
        }
        overlayRevision = revision
        self.budgetBytes = budgetBytes
    }
}

/// The absolute changes a mutation makes, and, where planning looked it up anyway (a `Set`, a
/// `Delete`), the budget cost of the one entry they replace, so that the budget costs no
/// second lookup.
struct PlannedChanges {
    var changes: [Change]
    /// The cost (``DomainBudget``) of the entry the single change replaces, 0 if none; nil when
    /// not known.
    var replacedCost: Int?
}

/// Turns mutations into the absolute changes they make, checking their conditions.
enum MutationPlanner {
    /// The changes `mutation` makes to `current`; empty if it changes nothing. Throws
    /// `.notFound`, `.revisionMismatch`, or `.invalidValue` for a value that breaks a rule of
    /// the contract (a non-finite real, nesting over 512 levels).
    static func changes(
        of mutation: Mutation, in domain: Domain, current: DomainView
    ) throws(StorageError) -> PlannedChanges {
        switch mutation {
        case .set(let key, let value, let condition):
            let entry = current.entry(key)
            let revision = entry?.revision ?? 0
            if let condition, condition != revision { throw .revisionMismatch(current: revision) }
            try validate(value, key: key)
            return PlannedChanges(
                changes: [Change(key: key, value: value)],
                replacedCost: entry.map { DomainBudget.cost(entryBytes: $0.bytes) } ?? 0)
        case .delete(let key):
            guard let entry = current.entry(key) else { throw .notFound(domain, key) }
            return PlannedChanges(
                changes: [Change(key: key, value: nil)], replacedCost: DomainBudget.cost(entryBytes: entry.bytes))
        case .apply(let changes, let condition):
            return PlannedChanges(changes: try applied(changes, condition: condition, current: current))
        case .deleteDomain:
            guard current.count > 0 else { throw .notFound(domain, nil) }
            return PlannedChanges(changes: current.sortedKeys.map { Change(key: $0, value: nil) })
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
        do { try value.validate() } catch { throw .invalidValue("value of key \"\(key)\" cannot be stored: \(error)") }
    }
}
