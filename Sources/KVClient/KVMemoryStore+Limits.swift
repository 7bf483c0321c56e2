import KVValues

/// kvd's limits on what a commit may store (docs/reference/names-and-limits.md, defined in
/// `KVValues/Limits.swift`), applied by ``KVMemoryStore`` so that a test on a memory store is
/// refused what production would refuse, with the same ``ClientError``:
///
/// - a value kvd cannot hold (nested deeper than ``Limits/valueDepth``, a real that is not
///   finite): `.invalidValue`, as kvd's `InvalidValue`;
/// - changes that do not fit one message (``Limits/domainBytes`` as typed JSON): `.tooLarge`
///   with the message limit, as the connection refuses to send it;
/// - a domain that would grow past ``Limits/domainBytes`` (its keys and values as compact typed
///   JSON plus ``Limits/replyEntryOverhead`` a key, as ``DomainBudget`` counts them): `.tooLarge`,
///   as kvd refuses the write. A change that does not grow the domain is always taken, as kvd
///   takes it.
///
/// Names need no check here: ``Domain`` and ``Key`` are valid by construction. Pure; a pass over
/// the changed values, and a sum over the domain's entries.
enum MemoryStoreLimits {
    /// What one key of a domain costs in kvd's budget: its key and value as compact typed JSON.
    static func entryBytes(_ key: Key, _ value: Value) -> Int {
        var out: [UInt8] = []
        JSONWriter.writeString(key.name, into: &out)
        JSONWriter().write(value.typedJSON, into: &out)
        return out.count
    }

    /// The entry bytes of each change (0 for a removal), or the error kvd would give for
    /// `changes` over `entries` (the domain as stored).
    static func check(_ changes: [Change], over entries: [Key: KVMemoryStore.Stored]) throws(ClientError) -> [Int] {
        var sizes: [Int] = []
        var changed = 0
        for change in changes {
            guard let value = change.value else {
                sizes.append(0)
                continue
            }
            do { try value.validate() } catch { throw .invalidValue(reason: error.description) }
            let bytes = entryBytes(change.key, value)
            sizes.append(bytes)
            changed += DomainBudget.cost(entryBytes: bytes)
        }
        let tooLarge = ClientError.tooLarge(limit: Int64(Limits.messageBytes))
        guard changed <= Limits.domainBytes else { throw tooLarge }
        let before = budget(of: entries)
        var after = entries.mapValues { DomainBudget.cost(entryBytes: $0.bytes) }
        for (change, bytes) in zip(changes, sizes) {
            after[change.key] = change.value == nil ? nil : DomainBudget.cost(entryBytes: bytes)
        }
        let total = after.values.reduce(0, +)
        guard total <= Limits.domainBytes || total <= before else { throw tooLarge }
        return sizes
    }

    /// The domain's budget as kvd counts it.
    static func budget(of entries: [Key: KVMemoryStore.Stored]) -> Int {
        entries.values.reduce(0) { $0 + DomainBudget.cost(entryBytes: $1.bytes) }
    }
}
