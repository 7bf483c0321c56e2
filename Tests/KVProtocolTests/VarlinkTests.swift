import Testing
@testable import KVProtocol
import KVValues

@Suite struct FramingTests {
    private func feed(_ framer: inout MessageFramer, _ text: String) {
        Array(text.utf8).withUnsafeBytes { framer.append($0) }
    }

    @Test func splitsPipelinedMessagesAndKeepsPartialOnes() throws {
        var framer = MessageFramer()
        feed(&framer, "{\"a\":1}\0{\"b\":2}\0{\"c\"")
        #expect(try framer.next().map { Array($0) } == Array("{\"a\":1}".utf8))
        #expect(try framer.next().map { Array($0) } == Array("{\"b\":2}".utf8))
        #expect(try framer.next() == nil)
        feed(&framer, ":3}\0")
        #expect(try framer.next().map { Array($0) } == Array("{\"c\":3}".utf8))
        #expect(framer.pendingByteCount == 0)
    }

    @Test func refusesAMessageOverTheLimit() throws {
        var framer = MessageFramer(limit: 10)
        feed(&framer, String(repeating: "x", count: 11))
        #expect(throws: VarlinkError.tooLarge(limit: 10)) { try framer.next() }
    }
}

@Suite struct CallTests {
    @Test func callRoundTrips() throws {
        let call = VarlinkCall(method: "io.kvd.Defaults.Get", parameters: ["domain": .string("d"), "key": .string("k")], more: true)
        var bytes = call.encoded()
        #expect(bytes.removeLast() == 0)
        #expect(try VarlinkCall(message: bytes) == call)
    }

    @Test(arguments: ["[]", "{}", "{\"method\": 1}", "{\"method\":\"x\",\"parameters\":[]}", "{\"method\":\"x\",\"more\":\"yes\"}", "nope"])
    func malformedCallsAreRefused(text: String) {
        #expect(throws: VarlinkError.self) { try VarlinkCall(message: Array(text.utf8)) }
    }

    @Test func everyRequestRoundTripsThroughItsCall() throws {
        let domain = try Domain(validating: "com.example.app")
        let key = try Key(validating: "k")
        let requests: [DefaultsRequest] = [
            .get(domain, key), .set(domain, key, .array([.integer(1), .real(2.5)]), ifRevision: 4),
            .set(domain, key, .bool(true), ifRevision: nil), .delete(domain, key), .delete(domain, nil),
            .apply(domain, [Change(key: key, value: .string("v")), Change(key: key, value: nil)], ifRevision: 0),
            .list(domain), .domains, .watch(domain, nil), .watch(domain, key), .getInfo,
            .getInterfaceDescription("io.kvd.Defaults"),
        ]
        for request in requests {
            #expect(try DefaultsRequest(call: request.call) == request)
        }
    }

    private func refusal(_ method: String, _ parameters: [String: JSON], more: Bool = false) -> VarlinkReply? {
        do {
            _ = try DefaultsRequest(call: VarlinkCall(method: method, parameters: parameters, more: more))
            return nil
        } catch {
            return error.reply
        }
    }

    @Test func badRequestsGetTheRightError() {
        #expect(refusal("io.kvd.Defaults.Nope", [:])?.error == "org.varlink.service.MethodNotFound")
        #expect(refusal("io.kvd.Defaults.Get", ["domain": .string("d")])?.parameters["parameter"] == .string("key"))
        #expect(refusal("io.kvd.Defaults.Get", ["domain": .integer(1), "key": .string("k")])?.error == "org.varlink.service.InvalidParameter")
        #expect(refusal("io.kvd.Defaults.Get", ["domain": .string("../etc"), "key": .string("k")])?.error == "io.kvd.Defaults.InvalidName")
        #expect(refusal("io.kvd.Defaults.Set", ["domain": .string("d"), "key": .string("k"), "value": .object(["$x": .integer(1)])])?.error
            == "io.kvd.Defaults.InvalidValue")
        #expect(refusal("io.kvd.Defaults.Set", ["domain": .string("d"), "key": .string("k")])?.error == "org.varlink.service.InvalidParameter")
        #expect(refusal("io.kvd.Defaults.Watch", ["domain": .string("d")])?.error == "org.varlink.service.ExpectedMore")
        #expect(refusal("io.kvd.Defaults.Set", ["domain": .string("d"), "key": .string("k"), "value": .integer(1), "ifRevision": .string("1")])?.error
            == "org.varlink.service.InvalidParameter")
    }

    @Test func interfaceDeclaresTheContract() {
        for line in [
            "interface io.kvd.Defaults", "type Change (key: string, value: ?object)",
            "method Get(domain: string, key: string) -> (value: object, revision: int)",
            "method Set(domain: string, key: string, value: object, ifRevision: ?int) -> (revision: int)",
            "method Delete(domain: string, key: ?string) -> (revision: int)",
            "method Apply(domain: string, changes: []Change, ifRevision: ?int) -> (revision: int)",
            "method List(domain: string) -> (values: [string]object, revision: int)",
            "method Domains() -> (domains: []string)",
            "method Watch(domain: string, key: ?string) -> (revision: int, changes: []Change, initial: bool)",
            "error NotFound (domain: string, key: ?string)", "error TooLarge (limit: int)",
        ] {
            #expect(DefaultsInterface.description.contains(line), "missing: \(line)")
        }
    }
}

@Suite struct PathTests {
    @Test func socketPathFollowsTheContractOrder() {
        #expect(Paths.socket(explicit: "/x.sock", environment: ["KVD_SOCKET": "/y"]) == "/x.sock")
        #expect(Paths.socket(explicit: nil, environment: ["KVD_SOCKET": "/y", "XDG_RUNTIME_DIR": "/run/u"]) == "/y")
        #expect(Paths.socket(explicit: nil, environment: ["XDG_RUNTIME_DIR": "/run/u"]) == "/run/u/kvd.sock")
        #expect(Paths.socket(explicit: nil, environment: [:], uid: 1000) == "/tmp/kvd-1000/kvd.sock")
    }

    @Test func stateDirectoryFollowsTheContractOrder() {
        #expect(Paths.stateDirectory(explicit: "/s", environment: ["KVD_STATE_DIR": "/k"]) == "/s")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["KVD_STATE_DIR": "/k", "STATE_DIRECTORY": "/sd"]) == "/k")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["STATE_DIRECTORY": "/sd:/other", "XDG_CONFIG_HOME": "/c"]) == "/sd")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["XDG_CONFIG_HOME": "/c", "HOME": "/h"]) == "/c/kvd")
        #expect(Paths.stateDirectory(explicit: nil, environment: ["HOME": "/h"]) == "/h/.config/kvd")
    }
}
