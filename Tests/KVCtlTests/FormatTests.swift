import FoundationEssentials
import KVClient
import KVProtocol
import KVValues
import Testing

@testable import KVCtl

@Suite struct FormatTests {
    @Test(arguments: [
        (Value.string("hello world"), "hello world"),
        (.string(""), ""),
        (.integer(-3), "-3"),
        (.real(1), "1.0"),
        (.real(0.25), "0.25"),
        (.real(5e20), "5e+20"),
        (.bool(true), "true"),
        (.bool(false), "false"),
        (.date(Date(timeIntervalSince1970: 1_795_971_600.25)), "2026-11-29T17:00:00.250Z"),
        (.data(Data([0xDE, 0xAD, 0x01])), "dead01"),
        (.array([.integer(1), .string("a")]), "[\n  1,\n  \"a\"\n]"),
        (
            .dictionary(["b": .real(2), "a": .date(Date(timeIntervalSince1970: 0))]),
            "{\n  \"a\": {\n    \"$date\": \"1970-01-01T00:00:00.000Z\"\n  },\n  \"b\": 2.0\n}"
        ),
    ])
    func plainOutputPerType(value: Value, expected: String) {
        #expect(Format.plain(value) == expected)
    }

    @Test func jsonOutputIsTypedJSONOnOneLine() {
        #expect(Format.json(.real(1)) == "1.0")
        #expect(Format.json(.string("a\nb")) == "\"a\\nb\"")
        #expect(Format.json(.data(Data("hi".utf8))) == "{\"$data\":\"aGk=\"}")
    }

    @Test func domainWithDollarKeysIsWrapped() throws {
        let values = [try Key(validating: "$x"): Value.integer(1)]
        #expect(Format.domain(values, pretty: false) == "{\"$dict\":{\"$x\":1}}")
    }

    @Test func watchLinesShowValuesAndRemovals() throws {
        let event = WatchEventFixture.event
        #expect(Format.watchLines(event, json: false) == ["a = \"x\"", "b removed"])
        #expect(
            Format.watchLines(event, json: true) == [
                "{\"initial\":true,\"key\":\"a\",\"revision\":7,\"value\":\"x\"}",
                "{\"initial\":true,\"key\":\"b\",\"revision\":7}",
            ])
    }

    /// A key locked without a value comes as a removal with the source "locked".
    @Test func watchLinesShowAKeyLockedWithoutAValue() throws {
        let key = try Key(validating: "k")
        let event = WatchEvent(
            revision: 3, changes: [Change(key: key, value: nil)], initial: false, sources: [key: .locked])
        #expect(Format.watchLines(event, json: false) == ["k removed (locked)"])
        #expect(Format.watchLines(event, json: true) == ["{\"key\":\"k\",\"revision\":3,\"source\":\"locked\"}"])
    }

    @Test func namesAreOneALineOrAJSONArray() {
        #expect(Format.names(["a", "b"], json: false) == "a\nb\n")
        #expect(Format.names(["a", "b"], json: true) == "[\"a\",\"b\"]\n")
        #expect(Format.names([], json: false) == "")
    }

    /// `status` shows each fleet fact on its own line, and its JSON is the reply's members,
    /// read back into the same status.
    @Test func statusShowsTheFleetAndItsJSONReadsBack() throws {
        let fleet = FleetStatus(
            endpoints: ["http://127.0.0.1:2379", "http://127.0.0.1:2479"], memberInUse: "http://127.0.0.1:2479",
            phase: "watching",
            appliedRevision: 40, seenRevision: 45, relists: 1,
            lastError: "etcd member http://127.0.0.1:2379: connection refused",
            problems: ["etcd key \"kvd/values/com.corp.a/b\" (revision 3) is left out: bad JSON"], prefix: "kvd/",
            domains: ["com.corp.*"])
        let status = SystemStatus(revision: 12, domains: 3, fleet: fleet)
        let text = Format.status(status, json: false)
        #expect(
            text.hasPrefix(
                "system instance: revision 12, 3 domain(s)\nfleet: watching (etcd prefix kvd/, domains com.corp.*)\n"))
        #expect(text.contains("  member in use: http://127.0.0.1:2479\n"))
        #expect(text.contains("  etcd revision: 40 applied, 45 seen (lag 5)\n"))
        #expect(text.contains("  last error: etcd member http://127.0.0.1:2379: connection refused\n"))
        #expect(
            text.hasSuffix(
                "  left out: 1 etcd key(s)\n    etcd key \"kvd/values/com.corp.a/b\" (revision 3) is left out: bad JSON\n"
            ))
        let json = try JSONParser.parse(Format.status(status, json: true))
        guard case .object(let members) = json else {
            Issue.record("not an object: \(json)")
            return
        }
        #expect(SystemStatus(json: members) == status)
        #expect(Format.status(SystemStatus(revision: 1, domains: 0, fleet: nil), json: false).contains("fleet: none"))
    }

    /// A left-out key holding terminal controls and a forged line is printed escaped as `keys`
    /// prints names; a capped list says how many are not shown.
    @Test func statusEscapesNamesAndCountsWhatIsNotShown() throws {
        let forged =
            "etcd key \"kvd/values/com.corp.a/\u{0}\u{1b}[2K\rFORGED\n  left out: nothing\" (revision 3) is left out: bad"
        let fleet = FleetStatus(
            endpoints: ["http://127.0.0.1:2379"], memberInUse: nil, phase: "watching", appliedRevision: 4,
            seenRevision: 4, relists: 0,
            lastError: nil, problems: [forged], problemCount: 1000, prefix: "kvd/", domains: ["com.corp.*"])
        let text = Format.status(SystemStatus(revision: 1, domains: 1, fleet: fleet), json: false)
        #expect(text.contains("    " + Format.escapedLine(forged) + "\n"))
        #expect(text.contains("\\x00\\x1b[2K\\rFORGED\\n  left out: nothing"))
        #expect(!text.contains("\u{1b}") && !text.contains("\r") && !text.contains("\nFORGED"))
        #expect(
            text.hasSuffix(
                "  left out: 1000 etcd key(s)\n" + "    " + Format.escapedLine(forged) + "\n    (999 more not shown)\n")
        )
        let json = try JSONParser.parse(Format.status(SystemStatus(revision: 1, domains: 1, fleet: fleet), json: true))
        guard case .object(let members) = json else {
            Issue.record("not an object: \(json)")
            return
        }
        #expect(SystemStatus(json: members)?.fleet?.problemCount == 1000)
    }
}

enum WatchEventFixture {
    static let event = WatchEvent(
        revision: 7,
        changes: [
            Change(key: try! Key(validating: "b"), value: nil),
            Change(key: try! Key(validating: "a"), value: .string("x")),
        ],
        initial: true)
}
