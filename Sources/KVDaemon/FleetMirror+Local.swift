import KVFleet
import KVStorage
import KVValues

/// A system instance's own values in domains the fleet would take over. The mirror makes its
/// fleet domains exactly what etcd holds, so starting it over domains that hold this host's own
/// values (or locks) would remove them: kvd refuses to start instead, naming them, and
/// changes nothing.
///
/// A domain belongs to the fleet once a mirror has committed while its patterns covered it:
/// ``Domain/fleetState`` keeps the `--fleet-domain` patterns of the last start
/// (``patternsKey``); a state from before that key, with a mirrored revision, counts every
/// domain the current patterns cover as the fleet's.
extension FleetMirror {
    /// The key of ``Domain/fleetState`` holding the fleet domain patterns of the last start.
    static let patternsKey = Key(constant: "fleetDomains")

    /// One domain of this host's own that the fleet would take over.
    struct LocalDomain: Equatable, CustomStringConvertible {
        var domain: Domain
        var values: Int
        var locks: Int

        var description: String {
            let counts = [values > 0 ? "\(values) value(s)" : nil, locks > 0 ? "\(locks) lock(s)" : nil].compactMap {
                $0
            }
            return "\(domain.name) (\(counts.joined(separator: ", ")))"
        }
    }

    /// The domains covered by `layout` that hold values or locks the fleet has not mirrored.
    static func localDomains(in store: Store, layout: FleetLayout) -> [LocalDomain] {
        let owned = ownedLayout(store, prefix: layout.prefix)
        var found: [Domain: LocalDomain] = [:]
        for domain in store.domains() where domain != .fleetState && domain != .dropInState {
            let target = domain.lockedDomain ?? domain
            guard layout.isFleetDomain(target), owned?.isFleetDomain(target) != true else { continue }
            let count = store.list(domain).map { $0.revisions.count } ?? 0
            var entry = found[target] ?? LocalDomain(domain: target, values: 0, locks: 0)
            if domain.lockedDomain == nil { entry.values += count } else { entry.locks += count }
            found[target] = entry
        }
        return found.values.sorted { $0.domain < $1.domain }
    }

    /// What a start over `local` tells the admin (one line).
    static func refusal(_ local: [LocalDomain], layout: FleetLayout) -> String {
        let shown =
            local.prefix(5).map(\.description).joined(separator: "; ")
            + (local.count > 5 ? "; and \(local.count - 5) more domain(s)" : "")
        return
            "the fleet: --fleet-domain \(layout.patterns.map(\.text).joined(separator: " ")) covers this host's own values, "
            + "which the fleet mirror would replace with etcd's: \(shown). Nothing was changed; kvd does not start with the fleet "
            + "until they are moved to etcd (under \(layout.prefix)values/DOMAIN/KEY and \(layout.prefix)locks/DOMAIN/KEY) or removed "
            + "(start kvd --system without --etcd, then kvctl --system delete DOMAIN and kvctl --system unlock DOMAIN KEY)"
    }

    /// systemd's status line for that refusal.
    static func refusalStatus(_ local: [LocalDomain]) -> String {
        "refused to start the fleet over this host's own values in \(local.map(\.domain.name).joined(separator: " "))"
    }

    /// The patterns the fleet owned at the last start (nil: the fleet never mirrored here).
    private static func ownedLayout(_ store: Store, prefix: String) -> FleetLayout? {
        if case .value(.array(let items), _) = store.get(.fleetState, patternsKey) {
            let texts = items.compactMap { item -> String? in if case .string(let text) = item { text } else { nil } }
            return try? FleetLayout(prefix: prefix, domainPatterns: texts)
        }
        guard case .value(.integer(let revision), _) = store.get(.fleetState, revisionKey), revision > 0 else {
            return nil
        }
        return try? FleetLayout(prefix: prefix, domainPatterns: ["*"])  // mirrored before the patterns were kept
    }

    /// Records the current patterns as the fleet's (the domains they cover are the mirror's
    /// from now on). Durable when it returns.
    func recordPatterns() throws(StorageError) {
        let patterns = Value.array(layout.patterns.map { .string($0.text) })
        if case .value(let stored, _) = store.get(.fleetState, Self.patternsKey), stored == patterns { return }
        _ = try store.commitGroup([
            DomainChanges(domain: .fleetState, changes: [Change(key: Self.patternsKey, value: patterns)])
        ])
    }
}
