import KVValues
import Testing

@testable import KVClient

/// The record that keeps a suite from announcing its own writes twice: the watch's event for a
/// write may come before its acknowledgement or after it (the race the notification test of
/// `DomainsAndNotificationTests` hit about one run in five before the acknowledged writes were
/// kept).
@Suite struct OwnWritesTests {
    let domain = try! Domain(validating: "com.example.own")
    let other = try! Domain(validating: "com.example.other")

    private func change(_ key: String, _ value: Value?) -> Change {
        Change(key: try! Key(validating: key), value: value)
    }

    @Test func anEventAfterTheAcknowledgementIsStillOwn() {
        let writes = OwnWrites()
        let id = writes.begin(domain, [change("k", .string("v"))])
        #expect(writes.explains(domain, ["k": .string("v")], streamed: nil), "the acknowledgement's own apply")
        writes.end(id, acknowledgedAt: 7)
        #expect(writes.explains(domain, ["k": .string("v")], streamed: 7), "the watch event after the acknowledgement")
        #expect(
            !writes.explains(domain, ["k": .string("v")], streamed: 8),
            "the same value at a later revision is someone else's")
        #expect(!writes.explains(domain, ["k": .string("v")], streamed: 7), "forgotten once the watch passed it")
    }

    @Test func anEventBeforeTheAcknowledgementIsOwnAndOthersAreNot() {
        let writes = OwnWrites()
        let id = writes.begin(domain, [change("a", .integer(1)), change("b", nil)])
        #expect(writes.explains(domain, ["a": .integer(1), "b": Value?.none], streamed: 3))
        #expect(!writes.explains(domain, ["a": .integer(2)], streamed: 3), "another value")
        #expect(!writes.explains(other, ["a": .integer(1)], streamed: 3), "another domain")
        writes.end(id, acknowledgedAt: nil)
        #expect(
            !writes.explains(domain, ["a": .integer(1)], streamed: nil), "a write nobody watches is forgotten at once")
    }

    @Test func acknowledgedWritesAreBounded() {
        let writes = OwnWrites()
        for index in 0...OwnWrites.keptAcknowledged {
            writes.end(
                writes.begin(domain, [change("k\(index)", .integer(Int64(index)))]), acknowledgedAt: Int64(index + 1))
        }
        #expect(!writes.explains(domain, ["k0": .integer(0)], streamed: 1), "the oldest went past the bound")
        let last = OwnWrites.keptAcknowledged
        #expect(writes.explains(domain, ["k\(last)": .integer(Int64(last))], streamed: Int64(last + 1)))
    }
}
