import KVValues
import Testing

@testable import KVProtocol

/// The daemon's fast path for `Get` takes only what the general path reads as the same `Get`.
@Suite struct FastGetTests {
    @Test(arguments: [
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"k1"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"key":"k1","domain":"com.example.app"}}"#,
    ])
    func compactGetIsTakenAsTheGeneralPathReadsIt(text: String) throws {
        let message = ArraySlice(Array(text.utf8))
        let (domain, key) = try #require(DefaultsRequest.fastGet(message))
        let general = try DefaultsRequest(call: VarlinkCall(message: message))
        #expect(general == .get(domain, key))
        #expect(domain.name == "com.example.app" && key.name == "k1")
    }

    @Test(arguments: [
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"k1"},"oneway":true}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"k1","extra":1}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","domain":"x"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app"}}"#,
        #"{"method":"io.kvd.Defaults.Get", "parameters":{"domain":"com.example.app","key":"k1"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"k\u0031"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"bad name!","key":"k1"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"ké"}}"#,
        #"{"method":"io.kvd.Defaults.Gets","parameters":{"domain":"com.example.app","key":"k1"}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":"k1"}}}"#,
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.app","key":1}}"#,
    ])
    func anythingElseTakesTheGeneralPath(text: String) {
        #expect(DefaultsRequest.fastGet(ArraySlice(Array(text.utf8))) == nil)
    }

    @Test(arguments: [JSON.string("v \"quoted\""), .integer(-3), .object(["$date": .string("2026-11-29T18:13:20Z")])])
    func valueRepliesAreTheRepliesTheyStandFor(value: JSON) throws {
        for source in ValueSource.allCases {
            var out: [UInt8] = []
            VarlinkReply.encodeValue(value, revision: 42, source: source, into: &out)
            #expect(out.last == 0)
            let read = try VarlinkReply(message: out.dropLast())
            #expect(read == VarlinkReply.value(value, revision: 42, source: source))
        }
    }

    @Test func callsAreWrittenMethodFirst() throws {
        let call = DefaultsRequest.get(try Domain(validating: "a.b"), try Key(validating: "k")).call
        let text = String(decoding: call.encoded().dropLast(), as: UTF8.self)
        #expect(text.hasPrefix(#"{"method":"io.kvd.Defaults.Get","parameters":{"#))
        #expect(try VarlinkCall(message: Array(text.utf8)) == call)
    }
}

/// The `Set` fast path (``DefaultsRequest/fastSet(_:)``) against the general path.
@Suite struct FastSetTests {
    static let prefix = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":"#

    @Test(arguments: [
        #""plain""#, #""esc\"aped\\ \u00e9 \n""#, "-3", "2.5e3", "true", #"[1,[2,{"a":"b"}]]"#, #"{"x":{"y":[]}}"#,
        #"{"$date":"2026-11-29T18:13:20Z"}"#, #"{"$data":"AAEC"}"#, #" 7 "#, #""é""#,
    ])
    func compactSetIsTakenAsTheGeneralPathReadsIt(value: String) throws {
        let message = ArraySlice(Array((Self.prefix + value + "}}").utf8))
        let fast = try #require(DefaultsRequest.fastSet(message))
        let general = try DefaultsRequest(call: VarlinkCall(message: message))
        #expect(fast == general)
    }

    @Test(arguments: [
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1},"oneway":true}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1,"ifRevision":3}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"key":"k1","domain":"com.example.app","value":1}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k\u0031","value":1}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":null}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":{"$bad":1}}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1,"value":2}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1},"more":{"a":1}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"bad name!","key":"k1","value":1}}"#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1}} "#,
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.app","key":"k1","value":1"#,
    ])
    func anythingElseTakesTheGeneralPath(text: String) {
        #expect(DefaultsRequest.fastSet(ArraySlice(Array(text.utf8))) == nil)
    }

    /// A value nested as deep as a value may be is taken; one level deeper goes to the general
    /// path (which refuses it).
    @Test func theValueDepthIsTheGeneralPaths() throws {
        let deepest =
            String(repeating: "[", count: Limits.valueDepth) + String(repeating: "]", count: Limits.valueDepth)
        let message = ArraySlice(Array((Self.prefix + deepest + "}}").utf8))
        #expect(try DefaultsRequest.fastSet(message) == DefaultsRequest(call: VarlinkCall(message: message)))
        let deeper = "[" + deepest + "]"
        let tooDeep = ArraySlice(Array((Self.prefix + deeper + "}}").utf8))
        #expect(DefaultsRequest.fastSet(tooDeep) == nil)
        #expect(throws: (any Error).self) { try DefaultsRequest(call: VarlinkCall(message: tooDeep)) }
    }

    /// kvd's own clients write `Set` so that the fast path takes it.
    @Test func clientsWriteSetsTheFastPathTakes() throws {
        let request = DefaultsRequest.set(
            try Domain(validating: "a.b"), try Key(validating: "k"), .string("v"), ifRevision: nil)
        #expect(DefaultsRequest.fastSet(request.call.encoded().dropLast()) == request)
    }
}
