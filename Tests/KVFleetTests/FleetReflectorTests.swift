import KVTestSupport
import KVValues
import Synchronization
import Testing

@testable import KVFleet

/// Runs a reflector over a scripted etcd on the test's thread until the scripts run out,
/// recording what reaches the sink and every backoff.
final class ReflectorRun {
    let etcd = ScriptedEtcd()
    let layout = try! FleetLayout(domainPatterns: ["com.corp.*"])
    var updates: [FleetUpdate] = []
    /// The sink throws for these calls (0-based), once each.
    var failingCalls: Set<Int> = []
    private var calls = 0
    let sleeps = Shared<[Duration]>([])

    func reflector(pageSize: Int = 500) -> FleetReflector {
        var options = FleetReflector.Options()
        options.pageSize = pageSize
        let sleeps = self.sleeps
        return FleetReflector(
            etcd: etcd, layout: layout, options: options, sleep: { duration in sleeps.change { $0.append(duration) } })
    }

    struct SinkFailure: Error, CustomStringConvertible {
        var description: String { "the disk is full" }
    }

    /// Runs until the scripts are exhausted; returns the final status.
    @discardableResult
    func run(from applied: Int64 = 0, pageSize: Int = 500) -> FleetReflectorStatus {
        let reflector = reflector(pageSize: pageSize)
        etcd.whenExhausted { reflector.stop() }
        reflector.run(from: applied) { update in
            defer { calls += 1 }
            if failingCalls.contains(calls) { throw SinkFailure() }
            updates.append(update)
        }
        return reflector.status
    }

    /// The mirror the updates build.
    var mirror: FleetSnapshot {
        var snapshot = FleetSnapshot()
        for update in updates {
            switch update {
            case .replace(let all, _): snapshot = all
            case .apply(let changes, _):
                for change in changes {
                    switch change {
                    case .set(let domain, let key, let value): snapshot.values[domain, default: [:]][key] = value
                    case .remove(let domain, let key): snapshot.values[domain]?[key] = nil
                    case .lock(let domain, let key): snapshot.locks[domain, default: []].insert(key)
                    case .unlock(let domain, let key): snapshot.locks[domain]?.remove(key)
                    }
                }
            }
        }
        snapshot.values = snapshot.values.filter { !$0.value.isEmpty }
        snapshot.locks = snapshot.locks.filter { !$0.value.isEmpty }
        return snapshot
    }
}

func domain(_ name: String) -> Domain { try! Domain(validating: name) }
func key(_ name: String) -> Key { try! Key(validating: name) }
func values(_ entries: [String: Int64], in name: String = "com.corp.a") -> [Domain: [Key: Value]] {
    entries.isEmpty
        ? [:] : [domain(name): Dictionary(uniqueKeysWithValues: entries.map { (key($0.key), Value.integer($0.value)) })]
}

@Suite struct FleetReflectorListTests {
    @Test func pagesArePinnedToTheFirstPagesRevisionEvenWhenEtcdChangesBetweenPages() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.put("kvd/values/com.corp.a/2", "2")
        let listed = run.etcd.put("kvd/values/com.corp.a/3", "3")
        run.etcd.beforeRange { index, etcd in
            if index == 1 {
                etcd.write(
                    put: [("kvd/values/com.corp.a/4", "4"), ("kvd/values/com.corp.a/1", "10")],
                    delete: ["kvd/values/com.corp.a/3"])
            }
        }
        run.etcd.script([.history])
        run.run(pageSize: 2)
        #expect(run.etcd.rangeCalls.map(\.revision) == [nil, listed])
        #expect(run.etcd.rangeCalls.map(\.limit) == [2, 2])
        #expect(run.etcd.rangeCalls[1].from == Array("kvd/values/com.corp.a/2".utf8) + [0])
        #expect(
            run.updates.first == .replace(FleetSnapshot(values: values(["1": 1, "2": 2, "3": 3])), revision: listed))
        // The write between the pages comes by the watch, from the listing's revision + 1.
        #expect(run.etcd.watchStarts.first == listed + 1)
        #expect(run.mirror == FleetSnapshot(values: values(["1": 10, "2": 2, "4": 4])))
    }

    @Test func compactionDuringTheListingStartsItAgainAtTheNewestRevision() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.put("kvd/values/com.corp.a/2", "2")
        run.etcd.beforeRange { index, etcd in
            if index == 1 {
                etcd.write(put: [("kvd/values/com.corp.a/1", "11")])
                etcd.compact()
            }
        }
        let status = run.run(pageSize: 1)
        #expect(run.etcd.rangeCalls.map(\.revision) == [nil, 3, nil, 4])
        #expect(run.updates == [.replace(FleetSnapshot(values: values(["1": 11, "2": 2])), revision: 4)])
        #expect(status.relists == 1)
        #expect(run.sleeps.value.isEmpty)  // at once, no backoff
    }

    @Test func aListingReplacesTheMirrorWithEveryFleetValueAndLock() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/x/y", #"{"$dict":{"$k":true}}"#)
        run.etcd.put("kvd/locks/com.corp.a/x/y", "")
        run.etcd.put("kvd/values/com.other/x", "1")
        run.etcd.put("kvdx/values/com.corp.a/z", "1")
        let status = run.run()
        let expected = FleetSnapshot(
            values: [domain("com.corp.a"): [key("x/y"): .dictionary(["$k": .bool(true)])]],
            locks: [domain("com.corp.a"): [key("x/y")]])
        #expect(run.updates == [.replace(expected, revision: 5)])
        #expect(status.appliedRevision == 5)
        #expect(status.problems.isEmpty)
    }

    @Test func unreadableEntriesAreLeftOutAndReportedWithTheReason() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/good", "1")
        run.etcd.put("kvd/values/com.corp.a/bad", "{nope")
        run.etcd.put("kvd/locks/com.corp.a b/k", "")
        run.etcd.put("kvd/vals/com.corp.a/k", "1")
        let status = run.run()
        #expect(run.updates == [.replace(FleetSnapshot(values: values(["good": 1])), revision: 5)])
        #expect(
            status.problems.map(\.etcdKey) == [
                "kvd/locks/com.corp.a b/k", "kvd/vals/com.corp.a/k", "kvd/values/com.corp.a/bad",
            ])
        #expect(status.problems.last?.revision == 3)
        #expect(
            status.problems.last?.description.contains("is not the contract's typed JSON: invalid JSON at byte") == true
        )
    }
}

@Suite struct FleetReflectorWatchTests {
    let a = domain("com.corp.a")

    @Test func afterTheListingTheWatchStartsAtTheNextRevision() {
        let run = ReflectorRun()
        let listed = run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.script([.run({ $0.put("kvd/locks/com.corp.a/1", "") }), .history])
        let status = run.run()
        #expect(run.etcd.watchStarts.first == listed + 1)
        #expect(run.updates.last == .apply([.lock(a, key("1"))], revision: listed + 1))
        #expect(status.appliedRevision == listed + 1)
    }

    @Test func theEventsOfOneRevisionAreDeliveredTogether() {
        let run = ReflectorRun()
        func event(_ kind: EtcdEvent.Kind, _ name: String, _ value: String, _ revision: Int64) -> EtcdEvent {
            EtcdEvent(
                kind: kind,
                keyValue: EtcdKeyValue(key: Array(name.utf8), value: Array(value.utf8), modRevision: revision))
        }
        let events = [
            event(.put, "kvd/values/com.corp.a/1", "1", 5), event(.put, "kvd/locks/com.corp.a/1", "", 5),
            event(.delete, "kvd/values/com.corp.a/2", "", 5), event(.put, "kvd/values/com.other/1", "1", 6),
            event(.delete, "kvd/locks/com.corp.a/1", "", 7),
        ]
        run.etcd.script([.send(.events(events, headerRevision: 7))])
        let status = run.run(from: 4)
        #expect(
            run.updates == [
                .apply([.set(a, key("1"), .integer(1)), .lock(a, key("1")), .remove(a, key("2"))], revision: 5),
                .apply([.unlock(a, key("1"))], revision: 7),
            ])
        #expect(status.appliedRevision == 7)
    }

    @Test func eventsAtOrBelowTheAppliedRevisionAreDropped() {
        let run = ReflectorRun()
        let replayed = (8...11).map { revision in
            EtcdEvent(
                kind: .put,
                keyValue: EtcdKeyValue(
                    key: Array("kvd/values/com.corp.a/k".utf8), value: Array("\(revision)".utf8),
                    modRevision: Int64(revision)))
        }
        run.etcd.script([
            .send(.events(Array(replayed[0...2]), headerRevision: 12)), .send(.events(replayed, headerRevision: 12)),
        ])
        let status = run.run(from: 10)
        #expect(run.updates == [.apply([.set(a, key("k"), .integer(11))], revision: 11)])
        #expect(status.appliedRevision == 11)
        #expect(status.seenRevision == 12)
    }

    @Test func aProgressNotificationMovesTheSeenRevisionNotTheAppliedOne() {
        let run = ReflectorRun()
        run.etcd.script([.send(.progress(revision: 40))])
        let status = run.run(from: 30)
        #expect(status.appliedRevision == 30)
        #expect(status.seenRevision == 40)
        #expect(run.etcd.watchStarts == [31, 31])
    }

    @Test func aWatchCancelledForCompactionListsAgainAndDropsWhatEtcdDeleted() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.put("kvd/values/com.corp.a/2", "2")
        run.etcd.script(
            [
                .run({ etcd in
                    etcd.write(put: [("kvd/values/com.corp.a/3", "3")], delete: ["kvd/values/com.corp.a/1"])
                    etcd.compact()
                }), .history,
            ])
        let status = run.run(from: 2)
        #expect(run.etcd.watchStarts == [3, 5])
        #expect(run.updates == [.replace(FleetSnapshot(values: values(["2": 2, "3": 3])), revision: 4)])
        #expect(status.relists == 1)
        #expect(run.sleeps.value.isEmpty)
    }

    /// Broke it once on purpose: resuming from the applied revision instead of the next one
    /// fails the `watchStarts` expectation ([2, 3, 4] instead of [3, 4, 5]); resuming from
    /// applied + 2 loses a write.
    @Test func aBrokenStreamResumesFromTheAppliedRevisionPlusOneAfterABackoff() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.script(
            [.run({ $0.put("kvd/values/com.corp.a/1", "2") }), .history, .fail(.unreachable("connection reset"))],
            [.run({ $0.put("kvd/values/com.corp.a/1", "3") }), .history])
        let status = run.run(from: 2)
        #expect(run.etcd.watchStarts == [3, 4, 5])
        #expect(
            run.updates == [
                .apply([.set(a, key("1"), .integer(2))], revision: 3),
                .apply([.set(a, key("1"), .integer(3))], revision: 4),
            ])
        #expect(status.lastError == "the fleet watch broke: etcd cannot be reached: the script is exhausted")
        #expect(run.sleeps.value.first == .milliseconds(100))
    }

    @Test func aSinkFailureLeavesTheRevisionAndTheUpdateComesAgain() {
        let run = ReflectorRun()
        run.failingCalls = [1]
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.script([.run({ $0.put("kvd/values/com.corp.a/1", "2") }), .history], [.history])
        let status = run.run()
        #expect(run.etcd.watchStarts == [3, 3, 4])
        #expect(
            run.updates == [
                .replace(FleetSnapshot(values: values(["1": 1])), revision: 2),
                .apply([.set(a, key("1"), .integer(2))], revision: 3),
            ])
        #expect(status.appliedRevision == 3)
        #expect(run.sleeps.value.first == .milliseconds(100))
    }

    @Test func aFailedListingCommitListsAgain() {
        let run = ReflectorRun()
        run.failingCalls = [0]
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        let status = run.run()
        #expect(run.etcd.rangeCalls.count == 2)
        #expect(run.updates == [.replace(FleetSnapshot(values: values(["1": 1])), revision: 2)])
        #expect(status.appliedRevision == 2)
    }

    @Test func backoffDoublesUpToItsCapAndResetsWhenEtcdAnswers() {
        let run = ReflectorRun()
        let broken: [ScriptedEtcd.Step] = [.fail(.unreachable("refused"))]
        run.etcd.script(
            broken, broken, broken, broken, broken, broken, broken, broken,
            [.send(.progress(revision: 9)), .fail(.unreachable("reset"))])
        run.run(from: 5)
        let milliseconds: [Int64] = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 100]
        #expect(run.sleeps.value == milliseconds.map { .milliseconds($0) })
    }

    @Test func anUnreadableValueRemovesTheOldOneAndIsReported() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "1")
        run.etcd.script([
            .run({ $0.write(put: [("kvd/values/com.corp.a/1", "[1,"), ("kvd/locks/com.corp.a/", "")]) }), .history,
        ])
        let status = run.run()
        #expect(
            run.updates == [
                .replace(FleetSnapshot(values: values(["1": 1])), revision: 2),
                .apply([.remove(a, key("1"))], revision: 3),
            ])
        #expect(status.appliedRevision == 3)
        #expect(status.problems.map(\.etcdKey) == ["kvd/locks/com.corp.a/", "kvd/values/com.corp.a/1"])
        #expect(status.problems.map(\.revision) == [3, 3])
    }

    @Test func aFixedOrDeletedEntryIsNoLongerReported() {
        let run = ReflectorRun()
        run.etcd.put("kvd/values/com.corp.a/1", "[1,")
        run.etcd.put("kvd/locks/com.corp.a/", "")
        run.etcd.script([
            .run({ $0.write(put: [("kvd/values/com.corp.a/1", "4")], delete: ["kvd/locks/com.corp.a/"]) }), .history,
        ])
        let status = run.run()
        #expect(
            run.updates == [
                .replace(FleetSnapshot(), revision: 3), .apply([.set(a, key("1"), .integer(4))], revision: 4),
            ])
        #expect(status.problems.isEmpty)
    }

    @Test func stopEndsTheRunFromAnotherThread() async {
        let run = ReflectorRun()
        let reflector = run.reflector()
        let started = Shared(false)
        run.etcd.script([.run({ _ in started.change { $0 = true } }), .progressForever(revision: 1)])
        let task = Task.detached { reflector.run(from: 1) { _ in } }
        while !started.value { await Task.yield() }
        reflector.stop()
        await task.value
        #expect(reflector.status.phase == .stopped)
        #expect(run.etcd.watchStarts == [2])
    }
}

/// A value shared between threads.
final class Shared<T: Sendable>: Sendable {
    private let mutex: Mutex<T>

    init(_ value: T) { mutex = Mutex(value) }

    var value: T { mutex.withLock { $0 } }

    func change(_ body: (inout T) -> Void) { mutex.withLock { body(&$0) } }
}

/// The status's first entries left out are picked in one pass, in etcd key order.
@Test func theFirstProblemsArePickedInKeyOrder() {
    var problems: [[UInt8]: FleetProblem] = [:]
    var generator = SeededGenerator.forTest()
    for n in (0..<1000).shuffled(using: &generator) {
        let key = Array("kvd/values/com.corp.a/k\(String(n + 10000))".utf8)
        problems[key] = FleetProblem(etcdKey: String(decoding: key, as: UTF8.self), revision: Int64(n), reason: "bad")
    }
    let first = FleetReflector.first(5, of: problems)
    #expect(first.map(\.revision) == [0, 1, 2, 3, 4])
    #expect(FleetReflector.first(2000, of: problems).count == 1000)
    #expect(FleetReflector.first(0, of: problems).isEmpty)
}
