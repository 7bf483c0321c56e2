import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// Large `History` replies are kept and shared while nothing they read changed, and never outlive a
/// change that no commit makes: a forgotten value is not served from them.
@Suite struct HistoryReplyCacheTests {
    static let padding = String(repeating: "p", count: 200)

    static func set(_ round: Int) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"token","value":"SECRET-\#(round)-\#(padding)"}}"#
    }

    static let history = #"{"method":"io.kvd.Defaults.History","parameters":{"domain":"d","key":"token"}}"#
    static let forget = #"{"method":"io.kvd.Defaults.ForgetHistory","parameters":{"domain":"d","key":"token"}}"#

    @Test func aKeptReplyIsServedAgainButNeverAfterAForget() throws {
        let loop = try EventLoopTests.Loop()
        let client = loop.connect()
        for round in 0..<200 {  // one at a time: the test's sends would block on a full socket
            client.send(Self.set(round))
            loop.run("Set \(round) was not answered") { client.replies.count == round + 1 }
        }
        client.send(Self.history)
        loop.run("History was not answered") { client.replies.count == 201 }
        let first = client.replies[200]
        #expect(first.contains("SECRET-199-") && first.contains("SECRET-0-"))
        #expect(first.utf8.count >= KeptReplies.minimumHistoryBytes, "too small to be kept: \(first.utf8.count) bytes")
        let call = KeptReplies.HistoryCall(domain: try Domain(validating: "d"), key: try Key(validating: "token"))
        let stamp = KeptReplies.HistoryStamp(revision: loop.store.revision, historyVersion: loop.store.historyVersion)
        #expect(loop.server.replies.kept(call, at: stamp) != nil, "the reply was not kept")

        client.send(Self.history)
        loop.run("the second History was not answered") { client.replies.count == 202 }
        #expect(client.replies[201] == first)

        let revision = loop.store.revision
        client.send(Self.forget)
        loop.run("ForgetHistory was not answered") { client.replies.count == 203 }
        #expect(loop.store.revision == revision, "a forget makes no commit: the revision alone cannot tell")
        client.send(Self.history)
        loop.run("History after the forget was not answered") { client.replies.count == 204 }
        // The key's current value stays (as a value of no known time); its past ones are gone.
        let after = client.replies[203]
        #expect(!after.contains("SECRET-198-") && !after.contains("SECRET-0-"), "a forgotten value was served")
        #expect(after.contains("SECRET-199-"))
    }
}
