import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// On the system instance one user cannot stall or evict another. A uid's connections share one
/// turn per pass of the loop; past the memory budget, connections of the user holding the most are
/// shed, never another user's `Mirror` nor an admin's; a call of a reader over 64 KiB is refused
/// before it is parsed. The loop runs pass by pass over socket pairs whose peers the test pretends.
@Suite struct UserFairnessTests {
    static let flooder = PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [])
    static let other = PeerCredentials(pid: 2, uid: 2000, gid: 2000, groups: [])
    static let root = PeerCredentials(pid: 3, uid: 0, gid: 0, groups: [])

    static func systemLoop(_ limits: Server.Limits = .init()) throws -> EventLoopTests.Loop {
        try EventLoopTests.Loop(limits: limits, role: .system(DaemonOptions.SystemPolicy()))
    }

    static func get(_ domain: String, _ key: String) -> String {
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(domain)","key":"\#(key)"}}"#
    }

    static func set(_ domain: String, _ key: String, bytes: Int) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"\#(key)","value":"\#(String(repeating: "v", count: bytes))"}}"#
    }

    /// Writes each (domain, key, size in bytes) to the store in one commit, as root would.
    static func populate(_ loop: EventLoopTests.Loop, _ values: [(String, String, Int)]) {
        for (domain, key, bytes) in values {
            let value = Value.string(String(repeating: "v", count: bytes))
            loop.store.enqueue(try! Domain(validating: domain), .set(try! Key(validating: key), value, ifRevision: nil))
            { result in
                if case .failure(let error) = result { Issue.record("cannot populate \(domain): \(error)") }
            }
        }
        loop.store.commitQueued()
    }

    /// Four connections of one uid pipelining calls get one turn in all per pass, not one each:
    /// when another user's call is answered, the flooder has had at most one turn's calls.
    @Test func theConnectionsOfOneUidShareOneTurn() throws {
        var limits = Server.Limits()
        limits.callsPerTurn = 4
        let loop = try Self.systemLoop(limits)
        Self.populate(loop, [("d", "k", 10)])
        loop.system.pretendPeers([Self.flooder, Self.flooder, Self.flooder, Self.flooder, Self.other])
        let flood = (0..<4).map { _ in loop.connect() }
        let other = loop.connect()
        loop.run("the connections were not accepted") { loop.server.table.connections.count == 5 }
        let calls = [String](repeating: Self.get("d", "k"), count: 40).joined(separator: "\u{0}")
        for client in flood { client.send(calls) }
        other.send(Self.get("d", "k"))
        loop.run("the other user's Get was not answered") { other.replies.count == 1 }
        let answered = flood.reduce(0) { $0 + $1.replies.count }
        #expect(
            answered <= limits.callsPerTurn,
            "uid 1000 had \(answered) calls answered by then, more than one turn (\(limits.callsPerTurn))")
        loop.run("the flooder's calls were not all answered") { flood.allSatisfy { $0.replies.count == 40 } }
    }

    /// Over the budget, the connections of the uid that holds the most go, never another user's
    /// `Mirror` (its locks) nor an admin's unread `List`, though each holds more than any one of
    /// the flooder's connections.
    @Test func sheddingPicksTheUserHoldingTheMostNeverAnotherUsersMirrorNorAnAdmin() throws {
        var limits = Server.Limits()
        limits.maxClientMemory = 20 << 20
        let loop = try Self.systemLoop(limits)
        Self.populate(
            loop, [("org.ex.big", "a", 2 << 20), ("org.ex.big", "b", 2 << 20), ("org.ex.flood", "k", 100 << 10)])
        loop.system.pretendPeers([Self.other, Self.root])
        let mirror = loop.connect()
        let admin = loop.connect()
        mirror.send(#"{"method":"io.kvd.System.Mirror","more":true}"#)
        admin.send(#"{"method":"io.kvd.Defaults.List","parameters":{"domain":"org.ex.big"}}"#)
        loop.run("the Mirror and the List were not handled") {
            loop.server.table.connections[mirror.daemonFD].map { $0.pendingOutput > 0 } == true
                && loop.server.table.connections[admin.daemonFD].map { $0.pendingOutput > 0 } == true
        }
        loop.system.pretendPeers([PeerCredentials](repeating: Self.flooder, count: 12))
        let flood = (0..<12).map { _ in loop.connect() }
        loop.run("the flooder's connections were not accepted") { loop.server.table.connections.count == 14 }
        let calls = [String](repeating: Self.get("org.ex.flood", "k"), count: 10).joined(separator: "\u{0}")
        for client in flood { client.send(calls) }
        loop.run("nobody was shed", passes: 1000) { loop.server.table.connections.count < 14 }
        loop.run("the flooder's calls were not all handled", passes: 500) {
            flood.allSatisfy {
                loop.server.table.connections[$0.daemonFD].map { $0.framer.pendingByteCount == 0 && $0.isServing }
                    ?? true
            }
        }
        #expect(loop.server.table.connections[mirror.daemonFD] != nil, "another user's Mirror was shed")
        #expect(loop.server.table.connections[admin.daemonFD] != nil, "an admin's connection was shed")
        #expect(!loop.server.memory.isOverBudget)
    }

    /// A reader's call over 64 KiB is `TooLarge` (limit 65536) and its connection closes, with
    /// nothing of it parsed; an admin's large call is served.
    @Test func aReadersCallOver64KiBIsTooLargeAndAnAdminsIsServed() throws {
        let loop = try Self.systemLoop()
        loop.system.pretendPeers([Self.other, Self.other, Self.root])
        let writer = loop.connect()
        let reader = loop.connect()
        let admin = loop.connect()
        writer.send(Self.set("d", "k", bytes: 70 << 10))
        reader.send(
            #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":"k","junk":"\#(String(repeating: "j", count: 70 << 10))"}}"#
        )
        admin.send(Self.set("d", "k", bytes: 70 << 10))
        loop.run("the calls were not answered") { writer.isClosed && reader.isClosed && admin.replies.count == 1 }
        let tooLarge = #"{"parameters":{"limit":65536},"error":"io.kvd.Defaults.TooLarge"}"#
        #expect(writer.replies == [tooLarge])
        #expect(reader.replies == [tooLarge])
        #expect(admin.replies == [#"{"parameters":{"revision":1}}"#])
    }

    /// Lists of a large domain share one encoded reply (``SharedReplyCache``) until a write
    /// changes what they read; then the next `List` shows it.
    @Test func listsOfALargeDomainShareOneReplyUntilAWrite() throws {
        let loop = try Self.systemLoop()
        Self.populate(loop, [("d", "a", 100 << 10)])
        loop.system.pretendPeers([Self.other, Self.root])
        let reader = loop.connect()
        let admin = loop.connect()
        let list = #"{"method":"io.kvd.Defaults.List","parameters":{"domain":"d"}}"#
        reader.send(list, list)
        loop.run("the Lists were not answered") { reader.replies.count == 2 }
        #expect(
            reader.replies[0] == reader.replies[1] && reader.replies[0].contains(#""a":"vvvv"#),
            "\(reader.replies.map { $0.prefix(100) })")
        #expect(!reader.replies[0].contains(#""b":"#))
        admin.send(Self.set("d", "b", bytes: 10))
        loop.run("the write was not answered") { admin.replies.count == 1 }
        reader.send(list)
        loop.run("the third List was not answered") { reader.replies.count == 3 }
        #expect(
            reader.replies[2].contains(#""b":"vvvvvvvvvv""#) && reader.replies[2].contains(#""a":"vvvv"#),
            "\(reader.replies[2].prefix(100))")
    }

    /// A reader that pipelines calls and never reads holds at most about 1 MiB of replies (its
    /// other calls wait); an admin's pipeline is held to the general 32 MiB.
    @Test func aReaderNeverReadingHoldsAboutOneMebibyteOfReplies() throws {
        let loop = try Self.systemLoop()
        Self.populate(loop, [("d", "k", 100 << 10)])
        loop.system.pretendPeers([Self.other, Self.root])
        let reader = loop.connect()
        let admin = loop.connect()
        let calls = [String](repeating: Self.get("d", "k"), count: 40).joined(separator: "\u{0}")
        reader.send(calls)
        admin.send(calls)
        func held(_ client: EventLoopTests.Client) -> Int {
            loop.server.table.connections[client.daemonFD]?.pendingOutput ?? -1
        }
        loop.run("the admin's calls were not all handled") {
            loop.server.table.connections[admin.daemonFD]?.framer.pendingByteCount == 0 && held(admin) > 2 << 20
        }
        loop.run("the reader's first calls were not handled") { held(reader) > 1 << 20 }
        #expect(held(reader) <= (1 << 20) + (200 << 10), "the reader holds \(held(reader)) bytes of replies")
        #expect(
            loop.server.table.connections[reader.daemonFD]?.framer.pendingByteCount ?? 0 > 0,
            "the reader's later calls were handled too")
        #expect(reader.replies.count > 0)
        loop.run("the reader was not served as it read") { reader.replies.count == 40 }
    }
}
