import KVProtocol
import KVValues

/// Persistent domains: kvd domains read and replaced whole, by name (this suite's or any other).
/// Each call blocks for its round trips to kvd and reads kvd itself, not the cache. Only the
/// user's own values are a persistent domain: a machine default or a locked value of the system
/// layer is neither returned nor removed, and values kvd cannot read stay stored (each reported to
/// the diagnostics handler).
extension KVDefaults {
    /// The user's values in the domain `domainName` as Foundation hands them out (`[:]` for a
    /// domain with none); nil if the name is not a valid domain or kvd cannot be reached (the
    /// reason goes to the diagnostics handler).
    public func persistentDomain(forName domainName: String) -> [String: Any]? {
        guard let target = validDomain(domainName, "cannot read the persistent domain") else { return nil }
        do {
            let listing = try client.call { (connection) throws(ClientError) in
                try connection.list(target)
            } ifNotFound: {
                DomainListing(values: [:], unreadable: [:], revision: 0)
            }
            reportUnreadable(listing, target, "not in the persistent domain")
            return Dictionary(
                uniqueKeysWithValues: Self.userValues(listing).map { ($0.key.name, Coercion.any($0.value)) })
        } catch {
            configuration.diagnostics(
                KVDiagnostic(
                    domain: domainName, key: nil, kind: .unavailable,
                    message: "cannot read the persistent domain: \(error)"))
            return nil
        }
    }

    /// Replaces the user's values of the domain `domainName` by `domain`, in one atomic commit
    /// (kvd's `Apply`, made only if the domain did not change since it was read; retried
    /// otherwise), durable when this returns; then posts ``didChangeNotification`` once. Writes
    /// nothing if a value is not a property-list value, a key is invalid or locked, or kvd
    /// refuses; the reason goes to the diagnostics handler (``writePersistentDomain(_:forName:)``
    /// throws it instead).
    public func setPersistentDomain(_ domain: [String: Any], forName domainName: String) {
        do {
            try writePersistentDomain(domain, forName: domainName)
        } catch {
            reportWriteFailure(error, key: nil, "persistent domain \(domainName) not replaced")
        }
    }

    /// Removes every user value of the domain `domainName` in one atomic commit, then posts
    /// ``didChangeNotification`` once; failures go to the diagnostics handler.
    public func removePersistentDomain(forName domainName: String) {
        do {
            try writePersistentDomain(nil, forName: domainName)
        } catch {
            reportWriteFailure(error, key: nil, "persistent domain \(domainName) not removed")
        }
    }

    /// ``setPersistentDomain(_:forName:)`` (with nil: ``removePersistentDomain(forName:)``) that
    /// throws instead of reporting.
    public func writePersistentDomain(_ values: [String: Any]?, forName domainName: String) throws(KVDefaultsError) {
        let target: Domain
        do { target = try Domain(validating: domainName) } catch {
            throw .invalidDomain(domainName, reason: error.reason)
        }
        var wanted: [KVValues.Key: Value] = [:]
        for (name, any) in values ?? [:] {
            let key = try KVDefaultsError.key(name)
            guard let value = Coercion.value(from: any) else { throw Self.notPropertyList(any, key: name) }
            try KVDefaultsError.validate(value, key: name)
            wanted[key] = value
        }
        try commitConditionally(target, announce: false) { listing in
            reportUnreadable(listing, target, "kept: kvd cannot read it, so replacing the persistent domain leaves it")
            var changes = Self.userValues(listing).keys.filter { wanted[$0] == nil }.map { Change(key: $0, value: nil) }
            changes += wanted.map { Change(key: $0.key, value: $0.value) }
            return changes
        }
        postDidChange()
    }

    /// The values of `listing` that are the user's own (not the system layer's).
    static func userValues(_ listing: DomainListing) -> [KVValues.Key: Value] {
        listing.values.filter { listing.sources[$0.key] == nil || listing.sources[$0.key] == .user }
    }

    private func reportUnreadable(_ listing: DomainListing, _ target: Domain, _ what: String) {
        for (key, reason) in listing.unreadable.sorted(by: { $0.key.name < $1.key.name }) {
            configuration.diagnostics(
                KVDiagnostic(domain: target.name, key: key.name, kind: .undecodable, message: "\(what) (\(reason))"))
        }
    }
}
