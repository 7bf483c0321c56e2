import Testing

@testable import KVValues

/// `Domain` and `Key` carry their name's hash (``NameHash``), computed once: equal names must
/// hash and compare equal however each was built, and the hash must be the one of the name's
/// bytes (a domain's entry table places keys by the hash of the bytes it stored).
@Suite struct NameHashTests {
    static let names = ["a", "com.example.app", "NSGlobalDomain", String(repeating: "x", count: 300), "café"]

    @Test(arguments: names)
    func keyCarriesTheHashOfItsBytes(name: String) throws {
        let key = try Key(validating: name)
        #expect(key.nameHash == NameHash.of(name))
        #expect(key.nameHash == Array(name.utf8).withUnsafeBytes { NameHash.of($0) })
        let rebuilt = try Key(validating: String(decoding: Array(name.utf8), as: UTF8.self))
        #expect(rebuilt == key)
        #expect(rebuilt.hashValue == key.hashValue)
        #expect(Set([key, rebuilt]).count == 1)
    }

    @Test(arguments: names.filter { !$0.contains("é") })
    func domainCarriesTheHashOfItsBytes(name: String) throws {
        let domain = try Domain(validating: String(name.prefix(255)))
        #expect(domain.nameHash == NameHash.of(domain.name))
        let stored = try Domain(stored: String(decoding: Array(domain.name.utf8), as: UTF8.self))
        #expect(stored == domain)
        #expect(stored.hashValue == domain.hashValue)
        #expect([domain: 1][stored] == 1)
    }

    @Test func internalDomainsCarryTheHashOfTheirNames() throws {
        let locks = Domain.locks(of: try Domain(validating: "com.example.app"))
        #expect(locks.nameHash == NameHash.of("-locks.com.example.app"))
        #expect(try Domain(stored: "-locks.com.example.app") == locks)
        #expect(Domain.permits.nameHash == NameHash.of("-permits"))
        #expect(Domain.global.nameHash == NameHash.of("NSGlobalDomain"))
    }

    @Test func differentNamesAreDifferent() throws {
        let (a, b) = (try Key(validating: "theme"), try Key(validating: "themes"))
        #expect(a != b)
        #expect(try Domain(validating: "com.a") != Domain(validating: "com.b"))
        #expect(Set([a, b]).count == 2)
    }
}

extension NameHashTests {
    /// `Set` and `Dictionary` take a name's hash from `_rawHashValue(seed:)`: it must be what
    /// hashing the name with `hash(into:)` gives, as for the `Int` it carries.
    @Test func rawHashValueIsWhatHashingGives() throws {
        let key = try Key(validating: "theme")
        let domain = try Domain(validating: "com.example.app")
        for seed in [0, 1, -7, Int.max] {
            #expect(key._rawHashValue(seed: seed) == key.nameHash._rawHashValue(seed: seed))
            #expect(domain._rawHashValue(seed: seed) == domain.nameHash._rawHashValue(seed: seed))
        }
        var hasher = Hasher()
        hasher.combine(key)
        var direct = Hasher()
        direct.combine(key.nameHash)
        #expect(hasher.finalize() == direct.finalize())
        #expect(key.hashValue == key.nameHash.hashValue)
    }
}
