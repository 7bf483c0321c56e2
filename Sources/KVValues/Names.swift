/// A validated domain name: 1–255 bytes of `A-Z a-z 0-9 . _ -`, not starting with `.` or `-`.
///
/// Build one with ``init(validating:)`` at the edge (socket, command line); past that, code takes
/// `Domain` and never re-checks. Because of the rule, a domain name is always a safe file name.
public struct Domain: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let name: String
    /// ``NameHash`` of ``name``, computed once: hashing a domain feeds this, not the name's bytes
    /// (a Set passes its domain through several dictionaries).
    public let nameHash: Int

    /// The global domain, searched after an app's own.
    public static let global = Domain(unchecked: "NSGlobalDomain")

    public init(validating name: String) throws(NameError) {
        var text = name
        // One pass over the contiguous UTF-8 (every call validates its domain, a Get too).
        let (problem, hash): (NameError?, Int) = text.withUTF8 { bytes in
            (Self.problem(with: bytes, name: name), NameHash.of(bytes))
        }
        if let problem { throw problem }
        (self.name, self.nameHash) = (name, hash)
    }

    /// What is wrong with the name whose UTF-8 is `bytes`, or `nil`.
    private static func problem(with bytes: UnsafeBufferPointer<UInt8>, name: String) -> NameError? {
        guard let first = bytes.first else { return NameError(name: name, reason: "a domain name must not be empty") }
        guard bytes.count <= Limits.domainNameBytes else {
            return NameError(
                name: name, reason: "a domain name must be at most \(Limits.domainNameBytes) bytes, not \(bytes.count)")
        }
        guard first != UInt8(ascii: "."), first != UInt8(ascii: "-") else {
            return NameError(name: name, reason: "a domain name must not start with '.' or '-'")
        }
        for byte in bytes where !isAllowed(byte) {
            let shown =
                (0x21...0x7E).contains(byte)
                ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
            return NameError(name: name, reason: "a domain name may hold only A-Z a-z 0-9 . _ -, not \(shown)")
        }
        if containsBackupStamp(bytes) {
            return NameError(
                name: name,
                reason:
                    "a domain name must not contain \"\(backupMarker)\" followed by a time like 20261129T181320Z: kvd names its copies of unreadable files so"
            )
        }
        return nil
    }

    /// What kvd puts between a file's name and the time when it sets the file aside as
    /// unreadable: `com.x.unreadable-20261129T181320Z.json`.
    public static let backupMarker = ".unreadable-"

    /// Whether `name` contains ``backupMarker`` followed by a time like `20261129T181320Z`, as
    /// the names of kvd's copies of unreadable files do (no domain name does).
    public static func containsBackupStamp(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { containsBackupStamp($0) }
    }

    private static func containsBackupStamp(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let marker = backupMarkerBytes
        guard bytes.count >= marker.count + 16 else { return false }
        for start in 0...(bytes.count - marker.count - 16) where bytes[start] == marker[0] {
            guard (0..<marker.count).allSatisfy({ bytes[start + $0] == marker[$0] }) else { continue }
            let stamp = bytes[(start + marker.count)..<(start + marker.count + 16)]
            let digits = stamp.indices.filter { $0 - stamp.startIndex != 8 && $0 - stamp.startIndex != 15 }
            if stamp[stamp.startIndex + 8] == UInt8(ascii: "T"), stamp[stamp.startIndex + 15] == UInt8(ascii: "Z"),
                digits.allSatisfy({ stamp[$0] >= 0x30 && stamp[$0] <= 0x39 })
            {
                return true
            }
        }
        return false
    }

    private static let backupMarkerBytes = Array(backupMarker.utf8)

    fileprivate init(unchecked name: String) { (self.name, self.nameHash) = (name, NameHash.of(name)) }

    /// A name written in the program, such as `"com.example.app"`: one that breaks the rule is a
    /// programmer error (a precondition failure), not input to report.
    public init(constant name: StaticString) {
        do { self = try Domain(validating: "\(name)") } catch { preconditionFailure("\(error)") }
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }

    public var description: String { name }
    public static func < (lhs: Domain, rhs: Domain) -> Bool { lhs.name < rhs.name }
    /// Equal names have equal hashes, so unequal hashes settle it without comparing the names.
    public static func == (lhs: Domain, rhs: Domain) -> Bool { lhs.nameHash == rhs.nameHash && lhs.name == rhs.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(nameHash) }
    /// What `hash(into:)` gives a hasher of `seed`, as `Int` computes it in one call (what
    /// `Set` and `Dictionary` ask for; the default would go through a `Hasher` step by step:
    /// 1,300 instructions more a durable Set). The standard library's name for it.
    // swift-format-ignore: NoLeadingUnderscores
    public func _rawHashValue(seed: Int) -> Int { nameHash._rawHashValue(seed: seed) }
}

/// The locks of a system instance live in the store as internal domains, one per locked domain,
/// named ``lockPrefix`` + the domain's name (each key a locked key, its value `true`), so lock
/// changes go through the same log, crash recovery and compaction as values. No client can
/// name one: a domain name never starts with `-`.
extension Domain {
    /// What the name of a lock domain starts with.
    public static let lockPrefix = "-locks."

    /// The internal domain holding the locks of `domain`.
    public static func locks(of domain: Domain) -> Domain {
        Domain(unchecked: lockPrefix + domain.name)
    }

    /// The domain whose locks this internal domain holds; `nil` for an ordinary domain.
    public var lockedDomain: Domain? {
        guard name.utf8.first == UInt8(ascii: "-"), name.hasPrefix(Self.lockPrefix) else { return nil }
        return try? Domain(validating: String(name.dropFirst(Self.lockPrefix.count)))
    }

    /// The internal domain where a system instance keeps how far its fleet mirror got (the
    /// etcd revision it reached), committed with each update it mirrors.
    public static let fleetState = Domain(unchecked: "-fleet")

    /// The internal domain where a system instance marks each reload of its drop-in files
    /// (their generation and digest): a reload is one durable commit at one revision.
    public static let dropInState = Domain(unchecked: "-dropins")

    /// The internal domain where kvd keeps what users granted sandboxed apps (`kvctl permit`):
    /// each key `APPID PATTERN`, its value `"read"` or `"write"`. Never mirrored, never listed.
    public static let permits = Domain(unchecked: "-permits")

    /// Whether this is one of kvd's internal domains (locks, fleet state), which no client names.
    public var isInternal: Bool { name.utf8.first == UInt8(ascii: "-") }

    /// Whether a system instance's `Mirror` carries this domain to users' kvds: every domain but
    /// kvd's own state (``fleetState``); lock domains as the locks of the domain they lock.
    public var isMirrored: Bool { !isInternal || lockedDomain != nil }

    /// A name read back from kvd's own files (a file name, a log record): an ordinary domain
    /// name, ``lockPrefix`` followed by one, ``fleetState``'s, ``dropInState``'s or ``permits``'.
    public init(stored name: String) throws(NameError) {
        if name == Self.fleetState.name {
            self = Self.fleetState
        } else if name == Self.dropInState.name {
            self = Self.dropInState
        } else if name == Self.permits.name {
            self = Self.permits
        } else if name.hasPrefix(Self.lockPrefix) {
            let rest = String(name.dropFirst(Self.lockPrefix.count))
            self = Self.locks(of: try Domain(validating: rest))
        } else {
            self = try Domain(validating: name)
        }
    }
}

/// A validated key: 1–1024 bytes of valid UTF-8 (a Swift `String` always is), no NUL.
public struct Key: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let name: String
    /// ``NameHash`` of ``name``, computed once: hashing a key feeds this, and a domain's entry
    /// table finds the key by it (its slots are placed by the same hash of the stored bytes).
    public let nameHash: Int

    public init(validating name: String) throws(NameError) {
        var text = name
        let (count, hasNUL, hash) = text.withUTF8 { bytes in (bytes.count, bytes.contains(0), NameHash.of(bytes)) }
        guard count > 0 else { throw NameError(name: name, reason: "a key must not be empty") }
        guard count <= Limits.keyBytes else {
            throw NameError(name: name, reason: "a key must be at most \(Limits.keyBytes) bytes, not \(count)")
        }
        guard !hasNUL else { throw NameError(name: name, reason: "a key must not contain a NUL character") }
        (self.name, self.nameHash) = (name, hash)
    }

    /// A key written in the program, such as `"etcdRevision"`: one that breaks the rule is a
    /// programmer error (a precondition failure), not input to report.
    public init(constant name: StaticString) {
        do { self = try Key(validating: "\(name)") } catch { preconditionFailure("\(error)") }
    }

    public var description: String { name }
    public static func < (lhs: Key, rhs: Key) -> Bool { lhs.name < rhs.name }
    /// Equal names have equal hashes, so unequal hashes settle it without comparing the names.
    public static func == (lhs: Key, rhs: Key) -> Bool { lhs.nameHash == rhs.nameHash && lhs.name == rhs.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(nameHash) }
    /// What `hash(into:)` gives a hasher of `seed`, as `Int` computes it in one call (what
    /// `Set` and `Dictionary` ask for; the default would go through a `Hasher` step by step:
    /// 1,300 instructions more a durable Set). The standard library's name for it.
    // swift-format-ignore: NoLeadingUnderscores
    public func _rawHashValue(seed: Int) -> Int { nameHash._rawHashValue(seed: seed) }
}

/// The hash of a domain or key name that ``Domain`` and ``Key`` carry: `Hasher` (this process's
/// random seed, so no client can choose names that collide) over the name's UTF-8. Anything
/// that places a name by its bytes (``Key/nameHash`` in a domain's entry table) uses this too.
public enum NameHash {
    /// The hash of the name whose UTF-8 is `bytes`.
    @inlinable
    public static func of(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        of(UnsafeRawBufferPointer(bytes))
    }

    /// The hash of the name whose UTF-8 is `bytes`.
    @inlinable
    public static func of(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    /// The hash of `name`.
    public static func of(_ name: String) -> Int {
        var name = name
        return name.withUTF8 { of($0) }
    }
}

/// A domain or key name that breaks its rule; `reason` names the rule.
public struct NameError: Error, Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var reason: String

    public init(name: String, reason: String) {
        self.name = name
        self.reason = reason
    }

    public var description: String { "invalid name \"\(name)\": \(reason)" }
}
