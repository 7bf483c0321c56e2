import Foundation
import KVProtocol
import KVTestSupport
import KVValues
import Synchronization
import Testing

@testable import KVClient

/// The client side of the system layer, against a faked user kvd whose domain `com.example.locks`
/// has a locked key `k` ("sys"), the user's own `own` ("mine") and a machine default `def` (5), at
/// revision 3. Writes to `k` are refused with `KeyLocked`.
@Suite struct SystemLayerTests {
    static let name = "com.example.locks"

    @Test func keyLockedRepliesAreDecodedAndSayWhoCanLiftTheLock() {
        let error = ClientError(
            errorReply: .failure(DefaultsInterface.Error.keyLocked, ["domain": .string("com.a"), "key": .string("x")]))
        #expect(error == .keyLocked(domain: "com.a", key: "x"))
        #expect(
            error.description
                == "com.a x is locked by the system administrator; root or a member of the system instance's admin group can lift it (kvctl --system source com.a x says where the lock comes from)"
        )
        let spaced = ClientError.keyLocked(domain: "com.a", key: "it's on")
        #expect(
            spaced.description.contains("kvctl --system source com.a 'it'\\''s on' says"),
            "a key with spaces must be quoted for the shell")
    }

    @Test func watchChangesAndGetCarryTheirSource() throws {
        let server = FakeVarlinkServer { call in
            if call.method.hasSuffix(".Get") {
                return [
                    VarlinkReply(parameters: [
                        "value": .string("sys"), "revision": .integer(0), "source": .string("locked"),
                    ])
                ]
            }
            return [FakeKVD.initial, .failure(DefaultsInterface.Error.notFound, ["domain": .string(Self.name)])]
        }
        let connection = try Connection(socketPath: server.path)
        #expect(try connection.getWithSource(domain(Self.name), key("k")) == (.string("sys"), 0, .locked))
        var events: [WatchEvent] = []
        #expect(throws: ClientError.notFound(domain: Self.name, key: nil)) {
            try connection.watch(domain(Self.name)) { event in
                events.append(event)
                return true
            }
        }
        #expect(events.first?.sources == [key("k"): .locked, key("def"): .system])
    }

    /// `set` on a locked key reports `keyLocked` and reads keep the locked value; `write` and a
    /// typed key's `set` throw it; `objectIsForced` and `isWritable` say so without IPC.
    @Test func aWriteToALockedKeyIsRefusedAndTheLockedValueStays() throws {
        let kvd = FakeKVD()
        defer { kvd.feed.close() }
        let log = DiagnosticLog()
        let defaults = kvd.suite(log)
        #expect(defaults.string(forKey: "k") == "sys")
        #expect(defaults.objectIsForced(forKey: "k") && defaults.objectIsForced(forKey: "k", inDomain: Self.name))
        #expect(
            !defaults.isWritable(forKey: "k") && defaults.isWritable(forKey: "own")
                && defaults.isWritable(forKey: "def"))
        #expect(
            !defaults.objectIsForced(forKey: "own") && !defaults.objectIsForced(forKey: "def")
                && !defaults.objectIsForced(forKey: "nothing"))
        #expect(
            !defaults.objectIsForced(forKey: "k", inDomain: "com.example.other") && !defaults.isWritable(forKey: ""))

        defaults.set("mine", forKey: "k")
        #expect(defaults.string(forKey: "k") == "sys", "the refused write shows in the cache")
        let reported = log.all.map(\.kind)
        #expect(reported == [.keyLocked], "set on a locked key must report keyLocked")
        #expect(log.all.first?.message.contains("kvctl --system source com.example.locks k") == true)

        let locked = KVDefaultsError.client(.keyLocked(domain: Self.name, key: "k"))
        #expect(throws: locked) { try defaults.write(.string("x"), forKey: "k") }
        #expect(throws: locked) { try defaults.set("x", for: KVDefaults.Key<String>("k", default: "")) }
        #expect(defaults[KVDefaults.Key<String>("k", default: "")] == "sys")
    }

    /// A lock added while the app runs reaches reads, typed keys, `updates` and
    /// `objectIsForced` at once; unlocking brings the user's own value back. kvd streams both
    /// at the user's revision, unchanged (3).
    @Test func aLockAndItsLiftReachTypedKeysAndUpdates() async throws {
        let kvd = FakeKVD()
        defer { kvd.feed.close() }
        let defaults = kvd.suite(DiagnosticLog())
        let own = KVDefaults.Key<String>("own", default: "none")
        var updates = defaults.updates(own).makeAsyncIterator()
        #expect(await updates.next() == "mine")

        kvd.feed.push(FakeKVD.change("own", "admin", source: "locked"))
        #expect(await updates.next() == "admin")
        #expect(defaults[own] == "admin" && defaults.objectIsForced(forKey: "own"))

        kvd.feed.push(FakeKVD.change("own", "mine", source: nil))
        #expect(await updates.next() == "mine")
        #expect(!defaults.objectIsForced(forKey: "own") && defaults.isWritable(forKey: "own"))

        // a new machine default: a key the cache did not know
        kvd.feed.push(FakeKVD.change("new", "machine", source: "system"))
        #expect(
            eventually { defaults.string(forKey: "new") == "machine" },
            "a system default streamed at the current revision was dropped")
    }

    /// A key the administrator locked without a value (it reads as absent) is not writable and
    /// is forced in its domain (the cache keeps the source of a change with no value); a change
    /// with no value and no source lifts the lock.
    @Test func aKeyLockedWithoutAValueIsNotWritableUntilTheLockLifts() {
        let kvd = FakeKVD()
        defer { kvd.feed.close() }
        let defaults = kvd.suite(DiagnosticLog())
        #expect(defaults.isWritable(forKey: "bare"))

        kvd.feed.push(FakeKVD.change("bare", nil, source: "locked"))
        #expect(eventually { !defaults.isWritable(forKey: "bare") }, "a lock without a value was not seen")
        #expect(defaults.objectIsForced(forKey: "bare", inDomain: Self.name))
        #expect(defaults.object(forKey: "bare") == nil, "a lock without a value reads as absent")

        kvd.feed.push(FakeKVD.change("bare", nil, source: nil))
        #expect(eventually { defaults.isWritable(forKey: "bare") }, "the lifted lock stayed")
        #expect(!defaults.objectIsForced(forKey: "bare", inDomain: Self.name))
    }

    /// `objectIsForced(forKey:)` (the search order's answer) sees a lock without a value too:
    /// the key is forced in this suite's domain though nothing is read from it.
    @Test func objectIsForcedForAKeyLockedWithoutAValue() {
        let kvd = FakeKVD()
        defer { kvd.feed.close() }
        let defaults = kvd.suite(DiagnosticLog())
        #expect(!defaults.objectIsForced(forKey: "bare"))

        kvd.feed.push(FakeKVD.change("bare", nil, source: "locked"))
        #expect(eventually { !defaults.isWritable(forKey: "bare") }, "a lock without a value was not seen")
        #expect(defaults.objectIsForced(forKey: "bare"), "a lock without a value is not forced")

        kvd.feed.push(FakeKVD.change("bare", nil, source: nil))
        #expect(eventually { defaults.isWritable(forKey: "bare") }, "the lifted lock stayed")
        #expect(!defaults.objectIsForced(forKey: "bare"))
    }
}

/// The faked user kvd of ``SystemLayerTests``: `Watch` of the test domain streams what the test
/// pushes, other domains are empty, `Set` of `k` fails with `KeyLocked`.
final class FakeKVD: Sendable {
    let feed = Feed()
    let server: FakeVarlinkServer

    static let initial = WatchReply(
        revision: 3,
        changes: [
            Change(key: key("k"), value: .string("sys")), Change(key: key("own"), value: .string("mine")),
            Change(key: key("def"), value: .integer(5)),
        ],
        initial: true, sources: [key("k"): .locked, key("def"): .system]
    ).reply

    init() {
        let feed = feed
        server = FakeVarlinkServer(prefix: "kvclient-layers") { call, send in
            Self.serve(call, feed, send)
        }
    }

    func suite(_ log: DiagnosticLog) -> KVDefaults {
        let configuration = KVDefaults.Configuration(
            socketPath: server.path, environment: [:], arguments: [], autostart: false,
            diagnostics: { diagnostic in log.entries.withLock { $0.append(diagnostic) } })
        return KVDefaults(suiteName: SystemLayerTests.name, configuration: configuration)!
    }

    /// One streamed change at the unchanged revision 3; `source` nil for the user's value. With
    /// no `value`: a key removed, or (source "locked") locked without a value.
    static func change(_ name: String, _ value: String?, source: String?) -> VarlinkReply {
        var change: [String: JSON] = ["key": .string(name)]
        if let value { change["value"] = .string(value) }
        if let source { change["source"] = .string(source) }
        return VarlinkReply(
            parameters: ["revision": .integer(3), "changes": .array([.object(change)]), "initial": .bool(false)],
            continues: true)
    }

    private static func serve(_ call: VarlinkCall, _ feed: Feed, _ send: (VarlinkReply) -> Bool) -> Bool {
        let isTestDomain = call.parameters["domain"] == .string(SystemLayerTests.name)
        switch call.method {
        case "io.kvd.Defaults.Watch" where isTestDomain:
            guard send(initial) else { return false }
            while let reply = feed.next() { guard send(reply) else { return false } }
            return false
        case "io.kvd.Defaults.Watch":
            return send(WatchReply(revision: 3, changes: [], initial: true).reply)
        case "io.kvd.Defaults.Set" where call.parameters["key"] == .string("k"):
            return send(
                .failure(
                    DefaultsInterface.Error.keyLocked, ["domain": .string(SystemLayerTests.name), "key": .string("k")]))
        case "io.kvd.Defaults.Get" where call.parameters["key"] == .string("k"):
            return send(
                VarlinkReply(parameters: [
                    "value": .string("sys"), "revision": .integer(0), "source": .string("locked"),
                ]))
        default:
            return send(.failure(ServiceInterface.Error.methodNotImplemented, ["method": .string(call.method)]))
        }
    }

    /// Replies the test pushes into the open watch; `next` blocks until one comes or the feed
    /// is closed.
    final class Feed: @unchecked Sendable {
        private let condition = NSCondition()
        private var queue: [VarlinkReply] = []
        private var closed = false

        func push(_ reply: VarlinkReply) {
            condition.lock()
            queue.append(reply)
            condition.signal()
            condition.unlock()
        }

        func close() {
            condition.lock()
            closed = true
            condition.broadcast()
            condition.unlock()
        }

        func next() -> VarlinkReply? {
            condition.lock()
            defer { condition.unlock() }
            while queue.isEmpty && !closed { condition.wait() }
            return queue.isEmpty ? nil : queue.removeFirst()
        }
    }
}
