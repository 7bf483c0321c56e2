import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// The cache of hot `Get` replies (``GetReplyCache``) against the general path: random writes,
/// deletions and system-layer changes to a few keys, each followed by the same compact `Get`
/// (which the cache answers when it can) and the same call with a space in it (which only the
/// general path takes): both replies must be the same bytes every time. The steps are random,
/// so the test goes on (at least 400 steps, at most 4,000) until the cache has answered 50 Gets.
@Suite struct GetReplyCacheTests {
    @Test func cachedRepliesAlwaysMatchTheGeneralPath() throws {
        let loop = try EventLoopTests.Loop()
        let client = loop.connect()
        var generator = SeededGenerator.forTest()
        var answered = 0
        for step in 0..<4000 {
            if step >= 400, loop.server.replies.gets.hits >= 50 { break }
            let key = "k\(Int.random(in: 0..<3, using: &generator))"
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<3:
                let value = Int.random(in: 0..<5, using: &generator)
                client.send(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"\#(key)","value":\#(value)}}"#)
                answered += 1
            case 3:
                client.send(#"{"method":"io.kvd.Defaults.Delete","parameters":{"domain":"d","key":"\#(key)"}}"#)
                answered += 1
            case 4:
                let change = Change(
                    key: try Key(validating: key),
                    value: Bool.random(using: &generator) ? .string("system \(step)") : nil)
                loop.server.handler.follower.apply([
                    .values(try Domain(validating: "d"), [change], revision: Int64(step))
                ])
            case 5:
                let locked = Bool.random(using: &generator)
                loop.server.handler.follower.apply([
                    .locks(
                        try Domain(validating: "d"), [(key: try Key(validating: key), locked: locked)],
                        revision: Int64(step))
                ])
            default:
                client.send(
                    #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":"\#(key)"}}"#,
                    #"{"method":"io.kvd.Defaults.Get", "parameters":{"domain":"d","key":"\#(key)"}}"#)
                answered += 2
                loop.run("step \(step): the two Gets were not answered") { client.replies.count == answered }
                let replies = client.replies
                #expect(
                    replies[answered - 2] == replies[answered - 1],
                    "step \(step), \(key): the fast path and the general path differ")
            }
            loop.run("step \(step): not answered") { client.replies.count == answered }
        }
        let hits = loop.server.replies.gets.hits
        #expect(hits >= 50, "the cache answered only \(hits) Gets: the test did not exercise it")
    }
}
