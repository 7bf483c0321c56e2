import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// `WatchAll`: one connection hears the changes of every domain under its prefix, each reply
/// naming its domain, the system layer's changes per domain too, and it is held to the same
/// bound as any watcher (issue 38: the GSettings backend's one stream for the whole process).
@Suite struct WatchAllTests {
    static let watchAll = #"{"method":"io.kvd.Defaults.WatchAll","parameters":{"prefix":"app."},"more":true}"#

    static func set(_ domain: String, _ value: String) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"k","value":"\#(value)"}}"#
    }

    static func decoded(_ replies: [String]) throws -> [WatchReply] {
        try replies.map { try WatchReply(decoding: VarlinkReply(message: ArraySlice($0.utf8))) }
    }

    @Test func everyCommitUnderThePrefixComesOnceNamingItsDomainInCommitOrder() throws {
        let loop = try EventLoopTests.Loop()
        let watcher = loop.connect()
        watcher.send(Self.watchAll)
        loop.run("the WatchAll did not begin") { watcher.replies.count == 1 }
        let first = try #require(try Self.decoded(watcher.replies).first)
        #expect(first.initial && first.domain == nil && first.changes.isEmpty, "\(first)")
        let writer = loop.connect()
        let count = 300
        for index in 0..<count {  // a few at a time: the test's sends block, and the loop runs on this thread
            writer.send(Self.set("app.d\(index)", "v\(index)"), Self.set("other.d\(index)", "not watched"))
            if index % 20 == 19 { loop.run("the Sets were not answered") { writer.replies.count == 2 * (index + 1) } }
        }
        loop.run("the watcher did not hear every commit", passes: 2000) { watcher.replies.count == count + 1 }
        let replies = try Self.decoded(watcher.replies).dropFirst()
        #expect(replies.count == count)
        #expect(replies.map { $0.domain?.name } == (0..<count).map { "app.d\($0)" })
        #expect(replies.map { $0.changes.first?.value } == (0..<count).map { .string("v\($0)") })
        let revisions = replies.map(\.revision)
        #expect(zip(revisions, revisions.dropFirst()).allSatisfy { $0 < $1 } && revisions.first! > first.revision)
    }

    @Test func theSystemLayersChangesComePerDomainWithTheirSources() throws {
        let updates = SystemWakeTests.FedUpdates()
        let loop = try EventLoopTests.Loop(systemUpdates: updates)
        let poller = loop.server.poller
        updates.wake = { poller.wake() }
        let watcher = loop.connect()
        watcher.send(Self.watchAll)
        loop.run("the WatchAll did not begin") { watcher.replies.count == 1 }
        let key = try Key(validating: "k")
        let a = try Domain(validating: "app.a")
        let b = try Domain(validating: "app.b")
        let outside = try Domain(validating: "other")
        updates.push(.values(a, [Change(key: key, value: .string("default"))], revision: 1))
        updates.push(.values(outside, [Change(key: key, value: .string("default"))], revision: 2))
        updates.push(.locks(b, [(key: key, locked: true)], revision: 3))
        loop.run("the watcher did not hear the layer", passes: 500) { watcher.replies.count >= 3 }
        for _ in 0..<10 { _ = try loop.server.runPass(maxWait: 1) }
        let replies = try Self.decoded(watcher.replies).dropFirst()
        #expect(replies.map { $0.domain?.name } == ["app.a", "app.b"], "\(watcher.replies)")
        guard replies.count == 2 else { return }
        let (forA, forB) = (replies[replies.startIndex], replies[replies.startIndex + 1])
        #expect(forA.changes == [Change(key: key, value: .string("default"))] && forA.sources[key] == .system)
        #expect(forB.changes == [Change(key: key, value: nil)] && forB.sources[key] == .locked)
        #expect(forA.systemRevision != nil && forA.systemRevision! <= forB.systemRevision ?? 0, "\(forA) \(forB)")
        #expect(forB.systemRevision == 3 && forA.revision == forB.revision, "\(forA) \(forB)")
    }

    @Test func aWatchAllThatDoesNotReadIsDisconnectedAndTheOthersServed() throws {
        var limits = Server.Limits()
        limits.maxPendingOutput = 1 << 20
        let loop = try EventLoopTests.Loop(limits: limits)
        let deaf = loop.connect()
        deaf.send(Self.watchAll)
        loop.run("the WatchAll did not begin") { loop.server.table.watchers.count == 1 }
        let writer = loop.connect()
        let big = String(repeating: "w", count: 100_000)
        for index in 0..<40 {  // one at a time: the test's sends block, and the loop runs on this thread
            writer.send(Self.set("app.big\(index % 4)", big + "\(index)"))
            loop.run("Set \(index) was not answered") { writer.replies.count == index + 1 }
        }
        loop.run("the watcher that does not read was not disconnected", passes: 500) {
            loop.server.table.connections[deaf.daemonFD] == nil
        }
        writer.send(#"{"method":"io.kvd.Defaults.Domains"}"#)
        loop.run("the writer was not served after") { writer.replies.count == 41 }
    }

    /// `Snapshot`: what a Watch of the domain starts with, in one reply, at the store's revision
    /// and the layer's; an empty one for a domain nobody has; TooLarge past one reply.
    @Test func aSnapshotIsAWatchsFirstReplyAtTheStoresAndTheLayersRevision() throws {
        let updates = SystemWakeTests.FedUpdates()
        let loop = try EventLoopTests.Loop(systemUpdates: updates)
        let poller = loop.server.poller
        updates.wake = { poller.wake() }
        let domain = try Domain(validating: "app.s")
        let (mine, theirs, ghost) = (
            try Key(validating: "mine"), try Key(validating: "theirs"), try Key(validating: "ghost")
        )
        _ = try loop.store.commit(domain, .set(mine, .string("m"), ifRevision: nil))
        _ = try loop.store.commit(try Domain(validating: "other"), .set(mine, .integer(1), ifRevision: nil))
        updates.push(.values(domain, [Change(key: theirs, value: .string("t"))], revision: 7))
        updates.push(.locks(domain, [(key: ghost, locked: true)], revision: 8))
        loop.run("the layer was not taken") { loop.server.handler.layer.revision == 8 }
        let client = loop.connect()
        client.send(
            #"{"method":"io.kvd.Defaults.Snapshot","parameters":{"domain":"app.s"}}"#,
            #"{"method":"io.kvd.Defaults.Snapshot","parameters":{"domain":"app.none"}}"#)
        loop.run("the Snapshots were not answered") { client.replies.count == 2 }
        let replies = try client.replies.map { try VarlinkReply(message: ArraySlice($0.utf8)) }
        #expect(replies.allSatisfy { !$0.continues }, "\(client.replies)")
        let (full, empty) = (try WatchReply(decoding: replies[0]), try WatchReply(decoding: replies[1]))
        #expect(full.initial && full.revision == loop.store.revision && full.systemRevision == 8, "\(full)")
        #expect(
            full.changes == [
                Change(key: ghost, value: nil), Change(key: mine, value: .string("m")),
                Change(key: theirs, value: .string("t")),
            ], "\(full)")
        #expect(full.sources == [ghost: .locked, theirs: .system], "\(full)")
        #expect(empty.initial && empty.changes.isEmpty && empty.revision == loop.store.revision, "\(empty)")
    }

    @Test func aPrefixThatIsNoDomainNameIsRefusedAndWatchAllNeedsMore() throws {
        let loop = try EventLoopTests.Loop()
        let client = loop.connect()
        client.send(
            #"{"method":"io.kvd.Defaults.WatchAll","parameters":{"prefix":"-x"},"more":true}"#,
            #"{"method":"io.kvd.Defaults.WatchAll","parameters":{}}"#)
        loop.run("the calls were not answered") { client.replies.count == 2 }
        #expect(client.replies[0].contains("io.kvd.Defaults.InvalidName"), "\(client.replies)")
        #expect(client.replies[1].contains("org.varlink.service.ExpectedMore"), "\(client.replies)")
    }
}
