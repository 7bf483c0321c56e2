import KVConnection
import KVProtocol
import KVValues

/// `apply FILE|- [--check] [--diff] [--prune]`: makes domains hold what a file says (desired
/// state, for config-management tools). The file is typed JSON, `{DOMAIN: {KEY: VALUE}}`, the
/// format of the system instance's drop-in files (each domain's object as `export` writes it).
///
/// Per domain of the file: every key it names gets its value; with `prune`, every other key of
/// the domain goes. A user's apply reads and changes the user's own layer (system defaults are
/// never copied in; a key the administrator locks is left out and named, exit 1, the rest
/// applied); with `--system`, the admins' layer of the system instance (not its drop-in files).
/// Each domain changes in one atomic `Apply`, on condition that it did not change since it was
/// read (read again and retried if it did). `check` changes nothing; `diff` prints each change.
extension Runner {
    /// Thrown by `apply --check` when something would change: exit status 1.
    struct WouldChange: Error {
        var count: Int
    }

    /// One change `apply` makes: `old` → `new` (nil: none).
    struct PlannedChange {
        var domain: Domain
        var key: Key
        var old: Value?
        var new: Value?
    }

    func apply(file: String, check: Bool, diff: Bool, prune: Bool, on connection: Connection) throws {
        let bytes = file == "-" ? try console.readStandardInput() : try Files.read(file)
        let desired = try Self.desiredState(bytes, from: file)
        var total = 0
        var locked: [(Domain, [Key])] = []
        for (domain, values) in desired.sorted(by: { $0.key < $1.key }) {
            let (planned, lockedKeys) = try retrying { () throws -> ([PlannedChange], [Key]) in
                let listing = try connection.listIfPresent(domain)
                let (planned, lockedKeys) = Self.plan(domain, values, listing: listing, prune: prune)
                if !check, !planned.isEmpty {
                    let changes = planned.map { Change(key: $0.key, value: $0.new) }
                    try connection.apply(domain, changes, ifRevision: listing?.revision ?? 0)
                }
                return (planned, lockedKeys)
            }
            if diff { console.out(planned.map(Self.diffLine).joined()) }
            total += planned.count
            if !lockedKeys.isEmpty { locked.append((domain, lockedKeys)) }
        }
        if !locked.isEmpty {
            let named = locked.map { domain, keys in Self.lockedNote(keys, of: domain) }.joined(separator: "; ")
            throw Failure(check ? "\(named): apply cannot change them" : "\(named); the rest is applied")
        }
        if check, total > 0 { throw WouldChange(count: total) }
    }

    /// What makes `domain` hold `values` (and, with `prune`, nothing else), sorted by key, and
    /// the keys the administrator locks that would need a change (left out).
    static func plan(_ domain: Domain, _ values: [Key: Value], listing: DomainListing?, prune: Bool) -> (
        [PlannedChange], [Key]
    ) {
        let sources = listing?.sources ?? [:]
        let own = (listing?.values ?? [:]).filter { sources[$0.key] == nil }
        let isLocked = { (key: Key) in sources[key] == .locked }
        var planned: [PlannedChange] = []
        var locked: [Key] = []
        for (key, value) in values where own[key] != value {
            if isLocked(key) {
                if listing?.values[key] != value { locked.append(key) }
                continue
            }
            planned.append(PlannedChange(domain: domain, key: key, old: own[key], new: value))
        }
        if prune {
            for key in own.keys where values[key] == nil && !isLocked(key) {
                planned.append(PlannedChange(domain: domain, key: key, old: own[key], new: nil))
            }
            for key in (listing?.unreadable ?? [:]).keys where values[key] == nil {
                planned.append(PlannedChange(domain: domain, key: key, old: nil, new: nil))
            }
        }
        return (planned.sorted { $0.key < $1.key }, locked.sorted())
    }

    /// `DOMAIN KEY: OLD -> NEW`, `(none)` for a missing side, one line, escaped.
    static func diffLine(_ change: PlannedChange) -> String {
        let show = { (value: Value?) in value.map { Format.json($0) } ?? "(none)" }
        let old = change.old == nil && change.new == nil ? "(unreadable)" : show(change.old)
        return Format.escapedLine("\(change.domain.name) \(change.key.name): \(old) -> \(show(change.new))") + "\n"
    }

    /// The domains and values of an apply file: `{DOMAIN: {KEY: VALUE}}`, read as the system
    /// instance reads its drop-in files (``DefaultsDocument``, one parser for both). A file with
    /// a `"for"` member (whom a drop-in file is for) is refused: a profile is the system
    /// instance's to apply, and `for` is never a domain.
    static func desiredState(_ bytes: [UInt8], from file: String) throws(Failure) -> [Domain: [Key: Value]] {
        let name = file == "-" ? "stdin" : file
        let document: DefaultsDocument
        do { document = try DefaultsDocument.parse(bytes) } catch { throw Failure("\(name): \(error)") }
        guard document.audience == nil else {
            throw Failure(
                "\(name) has a \"for\" member (whom a drop-in file is for): apply changes one layer for everyone it reaches; remove the member, or put the file in the system instance's defaults.d"
            )
        }
        return document.values
    }
}
