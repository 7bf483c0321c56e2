import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// `WatchAll(current: true)`: the stream starts with the current values of every domain it
/// follows, the system layer's defaults and locks in them, at one (revision, systemRevision);
/// a domain past the budget is only named (withheld); the commits after the start come once
/// each, none before it (issue 38: the GSettings backend's first read without a round trip per
/// domain).
@Suite struct WatchAllCurrentTests {
    static let watchAllCurrent =
        #"{"method":"io.kvd.Defaults.WatchAll","parameters":{"prefix":"app.","current":true},"more":true}"#

    static func set(_ domain: String, _ key: String, _ value: String) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"\#(key)","value":"\#(value)"}}"#
    }

    /// The replies of the current state: every one up to the first without `partial`.
    static func start(_ replies: [String]) throws -> [WatchReply]? {
        let decoded = try replies.map { try WatchReply(decoding: VarlinkReply(message: ArraySlice($0.utf8))) }
        guard let end = decoded.firstIndex(where: { !$0.partial }) else { return nil }
        return Array(decoded[...end])
    }

    /// Whether the replies hold the last of the current state (cheap: not decoded).
    static func started(_ client: EventLoopTests.Client) -> Bool {
        client.replies.contains { !$0.contains(#""partial":true"#) }
    }

    @Test func theStreamStartsWithEveryDomainsValuesAndLocksAndNamesThoseOverTheBudget() throws {
        let updates = SystemWakeTests.FedUpdates()
        var limits = Server.Limits()  // 1/64 of kvd's: a domain over 4 KiB, or past 64 KiB in all, only named
        (limits.currentDomainBytes, limits.currentTotalBytes) = (4 << 10, 64 << 10)
        let loop = try EventLoopTests.Loop(limits: limits, systemUpdates: updates)
        let poller = loop.server.poller
        updates.wake = { poller.wake() }
        let (k, other) = (try Key(validating: "k"), try Key(validating: "other"))
        let count = 120
        for index in 0..<count {
            _ = try loop.store.commit(
                try Domain(validating: "app.d\(index)"), .set(k, .integer(Int64(index)), ifRevision: nil))
        }
        _ = try loop.store.commit(try Domain(validating: "outside"), .set(k, .integer(1), ifRevision: nil))
        let big = try Domain(validating: "app.big")
        _ = try loop.store.commit(big, .set(k, .string(String(repeating: "b", count: 5_000)), ifRevision: nil))
        // 18 domains of 3,750 bytes each: not all fit the 64 KiB the stream carries.
        let wide = try (0..<18).map { try Domain(validating: "app.w\($0 < 10 ? "0" : "")\($0)") }
        for domain in wide {
            _ = try loop.store.commit(domain, .set(k, .string(String(repeating: "w", count: 3_750)), ifRevision: nil))
        }
        let (d0, d1) = (try Domain(validating: "app.d0"), try Domain(validating: "app.d1"))
        let (systemOnly, locksOnly) = (try Domain(validating: "app.sys"), try Domain(validating: "app.locks"))
        updates.push(.values(d0, [Change(key: other, value: .string("default"))], revision: 5))
        updates.push(.values(systemOnly, [Change(key: k, value: .string("only"))], revision: 6))
        updates.push(.locks(d1, [(key: k, locked: true)], revision: 7))
        updates.push(.locks(locksOnly, [(key: k, locked: true)], revision: 8))
        loop.run("the layer was not taken") { loop.server.handler.layer.revision == 8 }

        let watcher = loop.connect()
        watcher.send(Self.watchAllCurrent)
        loop.run("the current state did not come", passes: 2000) { Self.started(watcher) }
        let start = try #require(try Self.start(watcher.replies))
        let last = try #require(start.last)
        #expect(start.allSatisfy { $0.initial && $0.revision == loop.store.revision && $0.systemRevision == 8 })
        #expect(last.domain == nil && last.changes.isEmpty && last.withheld != nil, "\(last)")

        var state: [Domain: [Change]] = [:]
        var sources: [Domain: [Key: ValueSource]] = [:]
        for reply in start.dropLast() where reply.domain != nil {
            state[reply.domain!, default: []] += reply.changes
            sources[reply.domain!, default: [:]].merge(reply.sources) { $1 }
        }
        let withheld = Set(start.flatMap { $0.withheld ?? [] })
        for index in 2..<count {
            #expect(state[try Domain(validating: "app.d\(index)")] == [Change(key: k, value: .integer(Int64(index)))])
        }
        #expect(state[d0] == [Change(key: k, value: .integer(0)), Change(key: other, value: .string("default"))])
        #expect(sources[d0] == [other: .system])
        #expect(state[d1] == [Change(key: k, value: nil)] && sources[d1] == [k: .locked], "a lock lifts nothing")
        #expect(state[systemOnly] == [Change(key: k, value: .string("only"))] && sources[systemOnly] == [k: .system])
        #expect(state[locksOnly] == [Change(key: k, value: nil)] && sources[locksOnly] == [k: .locked])
        #expect(state[try Domain(validating: "outside")] == nil && !withheld.contains { $0.name == "outside" })
        #expect(state[big] == nil && withheld.contains(big), "a domain over 4 KiB is only named")
        let sentWide = wide.filter { state[$0] != nil }
        #expect(sentWide.count >= 10 && sentWide.count < wide.count, "\(sentWide.count) of the wide domains sent")
        #expect(wide.allSatisfy { (state[$0] != nil) != withheld.contains($0) }, "each sent or named, not both")
        let bytes = start.reduce(0) { $0 + $1.reply.encoded().count }
        #expect(bytes < (64 << 10) + (32 << 10), "the start took \(bytes) bytes")

        let writer = loop.connect()
        writer.send(Self.set("app.d5", "k", "after"))
        loop.run("the commit after the start did not come") { watcher.replies.count == start.count + 1 }
        let after = try WatchReply(decoding: VarlinkReply(message: ArraySlice(watcher.replies.last!.utf8)))
        #expect(after.domain?.name == "app.d5" && !after.initial && after.revision > last.revision, "\(after)")
    }

    /// Writers commit without pause while the stream starts, which it does while a batch of
    /// their commits is in the store but not yet told to watchers: the start's state plus the
    /// stream's commits after it is every domain's final state, each commit after the start
    /// comes once and none at or before it (that would be applied twice).
    @Test func aCommitRacingTheStartIsNeitherLostNorTakenTwice() throws {
        let loop = try EventLoopTests.Loop()
        let writers = (0..<4).map { _ in loop.connect() }
        let rounds = 60
        let watcher = loop.connect()
        for (index, writer) in writers.enumerated() {  // queued: each connection's wait for its commit
            for round in 0..<rounds { writer.send(Self.set("app.w\(index)", "k\(round)", "r\(round)")) }
        }
        func acknowledged() throws -> [Int64] {
            try writers.flatMap(\.replies).map { reply in
                guard
                    case .integer(let revision)? = try VarlinkReply(message: ArraySlice(reply.utf8)).parameters[
                        "revision"]
                else { throw StreamReplyError.noRevision }
                return revision
            }
        }
        loop.run("the first Sets were not answered", passes: 2000) {
            writers.reduce(0) { $0 + $1.replies.count } >= rounds
        }
        // Passes one by one until a batch is in the store, its completions not yet delivered (the
        // next pass handles the WatchAll before them).
        var inFlight = false
        for _ in 0..<2000 where !inFlight {
            _ = try loop.server.runPass(maxWait: 20)
            let told = try acknowledged().max() ?? 0
            let deadline = ContinuousClock.now + .milliseconds(200)
            while !inFlight, ContinuousClock.now < deadline { inFlight = loop.store.revision > told }
        }
        #expect(inFlight, "no batch was ever in the store before it was told")
        watcher.send(Self.watchAllCurrent)
        loop.run("the Sets were not answered", passes: 2000) {
            writers.allSatisfy { $0.replies.count == rounds }
        }
        let acknowledged = try acknowledged()
        loop.run("the watcher did not hear the last commit", passes: 2000) {
            (try? WatchReply(decoding: VarlinkReply(message: ArraySlice((watcher.replies.last ?? "").utf8))))?
                .revision == acknowledged.max()
        }
        let all = try watcher.replies.map { try WatchReply(decoding: VarlinkReply(message: ArraySlice($0.utf8))) }
        let start = try #require(try Self.start(watcher.replies))
        let since = start.last!.revision
        var state: [Domain: [Key: Value]] = [:]
        for reply in start where reply.domain != nil {
            for change in reply.changes { state[reply.domain!, default: [:]][change.key] = change.value }
        }
        let events = all.dropFirst(start.count)
        #expect(events.allSatisfy { $0.revision > since && !$0.initial }, "an event at or before the start")
        #expect(events.map(\.revision) == acknowledged.filter { $0 > since }.sorted(), "each commit after, once")
        #expect(since > acknowledged.min()! && since < acknowledged.max()!, "the start raced no commit: \(since)")
        for event in events {
            for change in event.changes { state[event.domain!, default: [:]][change.key] = change.value }
        }
        for index in writers.indices {
            let domain = try Domain(validating: "app.w\(index)")
            #expect(state[domain] == loop.store.list(domain)?.values, "app.w\(index)")
        }
    }

    /// Apps starting together while nothing is written get the start kept from the first
    /// (``KeptReplies``); a commit or a change of the system layer makes it again.
    @Test func aKeptStartServesOnlyWhileNothingChanged() throws {
        let updates = SystemWakeTests.FedUpdates()
        let loop = try EventLoopTests.Loop(systemUpdates: updates)
        let poller = loop.server.poller
        updates.wake = { poller.wake() }
        let (domain, k, other) = (
            try Domain(validating: "app.a"), try Key(validating: "k"), try Key(validating: "other")
        )
        _ = try loop.store.commit(domain, .set(k, .integer(1), ifRevision: nil))
        func start() throws -> [WatchReply] {
            let watcher = loop.connect()
            watcher.send(Self.watchAllCurrent)
            loop.run("the current state did not come") { Self.started(watcher) }
            return try #require(try Self.start(watcher.replies))
        }
        let (first, second) = (try start(), try start())
        #expect(first == second && first.first?.changes == [Change(key: k, value: .integer(1))], "\(first) \(second)")
        _ = try loop.store.commit(domain, .set(k, .integer(2), ifRevision: nil))
        let afterCommit = try start()
        #expect(afterCommit.first?.changes == [Change(key: k, value: .integer(2))], "\(afterCommit)")
        updates.push(.values(domain, [Change(key: other, value: .string("default"))], revision: 3))
        loop.run("the layer was not taken") { loop.server.handler.layer.revision == 3 }
        let afterLayer = try start()
        #expect(
            afterLayer.first?.changes == [
                Change(key: k, value: .integer(2)), Change(key: other, value: .string("default")),
            ]
                && afterLayer.last?.systemRevision == 3, "\(afterLayer)")
    }

    /// The budget goes to the smallest domains first: large domains early in name order leave
    /// none of the many small ones after them to be read apart (each named is a round trip for
    /// the client); the replies still come in name order.
    @Test func theBudgetGoesToTheSmallestDomainsFirst() throws {
        var limits = Server.Limits()  // a domain over 4 KiB, or past 16 KiB in all, only named
        (limits.currentDomainBytes, limits.currentTotalBytes) = (4 << 10, 16 << 10)
        let loop = try EventLoopTests.Loop(limits: limits)
        let k = try Key(validating: "k")
        let wide = try (0..<6).map { try Domain(validating: "app.a\($0)") }
        for domain in wide {
            _ = try loop.store.commit(domain, .set(k, .string(String(repeating: "w", count: 3_700)), ifRevision: nil))
        }
        let small = try (0..<100).map { try Domain(validating: "app.z\(1000 + $0)") }
        for (index, domain) in small.enumerated() {
            _ = try loop.store.commit(domain, .set(k, .integer(Int64(index)), ifRevision: nil))
        }
        let watcher = loop.connect()
        watcher.send(Self.watchAllCurrent)
        loop.run("the current state did not come") { Self.started(watcher) }
        let start = try #require(try Self.start(watcher.replies))
        let sent = start.compactMap(\.domain)
        let withheld = Set(start.flatMap { $0.withheld ?? [] })
        #expect(small.allSatisfy { sent.contains($0) }, "every small domain is sent; withheld: \(withheld)")
        #expect(
            withheld.count >= 2 && withheld.isSubset(of: Set(wide)),
            "the large ones past the budget are named: \(withheld)")
        #expect(sent == sent.sorted(), "in name order")
    }
}
