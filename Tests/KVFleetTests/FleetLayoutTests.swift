import FoundationEssentials
import Glibc
import KVFleet
import KVValues
import Testing

@Suite struct FleetLayoutTests {
    let layout = try! FleetLayout(domainPatterns: ["com.corp.*", "org.example.app"])

    func reading(_ key: String) -> FleetKeyReading { layout.name(ofEtcdKey: Array(key.utf8)) }

    func name(_ kind: FleetKind, _ domain: String, _ key: String) throws -> FleetName {
        FleetName(kind: kind, domain: try Domain(validating: domain), key: try Key(validating: key))
    }

    @Test func valuesAndLocksAreReadWithKeysThatContainSlashes() throws {
        #expect(reading("kvd/values/com.corp.mail/server") == .fleet(try name(.value, "com.corp.mail", "server")))
        #expect(
            reading("kvd/locks/com.corp.mail/server/host/") == .fleet(try name(.lock, "com.corp.mail", "server/host/")))
        #expect(reading("kvd/values/org.example.app//") == .fleet(try name(.value, "org.example.app", "/")))
    }

    @Test func aNameGoesToItsEtcdKeyAndBack() throws {
        let custom = try FleetLayout(prefix: "site/a/", domainPatterns: ["*"])
        for name in [try name(.value, "com.corp.x", "a/b"), try name(.lock, "x", "ключ")] {
            let key = custom.etcdKey(name)
            #expect(custom.name(ofEtcdKey: key) == .fleet(name))
            #expect(key.starts(with: Array("site/a/".utf8)))
        }
        #expect(custom.range.key == Array("site/a/".utf8))
        #expect(custom.range.end == Array("site/a0".utf8))
    }

    @Test func keysOutsideThePrefixAndOtherHostsDomainsAreIgnored() {
        guard case .ignored(let why) = reading("other/values/com.corp.a/k") else {
            Issue.record("not ignored")
            return
        }
        #expect(why.contains("not under the prefix"))
        guard case .ignored(let reason) = reading("kvd/values/com.other.a/k") else {
            Issue.record("not ignored")
            return
        }
        #expect(reason.contains("not a fleet domain"))
        // "kvd/values/" is under "kvd/", but "kvdx/..." is not under "kvd/".
        guard case .ignored = reading("kvdx/values/com.corp.a/k") else {
            Issue.record("not ignored")
            return
        }
    }

    @Test func keysThatFitNoPartOfTheLayoutAreReportedWithTheReason() {
        let cases: [(String, String)] = [
            ("kvd/value/com.corp.a/k", "only values/DOMAIN/KEY and locks/DOMAIN/KEY"),
            ("kvd/values/com.corp.a", "no key follows the domain"),
            ("kvd/values/com.corp.a/", "a key must not be empty"),
            ("kvd/locks/com.corp.a b/k", "may hold only A-Z a-z 0-9 . _ -, not byte 0x20"),
            ("kvd/values/com.corp.x.unreadable-20261129T181320Z/k", "kvd names its copies of unreadable files"),
        ]
        for (key, expected) in cases {
            guard case .unreadable(let reason) = reading(key) else {
                Issue.record("\(key) is not reported: \(reading(key))")
                continue
            }
            #expect(reason.contains(expected), "\(key): \(reason)")
        }
        let badUTF8 = Array("kvd/values/com.corp.a/".utf8) + [0xC3, 0x28]
        #expect(layout.name(ofEtcdKey: badUTF8) == .unreadable("the key is not valid UTF-8"))
        let nul = Array("kvd/values/com.corp.a/k".utf8) + [0]
        guard case .unreadable(let reason) = layout.name(ofEtcdKey: nul) else {
            Issue.record("NUL accepted")
            return
        }
        #expect(reason.contains("NUL"))
    }

    @Test func valuesTravelAsTheContractsTypedJSON() throws {
        let value: Value = .dictionary([
            "$odd": .date(Date(timeIntervalSince1970: 1.25)), "d": .data(Data([1, 2])), "r": .real(1.0),
        ])
        let bytes = try layout.etcdValue(value)
        #expect(try layout.value(fromEtcdValue: bytes) == value)
        #expect(try layout.value(fromEtcdValue: Array(#"{"$data":"AQI="}"#.utf8)) == .data(Data([1, 2])))
        #expect(throws: ValueError.self) { try layout.value(fromEtcdValue: Array("null".utf8)) }
        #expect(throws: ValueError.self) { try layout.value(fromEtcdValue: Array("{\"a\":".utf8)) }
        #expect(throws: ValueError.self) { try layout.etcdValue(.real(.infinity)) }
    }

    @Test func valuesNestedDeeperThan512LevelsAreRefusedBothWays() throws {
        func nested(_ levels: Int) -> Value { (0..<levels).reduce(Value.integer(1)) { inner, _ in .array([inner]) } }
        let deepest = try layout.etcdValue(nested(Limits.valueDepth))
        #expect(try layout.value(fromEtcdValue: deepest) == nested(Limits.valueDepth))
        #expect(throws: ValueError.self) { try layout.etcdValue(nested(Limits.valueDepth + 1)) }
        let tooDeep =
            Array(String(repeating: "[", count: 513).utf8) + [UInt8(ascii: "1")]
            + Array(String(repeating: "]", count: 513).utf8)
        #expect(throws: ValueError.self) { try layout.value(fromEtcdValue: tooDeep) }
    }

    @Test func badSettingsAreRefusedWithTheRule() {
        #expect(throws: FleetLayoutError.self) { try FleetLayout(prefix: "", domainPatterns: ["*"]) }
        for pattern in ["", "com/corp", "com.corp\\"] {
            #expect(throws: FleetLayoutError.self, "\(pattern)") { try FleetDomainPattern(validating: pattern) }
        }
    }
}

@Suite struct FleetDomainPatternTests {
    /// The patterns match as glibc's `fnmatch(3)` with no flags does.
    @Test func patternsMatchAsFnmatchDoes() throws {
        let patterns = [
            "com.corp.*", "*", "*.mail", "com.?orp.x", "com.[ck]orp.*", "com.[!c]orp.x", "com.[^c]orp.x",
            "[a-c]*", "[]a]x", "[!]a]x", "a[", "a[b", "\\*x", "a\\.b", "[[:digit:]]*", "[[:alpha:]_]x",
            "*a*b*c", "a*", "*.", ".*", "a-[.-z]", "[z-a]", "**b", "[\\]]x",
        ]
        let names = [
            "com.corp.mail", "com.corp.", "com.korp.x", "com.dorp.x", "com.corp.x", "a", "b.c", "ax", "]x", "bx",
            "a[", "a[b", "*x", "zx", "a.b", "aXb", "7up", "_x", "Qx", "abc", "xaybzc", "acb", ".hidden", "a-.", "a-q",
            "a-A", "b", "bb", "",
        ]
        for pattern in patterns {
            let compiled = try FleetDomainPattern(validating: pattern)
            for name in names {
                let expected = fnmatch(pattern, name, 0) == 0
                #expect(compiled.matches(name) == expected, "pattern \(pattern) name \(name): fnmatch says \(expected)")
            }
        }
    }
}
