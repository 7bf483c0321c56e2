import KVSystem
import KVValues

@testable import KVStorage

/// What a store holds, as the test's own oracle computes it (independent of the engine's
/// planner) or as read back from a store through its public API.
struct StoreContent: Hashable, CustomStringConvertible {
    struct Stored: Hashable {
        var value: Value
        var revision: Int64
    }

    var domains: [Domain: [Key: Stored]] = [:]
    var domainRevisions: [Domain: Int64] = [:]
    var revision: Int64 = 0
    /// Every committed change per domain, sorted by revision and key (the oracle's); or, read
    /// from a store, what its history serves. Not part of `==` (``CrashChecker/judgeHistory``
    /// compares it, allowing for retention).
    var history: [Domain: [HistoryEntry]] = [:]
    /// A store's states rebuilt from history at some revisions (``CrashChecker/rebuildStates``).
    var rebuilt: [Domain: [Int64: [Key: Value]]] = [:]

    init() {}

    static func == (left: StoreContent, right: StoreContent) -> Bool {
        (left.domains, left.domainRevisions, left.revision) == (right.domains, right.domainRevisions, right.revision)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(domains)
        hasher.combine(domainRevisions)
        hasher.combine(revision)
    }

    /// Reads the history of `domains` from `store` (entries sorted by revision and key).
    mutating func readHistory(of store: Store, _ domains: [Domain]) throws {
        for domain in domains {
            let entries = try store.history(domain).entries.map {
                HistoryEntry(revision: $0.revision, time: nil, key: $0.key, value: $0.value)
            }
            if !entries.isEmpty { history[domain] = entries.sorted(by: Self.historyOrder) }
        }
    }

    static func historyOrder(_ a: HistoryEntry, _ b: HistoryEntry) -> Bool { (a.revision, a.key) < (b.revision, b.key) }

    /// Adds the oracle's history entries of one commit at `revision` (the final value of each key).
    private mutating func record(_ domain: Domain, _ changes: [Key: Value?], at revision: Int64) {
        let entries = changes.map { HistoryEntry(revision: revision, time: nil, key: $0.key, value: $0.value) }.sorted(
            by: Self.historyOrder)
        history[domain, default: []] += entries
    }

    /// Reads everything a store serves.
    init(of store: Store) {
        for domain in store.domains() {
            guard let snapshot = store.list(domain) else { continue }
            var entries: [Key: Stored] = [:]
            for (key, value) in snapshot.values {
                entries[key] = Stored(value: value, revision: snapshot.revisions[key] ?? -1)
            }
            for key in snapshot.unreadable.keys { entries[key] = Stored(value: .string("UNREADABLE"), revision: -1) }
            domains[domain] = entries
            domainRevisions[domain] = snapshot.revision
        }
        revision = store.revision
    }

    /// Applies a mutation as a successful commit would: the oracle.
    mutating func apply(_ domain: Domain, _ mutation: Mutation) {
        var entries = domains[domain] ?? [:]
        var changed: [Key: Value?] = [:]
        let next = revision + 1
        switch mutation {
        case .set(let key, let value, _):
            entries[key] = Stored(value: value, revision: next)
            changed[key] = .some(value)
        case .delete(let key):
            if entries.removeValue(forKey: key) != nil { changed[key] = .some(nil) }
        case .apply(let changes, _):
            for change in changes {
                if let value = change.value {
                    entries[change.key] = Stored(value: value, revision: next)
                    changed[change.key] = .some(value)
                } else if entries.removeValue(forKey: change.key) != nil {
                    changed[change.key] = .some(nil)
                }
            }
        case .deleteDomain:
            for key in entries.keys { changed[key] = .some(nil) }
            entries = [:]
        }
        guard !changed.isEmpty else { return }
        record(domain, changed, at: next)
        revision = next
        domains[domain] = entries.isEmpty ? nil : entries
        domainRevisions[domain] = entries.isEmpty ? nil : next
    }

    /// Applies a group as a successful group commit would: every domain's changes at one
    /// revision, or (nothing changes) none.
    mutating func applyGroup(_ parts: [DomainChanges]) {
        var after = self
        after.revision = revision
        var changed = false
        for part in parts {
            var entries = after.domains[part.domain] ?? [:]
            var domainChanged: [Key: Value?] = [:]
            for change in part.changes {
                if let value = change.value {
                    entries[change.key] = Stored(value: value, revision: revision + 1)
                    domainChanged[change.key] = .some(value)
                } else if entries.removeValue(forKey: change.key) != nil {
                    domainChanged[change.key] = .some(nil)
                }
            }
            guard !domainChanged.isEmpty else { continue }
            after.record(part.domain, domainChanged, at: revision + 1)
            changed = true
            after.domains[part.domain] = entries.isEmpty ? nil : entries
            after.domainRevisions[part.domain] = entries.isEmpty ? nil : revision + 1
        }
        guard changed else { return }
        after.revision = revision + 1
        self = after
    }

    var description: String {
        let parts = domains.keys.sorted().map { domain in
            let keys = domains[domain]!.keys.sorted().map { "\($0)@\(domains[domain]![$0]!.revision)" }
            return "\(domain)@\(domainRevisions[domain] ?? -1)[\(keys.joined(separator: " "))]"
        }
        return "revision \(revision): " + parts.joined(separator: "; ")
    }
}
