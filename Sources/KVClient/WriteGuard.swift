import KVValues

/// What a typed save may write over the stored value: the one rule that keeps a save from losing
/// what a read did not understand.
///
/// The stored value is read as the key's type, as a read would. If it reads cleanly (or nothing
/// is stored), the app's value is written. Otherwise, by ``KVDefaults/UnreadPolicy``:
/// - `.refuse` (the default): nothing is written; ``KVDefaultsError/wouldLoseStoredData(key:report:)``;
/// - `.keep`: each unread part is put back into the app's value where it provably belongs, by
///   member names from the root, never by array position (an element's index changes when the
///   app inserts or removes one), and never inside a value that was migrated (its stored shape
///   is not the written one). A skipped element is appended to its array; a member the type does
///   not know is put back if the app's value has no member of that name; an optional that read
///   as nil, a skipped dictionary entry, or an enum read as its fallback is put back if the app
///   left that member as the read produced it. Anything else (inside an array element, inside a
///   migrated value, the whole value) cannot be kept, and the save refuses as with `.refuse`,
///   naming those parts;
/// - `.replace`: the app's value is written; what was not read is lost, on purpose.
enum WriteGuard {
    /// What is stored under the key, as far as a save is concerned.
    enum Stored {
        case absent
        case value(Value)
        /// kvd keeps a stored value it cannot parse; `reason` says why.
        case unreadable(String)
    }

    /// What a save writes, and what of the stored value it replaced without having read it.
    struct Prepared {
        /// The value to store; nil removes the key.
        var value: Value?
        /// What `.replace` wrote over that did not read cleanly; nil when nothing was lost.
        var replaced: KVReadReport?
    }

    /// The value to store for `node` (the app's value of type `T`, encoded) over `stored`; nil
    /// removes the key. Throws ``KVDefaultsError/wouldLoseStoredData(key:report:)`` when that
    /// would lose stored data the policy does not allow to lose.
    static func prepare<T: Codable>(
        _ node: Node, as type: T.Type, over stored: Stored, unread policy: KVDefaults.UnreadPolicy, key: String
    ) throws(KVDefaultsError) -> Value? {
        try prepareReporting(node, as: T.self, over: stored, unread: policy, key: key).value
    }

    /// ``prepare(_:as:over:unread:key:)``, saying what `.replace` wrote over unread.
    static func prepareReporting<T: Codable>(
        _ node: Node, as type: T.Type, over stored: Stored, unread policy: KVDefaults.UnreadPolicy, key: String
    ) throws(KVDefaultsError) -> Prepared {
        switch stored {
        case .absent:
            return Prepared(value: try final(node, key))
        case .unreadable(let reason):
            let finding = KVReadReport.Finding(
                path: "$", kind: .undecodable,
                message: "kvd cannot read the stored value (\(reason)) and keeps it as it is", stored: nil)
            let report = KVReadReport(findings: [finding])
            guard policy == .replace else { throw .wouldLoseStoredData(key: key, report: report) }
            return Prepared(value: try final(node, key), replaced: report)
        case .value(let current):
            let read = KVDefaults.typedRead(T.self, current, argument: false)
            let blocking = read.findings.filter(\.blocksWrite)
            if blocking.isEmpty { return Prepared(value: try final(node, key)) }
            if policy == .replace {
                return Prepared(value: try final(node, key), replaced: KVReadReport(findings: blocking.map(\.visible)))
            }
            guard policy == .keep, node != .null, let seenValue = read.value else { throw refusal(key, blocking) }
            let seen = try? NodeEncoder().encode(seenValue)
            var merged = node
            let unkept = blocking.filter { !keep($0, into: &merged, seen: seen) }
            guard unkept.isEmpty else { throw refusal(key, unkept) }
            return Prepared(value: try final(merged, key))
        }
    }

    private static func refusal(_ key: String, _ findings: [Finding]) -> KVDefaultsError {
        .wouldLoseStoredData(key: key, report: KVReadReport(findings: findings.map(\.visible)))
    }

    /// The stored form of `node`; nil for `null` (a nil optional: the key is removed).
    static func final(_ node: Node, _ key: String) throws(KVDefaultsError) -> Value? {
        guard node != .null else { return nil }
        let value: Value
        do { value = try node.value() } catch { throw .invalidValue(key: key, reason: error.description) }
        try KVDefaultsError.validate(value, key: key)
        return value
    }

    // MARK: keeping

    /// Puts the stored part of `finding` back into `merged` (see the type's rules); false when
    /// it cannot be kept. `seen` is the value the read produced, encoded: a member the app left
    /// as it was there is the app's own no more than it was.
    static func keep(_ finding: Finding, into merged: inout Node, seen: Node?) -> Bool {
        guard let stored = finding.stored, (try? stored.value()) != nil, let last = finding.steps.last else {
            return false
        }
        let container = finding.steps.dropLast()
        switch (finding.keep, last) {
        case (.append, .index):
            return modify(&merged, container) { node in
                guard case .array(let elements) = node else { return false }
                node = .array(elements + [stored])
                return true
            }
        case (.memberIfAbsent, .member(let name)):
            return modify(&merged, container) { node in
                guard case .object(var members) = node, members[name] == nil || members[name] == .null else {
                    return false
                }
                members[name] = stored
                node = .object(members)
                return true
            }
        case (.memberIfUnchanged, .member(let name)):
            guard let seen else { return false }
            let then = member(seen, finding.steps[...])
            return modify(&merged, container) { node in
                guard case .object(var members) = node else { return false }
                let now = members[name] == .null ? nil : members[name]
                if now == then { members[name] = stored }
                node = .object(members)
                return true
            }
        default:
            return false
        }
    }

    /// Runs `body` on the node at `path` (member names only) inside `node`; false if there is
    /// none there or `body` says no.
    private static func modify(_ node: inout Node, _ path: ArraySlice<PathStep>, _ body: (inout Node) -> Bool) -> Bool {
        guard let first = path.first else { return body(&node) }
        guard case .member(let name) = first, case .object(var members) = node, var child = members[name] else {
            return false
        }
        guard modify(&child, path.dropFirst(), body) else { return false }
        members[name] = child
        node = .object(members)
        return true
    }

    /// The node at `path` (member names only) inside `node`, nil if none (or `null`).
    private static func member(_ node: Node, _ path: ArraySlice<PathStep>) -> Node? {
        guard let first = path.first else { return node == .null ? nil : node }
        guard case .member(let name) = first, case .object(let members) = node, let child = members[name] else {
            return nil
        }
        return member(child, path.dropFirst())
    }
}
