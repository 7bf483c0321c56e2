import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// A watcher's first replies are made piece by piece as it reads them, and a commit made meanwhile
/// reaches it after the last piece, never between them.
@Suite struct ReplyStreamTests {
    static let watch = #"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"d"},"more":true}"#
    static let set = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"late","value":"after"}}"#

    @Test func aWatcherGetsItsFirstPiecesAsItReadsThemAndCommitsAfterThem() throws {
        let loop = try EventLoopTests.Loop()
        let domain = try Domain(validating: "d")
        let keys = (0..<6).map { try! Key(validating: "big\($0)") }
        for key in keys {
            _ = try loop.store.commit(
                domain, .set(key, .string(String(repeating: "v", count: 1 << 20)), ifRevision: nil))
        }
        let watcher = loop.connect()
        watcher.send(Self.watch)
        loop.run("the watch did not begin") { loop.server.table.streams.count == 1 }
        for _ in 0..<20 { _ = try loop.server.runPass(maxWait: 1) }
        let held = loop.server.table.byID.values.map(\.pendingOutput).max() ?? 0
        #expect(held <= ReplyStream.lowWater + (2 << 20), "a watcher that does not read holds \(held) bytes")
        #expect(loop.server.table.streams.count == 1, "the pieces wait for the watcher to read")
        let writer = loop.connect()
        writer.send(Self.set)
        loop.run("the Set was not answered") { writer.replies.count == 1 }
        loop.run("the watcher did not get the commit", passes: 2000) { watcher.replies.count == keys.count + 1 }
        let replies = try watcher.replies.map { try VarlinkReply(message: ArraySlice($0.utf8)) }
        #expect(replies.count == keys.count + 1)
        guard replies.count == keys.count + 1 else { return }
        #expect(replies[0].parameters["initial"] == .bool(true))
        #expect(replies.dropFirst().allSatisfy { $0.parameters["initial"] == .bool(false) })
        #expect(replies.prefix(keys.count - 1).allSatisfy { $0.parameters["partial"] == .bool(true) })
        #expect(replies[keys.count - 1].parameters["partial"] == nil, "the last piece ends the current values")
        let last = replies[keys.count]
        #expect(
            last.parameters["changes"]
                == .array([Change(key: try Key(validating: "late"), value: .string("after")).json]),
            "the commit comes after every piece")
        #expect(loop.server.table.streams.isEmpty)
    }
}
