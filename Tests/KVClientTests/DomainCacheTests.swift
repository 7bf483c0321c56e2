import Glibc
import KVProtocol
import KVValues
import Testing

@testable import KVClient

/// The in-process cache of a watched domain.
@Suite(.serialized) struct DomainCacheTests {
    /// A long-running app's memory must not grow with churn: 2,000 distinct keys are each set
    /// and deleted — half by this suite (applied when acknowledged, and again by the watch),
    /// half by another client (seen through the watch only) — and the cache holds no more than
    /// it did before.
    @Test func setAndDeleteOfManyDistinctKeysDoesNotGrowTheCache() throws {
        let daemon = try RealDaemon()
        let name = domain("com.example.churn")
        let defaults = daemon.suite(name.name)
        try defaults.write(.string("kept"), forKey: "kept")
        let cache = defaults.cache(for: name)
        let before = cache.footprint
        for index in 0..<1_000 {
            try defaults.write(.integer(Int64(index)), forKey: "own\(index)")
            try defaults.write(nil, forKey: "own\(index)")
        }
        let other = try daemon.connection()
        for batch in stride(from: 0, to: 1_000, by: 500) {
            let requests = (batch..<batch + 500).flatMap { index -> [DefaultsRequest] in
                [
                    .set(name, key("other\(index)"), .integer(Int64(index)), ifRevision: nil),
                    .delete(name, key("other\(index)")),
                ]
            }
            for result in other.callPipelined(requests) { _ = try result.get() }
        }
        try other.set(name, key("last"), .bool(true))
        #expect(eventually(20) { cache.value("last") == .bool(true) }, "the watch did not deliver the last change")
        #expect(cache.value("kept") == .string("kept") && cache.values.count == 2)
        #expect(
            cache.footprint <= before + 1, "the cache tracks \(cache.footprint) keys after the churn, \(before) before")
    }

    /// Forgetting removed keys keeps the ordering rule: a change older than a key's removal
    /// never brings the key back, whether the removal is still remembered (own delete ahead of
    /// the watch) or already forgotten (the watch delivered it).
    @Test func staleChangesStayIgnoredOnceRemovalsAreForgotten() {
        let core = DomainCache(
            domain: domain("com.example.order"), transport: .memory(KVMemoryStore()), report: { _ in })
        core.reconcile(["a": Value.integer(1)], revision: 10, streamed: true)
        core.apply([Change(key: key("a"), value: nil)], revision: 12)  // own delete, ahead of the watch
        core.apply([Change(key: key("a"), value: .integer(2))], revision: 11, streamed: true)  // older, from the watch
        #expect(core.value("a") == nil, "a change older than the removal brought the key back")
        #expect(core.footprint == 1, "the removal must be kept until the watch delivers it")
        core.apply([Change(key: key("a"), value: nil)], revision: 12, streamed: true)
        #expect(core.footprint == 0, "the removal is still kept after the watch delivered it")
        core.apply([Change(key: key("a"), value: .integer(3))], revision: 11)  // a late acknowledgement
        #expect(core.value("a") == nil && core.footprint == 0)
        core.apply([Change(key: key("a"), value: .integer(4))], revision: 13)
        #expect(core.value("a") == .integer(4), "a newer change was ignored")
    }

    /// A system-layer change (a lock, a machine default) is streamed with the user store's revision
    /// unchanged, equal to the last one streamed. The stream's order is the truth: such a change
    /// applies even to a key the cache knows nothing of.
    @Test func aSystemChangeAtTheLastStreamedRevisionIsApplied() {
        let core = DomainCache(
            domain: domain("com.example.layers"), transport: .memory(KVMemoryStore()), report: { _ in })
        core.reconcile(["a": Value.integer(1)], revision: 10, streamed: true)
        // a system default appears
        core.apply([Change(key: key("b"), value: .string("machine"))], revision: 10, streamed: true)
        #expect(core.value("b") == .string("machine"), "a system change streamed at the current revision was dropped")
        // a lock shows the system value
        core.apply([Change(key: key("a"), value: .integer(7))], revision: 10, streamed: true)
        #expect(core.value("a") == .integer(7))
        core.apply([Change(key: key("b"), value: nil)], revision: 10, streamed: true)  // the default goes
        core.apply([Change(key: key("b"), value: .string("again"))], revision: 10, streamed: true)
        #expect(core.value("b") == .string("again"), "stream order was not kept at one revision")
    }

    /// Own-write reconciliation with system changes: this process's write is acknowledged at
    /// revision 6, but the watch delivers commit 6 first and then a lock of the key (streamed
    /// at revision 6 too). The late acknowledgement must not hide the locked value; nor may an
    /// own delete acknowledged late hide the machine default the stream showed after it.
    @Test func aLateAcknowledgementDoesNotUndoALaterSystemChange() {
        let core = DomainCache(
            domain: domain("com.example.layers"), transport: .memory(KVMemoryStore()), report: { _ in })
        core.reconcile([:], revision: 5, streamed: true)
        // commit 6, this process's set
        core.apply([Change(key: key("k"), value: .integer(1))], revision: 6, streamed: true)
        // the admin locks k at 99
        core.apply([Change(key: key("k"), value: .integer(99))], revision: 6, streamed: true)
        core.apply([Change(key: key("k"), value: .integer(1))], revision: 6)  // the acknowledgement of the set, late
        #expect(core.value("k") == .integer(99), "the late acknowledgement replaced the locked value")
        core.apply([Change(key: key("d"), value: .integer(2))], revision: 7, streamed: true)
        // own delete: d falls back to the machine default 5
        core.apply([Change(key: key("d"), value: .integer(5))], revision: 8, streamed: true)
        core.apply([Change(key: key("d"), value: nil)], revision: 8)  // its acknowledgement, late
        #expect(core.value("d") == .integer(5), "the late acknowledgement of a delete hid the machine default")
        // acknowledged ahead of the watch: shown at once
        core.apply([Change(key: key("e"), value: .integer(3))], revision: 9)
        #expect(core.value("e") == .integer(3))
    }

    /// A key the administrator locked without a value comes with no value and the source `locked`,
    /// in a watch's first reply and as a change; it is locked though the cache holds no value for
    /// it, until a change with no value and no source lifts the lock.
    @Test func aKeyLockedWithoutAValueIsLockedUntilTheLockLifts() {
        let core = DomainCache(
            domain: domain("com.example.bare"), transport: .memory(KVMemoryStore()), report: { _ in })
        core.reconcile(["a": Value.integer(1)], revision: 10, streamed: true, sources: ["bare": .locked])
        #expect(core.isLocked("bare") && core.value("bare") == nil, "the snapshot's valueless lock was dropped")
        core.apply([Change(key: key("bare"), value: nil)], revision: 10, streamed: true)  // the lock lifts
        #expect(!core.isLocked("bare"))
        core.apply([Change(key: key("b"), value: nil)], revision: 10, streamed: true, sources: [key("b"): .locked])
        #expect(core.isLocked("b") && core.value("b") == nil, "a streamed valueless lock was dropped")
        core.reconcile(["a": Value.integer(1)], revision: 11, streamed: true)  // a new watch: b's lock lifted meanwhile
        #expect(!core.isLocked("b"), "a lock lifted while disconnected stayed")
        #expect(core.footprint == 1)
    }

    /// The watch thread holds its cache only while it hands it an event: releasing the suite
    /// releases its caches (and so stops their watches), on kvd and on a memory store alike.
    @Test func releasingTheSuiteReleasesItsCachesAndTheirWatches() throws {
        let daemon = try RealDaemon()
        weak var watched: DomainCache?
        weak var inMemory: DomainCache?
        do {
            let defaults = daemon.suite("com.example.released")
            try defaults.write(.string("v"), forKey: "k")
            watched = defaults.cache(for: domain("com.example.released"))
            #expect(watched?.value("k") == .string("v"))
            let store = KVMemoryStore()
            let memory = KVDefaults(suiteName: "com.example.released", configuration: .inMemory(store))!
            inMemory = memory.cache(for: domain("com.example.released"))
            #expect(inMemory != nil)
        }
        #expect(eventually { watched == nil }, "the watch thread kept the cache of a released suite")
        #expect(inMemory == nil, "the memory store kept the cache of a released suite")
    }
}
