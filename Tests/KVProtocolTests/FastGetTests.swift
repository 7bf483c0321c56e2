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
