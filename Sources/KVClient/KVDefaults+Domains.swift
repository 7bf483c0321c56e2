import KVProtocol
import KVValues
import Synchronization

/// Foundation's domains: the names of the standard ones, volatile domains (in memory, per suite
/// object), persistent domains (kvd domains, read and replaced whole), and suites added to the
/// search order.
///
/// ```swift
/// defaults.setPersistentDomain(["theme": "dark", "size": 12], forName: "com.example.app")   // one atomic commit
/// defaults.addSuite(named: "com.example.shared")     // searched after the suite's own domain
/// defaults.setVolatileDomain(["demo": true], forName: KVDefaults.argumentDomain)   // like -demo YES
/// ```
extension KVDefaults {
    /// `NSGlobalDomain`: the domain every suite searches after its own (and its added suites).
    public static let globalDomain = "NSGlobalDomain"
    /// `NSArgumentDomain`: the volatile domain of `-key value` command-line pairs, searched first.
    public static let argumentDomain = "NSArgumentDomain"
    /// `NSRegistrationDomain`: the volatile domain of ``register(defaults:)``, searched last.
    public static let registrationDomain = "NSRegistrationDomain"

    /// The suite of this program, as ``standard`` (a new object, with its own volatile domains).
    public convenience init() {
        self.init(domain: ProcessFacts.executableDomain())
    }

    /// Does nothing, as in swift-corelibs-foundation: ``standard`` never holds stale values (its
    /// cache follows kvd through a watch), so there is nothing to reset.
    public static func resetStandardUserDefaults() {}

    // MARK: volatile domains

    /// The names of the volatile domains: ``argumentDomain`` (unless removed), each name given to
    /// ``setVolatileDomain(_:forName:)``, and ``registrationDomain`` once something is registered;
    /// sorted.
    public var volatileDomainNames: [String] {
        var names = Set(volatileDomains.withLock { $0.keys })
        if !registration.withLock({ $0.isEmpty }) { names.insert(Self.registrationDomain) }
        return names.sorted()
    }

    /// The values of the volatile domain `domainName` (``registrationDomain``: the registered
    /// defaults), as Foundation hands them out; empty if there is no such domain.
    public func volatileDomain(forName domainName: String) -> [String: Any] {
        volatileValues(forName: domainName).mapValues(Coercion.any)
    }

    /// Merges `domain` into the volatile domain `domainName` (created if missing), as
    /// swift-corelibs-foundation does; kept in memory by this suite object only. Only
    /// ``argumentDomain`` and ``registrationDomain`` (the same as ``register(defaults:)``) are in
    /// the search order; other volatile domains are only kept. A value that is not a
    /// property-list value is not added and is reported to the diagnostics handler.
    public func setVolatileDomain(_ domain: [String: Any], forName domainName: String) {
        let values = converted(domain, "not added to the volatile domain \(domainName)")
        if domainName == Self.registrationDomain {
            registration.withLock { $0.merge(values) { $1 } }
        } else {
            changeVolatileDomains { $0[domainName, default: [:]].merge(values) { $1 } }
        }
    }

    /// Removes the volatile domain `domainName` (``registrationDomain``: every registered default).
    public func removeVolatileDomain(forName domainName: String) {
        if domainName == Self.registrationDomain {
            registration.withLock { $0.removeAll() }
        } else {
            changeVolatileDomains { _ = $0.removeValue(forKey: domainName) }
        }
    }

    func volatileValues(forName domainName: String) -> [String: Value] {
        if domainName == Self.registrationDomain { return registration.withLock { $0 } }
        return volatileDomains.withLock { $0[domainName] ?? [:] }
    }

    /// `values` as stored values; each one that is not a property-list value is left out and
    /// reported as `what`.
    func converted(_ values: [String: Any], _ what: String) -> [String: Value] {
        var result: [String: Value] = [:]
        for (key, value) in values {
            if let value = Coercion.value(from: value) {
                result[key] = value
            } else {
                report(key, .writeFailed, "\(what): a \(type(of: value)) is not a property-list value")
            }
        }
        return result
    }

    // MARK: suites

    /// Adds the domain `suiteName` to the search order, after this suite's domain (and the
    /// suites added before) and before `NSGlobalDomain`. Ignores this suite's own name,
    /// `NSGlobalDomain` and a suite already added; a name that is not a valid domain is reported
    /// to the diagnostics handler and ignored.
    public func addSuite(named suiteName: String) {
        guard let added = validDomain(suiteName, "not added as a suite") else { return }
        changeAddedSuites { suites in
            if added != domain, added != .global, !suites.contains(added) { suites.append(added) }
        }
    }

    /// Removes `suiteName` from the search order (if ``addSuite(named:)`` added it).
    public func removeSuite(named suiteName: String) {
        changeAddedSuites { $0.removeAll { $0.name == suiteName } }
    }

    /// `name` as a domain, or nil after reporting why it is not one.
    func validDomain(_ name: String, _ what: String) -> Domain? {
        do {
            return try Domain(validating: name)
        } catch {
            configuration.diagnostics(
                KVDiagnostic(domain: name, key: nil, kind: .writeFailed, message: "\(what): \(error)"))
            return nil
        }
    }
}
