import KVValues

/// The contract's layout of the fleet in etcd, and which domains this host mirrors.
///
/// Key `prefix + "values/DOMAIN/KEY"` holds the value's typed JSON; key
/// `prefix + "locks/DOMAIN/KEY"` (any value) locks that key. DOMAIN never contains `/`; KEY may
/// (everything after the `/` that ends DOMAIN). A domain is a fleet domain when any of the
/// patterns matches it. Pure and thread-safe.
///
/// ```swift
/// let layout = try FleetLayout(domainPatterns: ["com.corp.*"])
/// layout.name(ofEtcdKey: Array("kvd/locks/com.corp.mail/server/host".utf8))
/// // .fleet(FleetName(kind: .lock, domain: com.corp.mail, key: "server/host"))
/// ```
public struct FleetLayout: Sendable {
    /// The prefix when `--etcd-prefix` is not given.
    public static let defaultPrefix = "kvd/"

    public let prefix: String
    public let patterns: [FleetDomainPattern]
    private let prefixBytes: [UInt8]

    /// Refuses an empty prefix (it would take the whole keyspace) and any bad pattern
    /// (``FleetDomainPattern/init(validating:)``).
    public init(prefix: String = FleetLayout.defaultPrefix, domainPatterns: [String]) throws(FleetLayoutError) {
        guard !prefix.isEmpty else {
            throw FleetLayoutError(
                text: prefix, reason: "the etcd prefix must not be empty (the default is \"\(Self.defaultPrefix)\")")
        }
        var patterns: [FleetDomainPattern] = []
        for text in domainPatterns { patterns.append(try FleetDomainPattern(validating: text)) }
        self.prefix = prefix
        self.patterns = patterns
        self.prefixBytes = Array(prefix.utf8)
    }

    /// The etcd range holding the whole layout: every key that starts with the prefix.
    public var range: (key: [UInt8], end: [UInt8]) { (prefixBytes, etcdPrefixEnd(prefixBytes)) }

    /// Whether this host mirrors `domain`.
    public func isFleetDomain(_ domain: Domain) -> Bool { matchesAnyPattern(domain.name) }

    private func matchesAnyPattern(_ name: String) -> Bool { patterns.contains { $0.matches(name) } }

    /// The etcd key of `name`.
    public func etcdKey(_ name: FleetName) -> [UInt8] {
        etcdFolder(of: name.domain, kind: name.kind) + Array(name.key.name.utf8)
    }

    /// What the etcd keys of `domain`'s values (or locks) begin with: `PREFIX values/DOMAIN/`.
    public func etcdFolder(of domain: Domain, kind: FleetKind) -> [UInt8] {
        prefixBytes + Array(kind.folder.utf8) + Array(domain.name.utf8) + [UInt8(ascii: "/")]
    }

    /// The bytes a value is stored as in etcd: its typed JSON, compact. Refuses a value that
    /// ``Value/validate()`` refuses (too deep, a non-finite real, a date out of range).
    public func etcdValue(_ value: Value) throws(ValueError) -> [UInt8] {
        try value.validate()
        return JSONWriter().bytes(value.typedJSON)
    }

    /// Reads a value's bytes from etcd: typed JSON, at most ``Limits/valueDepth`` levels deep
    /// (the rule ``Value/validate()`` checks), as the contract encodes it.
    public func value(fromEtcdValue bytes: [UInt8]) throws(ValueError) -> Value {
        let value = try Value(typedJSONText: bytes)
        try value.validate()  // the same rules once more, so a value kvd reads is one it would write
        return value
    }

    /// What `key` is in the layout: a fleet value or lock of this host, a key this host
    /// leaves alone (and why), or a key it should mirror but cannot read (and why).
    ///
    /// Whether a domain is a fleet domain is decided on the name as it stands in the key, before
    /// it is validated, so a host reports unreadable names only in the domains it mirrors
    /// (plus keys that fit no part of the layout at all).
    public func name(ofEtcdKey key: [UInt8]) -> FleetKeyReading {
        guard key.starts(with: prefixBytes) else { return .ignored("it is not under the prefix \"\(prefix)\"") }
        let rest = key[prefixBytes.count...]
        guard let kind = FleetKind.allCases.first(where: { rest.starts(with: $0.folder.utf8) }) else {
            return .unreadable("under the prefix \"\(prefix)\" only values/DOMAIN/KEY and locks/DOMAIN/KEY are allowed")
        }
        let path = rest.dropFirst(kind.folder.utf8.count)
        let slash = path.firstIndex(of: UInt8(ascii: "/"))
        let domainText = String(decoding: path[..<(slash ?? path.endIndex)], as: UTF8.self)
        guard matchesAnyPattern(domainText) else {
            return .ignored("domain \"\(domainText)\" is not a fleet domain of this host")
        }
        let domain: Domain
        do { domain = try Domain(validating: domainText) } catch { return .unreadable(error.description) }
        guard let slash else {
            return .unreadable("no key follows the domain (the layout is \(kind.folder)DOMAIN/KEY)")
        }
        guard let keyText = String(validating: path[(slash + 1)...], as: UTF8.self) else {
            return .unreadable("the key is not valid UTF-8")
        }
        do { return .fleet(FleetName(kind: kind, domain: domain, key: try Key(validating: keyText))) } catch {
            return .unreadable(error.description)
        }
    }
}

/// A fleet key: a value or a lock.
public enum FleetKind: Sendable, Hashable, CaseIterable {
    case value
    case lock

    /// The folder under the prefix that holds this kind: `values/` or `locks/`.
    public var folder: String {
        switch self {
        case .value: "values/"
        case .lock: "locks/"
        }
    }
}

/// The name of a fleet value or lock.
public struct FleetName: Sendable, Hashable, CustomStringConvertible {
    public var kind: FleetKind
    public var domain: Domain
    public var key: Key

    public init(kind: FleetKind, domain: Domain, key: Key) {
        self.kind = kind
        self.domain = domain
        self.key = key
    }

    public var description: String { "\(kind.folder)\(domain)/\(key)" }
}

/// What an etcd key is in the layout (``FleetLayout/name(ofEtcdKey:)``).
public enum FleetKeyReading: Sendable, Equatable {
    /// A value or lock this host mirrors.
    case fleet(FleetName)
    /// Not this host's business (outside the prefix, or another host's domain): why.
    case ignored(String)
    /// A key this host would mirror but cannot read: why (to report, never to drop silently).
    case unreadable(String)
}
