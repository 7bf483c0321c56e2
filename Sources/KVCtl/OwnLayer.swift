import KVConnection
import KVProtocol
import KVValues

/// What `import`, `restore` and `restore-backup` write: the user's own layer. A user's kvd
/// serves each domain as the layers combine (``DomainListing/sources`` names the values that are
/// the system's default or locked); these commands read and change only the user's own values,
/// so a system default is never copied into the user's layer, a lock blocks only the key it
/// locks, and a user's own value equal to the system default stays the user's own.
extension Runner {
    /// What making a domain's own layer hold some values did.
    struct OwnLayerChange {
        /// The revision of the change; nil when nothing needed changing.
        var revision: Int64?
        /// Keys left out because the system administrator locks them.
        var locked: [Key]
    }

    /// The user's own values of `domain` (the system's defaults and locked values left out; on
    /// the system instance, or with no system layer, all of them); nil when it does not exist.
    static func ownListing(_ domain: Domain, on connection: Connection) throws(ClientError) -> DomainListing? {
        guard var listing = try connection.listIfPresent(domain) else { return nil }
        keepOwn(&listing)
        return listing
    }

    /// Leaves only the user's own values in `listing`.
    static func keepOwn(_ listing: inout DomainListing) {
        for key in listing.sources.keys { listing.values[key] = nil }
        listing.sources = [:]
    }

    /// Makes the user's own layer of `domain` hold exactly `values`: one atomic Apply that sets
    /// every key of `values` (only those that differ, with `onlyChanged`) and removes every
    /// other own key (unreadable ones too, named on stderr), on condition that the domain did not
    /// change since it was listed. Keys the system locks are left out and returned: a lock
    /// blocks only its key. `file` names the source in messages. With `retry`, a domain that
    /// changed meanwhile is listed again (``retrying(_:)``); without, that is `RevisionMismatch`.
    func makeOwnLayer(
        _ domain: Domain, hold values: [Key: Value], onlyChanged: Bool, retry: Bool = true, from file: String,
        on connection: Connection
    ) throws -> OwnLayerChange {
        var locked: Set<Key> = []
        while true {
            do {
                let attempt = { () throws -> (Int64?, [Key]) in
                    let listing = try connection.listIfPresent(domain)
                    locked.formUnion((listing?.sources ?? [:]).filter { $0.value == .locked }.keys)
                    let own = listing.map { listing in listing.values.filter { listing.sources[$0.key] == nil } } ?? [:]
                    let present = Array(own.keys) + Array((listing?.unreadable ?? [:]).keys)
                    var changes = present.filter { values[$0] == nil && !locked.contains($0) }.map {
                        Change(key: $0, value: nil)
                    }
                    changes += values.filter { !locked.contains($0.key) && (!onlyChanged || own[$0.key] != $0.value) }
                        .map { Change(key: $0.key, value: $0.value) }
                    guard !changes.isEmpty else { return (nil, []) }
                    let revision = try connection.apply(
                        domain, changes.sorted { $0.key < $1.key }, ifRevision: listing?.revision ?? 0)
                    return (revision, (listing?.unreadable ?? [:]).keys.filter { values[$0] == nil }.sorted())
                }
                let (revision, removedUnreadable) = retry ? try retrying(attempt) : try attempt()
                if !removedUnreadable.isEmpty {
                    console.err(
                        "kvctl: removed \(Self.quoted(removedUnreadable)) from \(domain.name): not in \(file == "-" ? "stdin" : file), and their stored values could not be read\n"
                    )
                }
                return OwnLayerChange(revision: revision, locked: locked.filter { values[$0] != nil }.sorted())
            } catch ClientError.keyLocked(_, let name) {
                // A key locked with no system value is not listed: the refusal names it.
                guard let key = try? Key(validating: name), !locked.contains(key) else {
                    throw ClientError.keyLocked(domain: domain.name, key: name)
                }
                locked.insert(key)
            }
        }
    }

    /// "\"homepage\" is locked by the system administrator": why keys were left out.
    static func lockedNote(_ keys: [Key], of domain: Domain) -> String {
        "\(quoted(keys)) of \(domain.name) \(keys.count == 1 ? "is" : "are") locked by the system administrator (see: kvctl source \(domain.name) \(ClientError.shellWord(keys[0].name)))"
    }
}

extension Connection {
    /// `List` of `domain`, or nil when it does not exist.
    func listIfPresent(_ domain: Domain) throws(ClientError) -> DomainListing? {
        do {
            return try list(domain)
        } catch .notFound {
            return nil
        }
    }
}
