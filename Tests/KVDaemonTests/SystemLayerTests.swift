import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// The system layer's rules on their own: how the layers combine, how a user's kvd reads the
/// system instance's `Mirror` stream, and who the system instance lets write (decided at accept
/// from the peer's credentials, which the test pretends).
@Suite struct SystemLayerTests {
    static func key(_ name: String) -> Key { try! Key(validating: name) }
    static func domain(_ name: String) -> Domain { try! Domain(validating: name) }

    @Test func aLockedSystemValueBeatsTheUsersWhichBeatsTheSystemDefault() {
        var layer = SystemLayer.DomainLayer()
        layer.set(Self.key("default"), .string("system"))
        layer.set(Self.key("forced"), .string("admin's"))
        layer.locks = [Self.key("forced"), Self.key("lockedEmpty")]
        #expect(
            layer.combine(Self.key("default"), user: nil) == LayeredValue(value: .string("system"), source: .system))
        #expect(
            layer.combine(Self.key("default"), user: .integer(1)) == LayeredValue(value: .integer(1), source: .user))
        #expect(
            layer.combine(Self.key("forced"), user: .integer(1))
                == LayeredValue(value: .string("admin's"), source: .locked))
        #expect(
            layer.combine(Self.key("lockedEmpty"), user: .integer(1)) == nil,
            "a lock with no system value hides the user's")
        #expect(layer.combine(Self.key("mine"), user: .bool(true)) == LayeredValue(value: .bool(true), source: .user))

        let user: [Key: Value] = [
            Self.key("default"): .integer(1), Self.key("forced"): .integer(2), Self.key("lockedEmpty"): .integer(3),
            Self.key("mine"): .integer(4),
        ]
        let (values, sources) = layer.combine(user: user)
        #expect(
            values == [
                Self.key("default"): .integer(1), Self.key("forced"): .string("admin's"), Self.key("mine"): .integer(4),
            ])
        // A lock with no system value is named too (it has no value, and is not writable).
        #expect(sources == [Self.key("forced"): .locked, Self.key("lockedEmpty"): .locked])
        #expect(
            layer.combine(user: [:]).sources == [
                Self.key("default"): .system, Self.key("forced"): .locked, Self.key("lockedEmpty"): .locked,
            ])
    }

    @Test func snapshotsReplaceTheLayerAndNameEveryKeyTheyTouch() {
        var layer = SystemLayer()
        let a = Self.domain("com.a")
        let b = Self.domain("com.b")
        let first = SystemLayer.Update.snapshot(
            [a: [Self.key("x"): .integer(1)]], locks: [b: [Self.key("y")]], revision: 1)
        layer.apply(first)
        #expect(layer.layer(a)?.values == [Self.key("x"): .integer(1)] && layer.layer(b)?.locks == [Self.key("y")])
        let second = SystemLayer.Update.snapshot([b: [Self.key("z"): .bool(true)]], locks: [:], revision: 2)
        #expect(layer.touchedKeys(by: second) == [a: [Self.key("x")], b: [Self.key("y"), Self.key("z")]])
        layer.apply(second)
        #expect(layer.layer(a) == nil, "a domain the new snapshot lacks is gone")
        #expect(layer.layer(b)?.locks == [] && layer.layer(b)?.values == [Self.key("z"): .bool(true)])
        layer.apply(.locks(b, [(Self.key("z"), true)], revision: 3))
        layer.apply(.values(b, [Change(key: Self.key("z"), value: nil)], revision: 4))
        #expect(layer.layer(b)?.locks == [Self.key("z")] && layer.layer(b)?.values == [:])
        layer.apply(.locks(b, [(Self.key("z"), false)], revision: 5))
        #expect(layer.isEmpty, "an empty domain layer is dropped")
        #expect(layer.revision == 5, "the layer is at the revision of its last change")
    }

    @Test func theMirrorStreamIsGatheredIntoOneSnapshotThenReadChangeByChange() throws {
        var reader = MirrorReader()
        let a = Self.domain("com.a")
        let values = RequestHandler.mirrorReply(
            revision: 5, domain: a, changes: [Change(key: Self.key("k"), value: .integer(1))], synced: false)
        let locks = RequestHandler.mirrorReply(
            revision: 5, domain: Domain.locks(of: a), changes: [Change(key: Self.key("k"), value: .bool(true))],
            synced: false)
        #expect(try reader.read(values).isEmpty && reader.read(locks).isEmpty && !reader.synced)
        let end = try reader.read(RequestHandler.mirrorReply(revision: 5, domain: nil, changes: [], synced: true))
        guard case .snapshot(let snapshot, let locked, 5)? = end.first, end.count == 1 else {
            Issue.record("expected one snapshot, got \(end)")
            return
        }
        #expect(snapshot == [a: [Self.key("k"): .integer(1)]] && locked == [a: [Self.key("k")]])
        let unlock = try reader.read(
            RequestHandler.mirrorReply(
                revision: 6, domain: Domain.locks(of: a), changes: [Change(key: Self.key("k"), value: nil)],
                synced: true))
        guard case .locks(a, let changes, 6)? = unlock.first, changes.count == 1, changes[0].locked == false else {
            Issue.record("expected an unlock, got \(unlock)")
            return
        }
        #expect(throws: MirrorReader.Failure.self) { try reader.read(.failure(ServiceInterface.Error.methodNotFound)) }
        let planted = VarlinkReply(
            parameters: [
                "revision": .integer(7), "domain": .string("../etc"), "changes": .array([]), "synced": .bool(true),
            ], continues: true)
        #expect(throws: MirrorReader.Failure.self) { try reader.read(planted) }
    }

    /// The layer a user's kvd saves in its state folder comes back as it was, and a file damaged
    /// anywhere (a flipped byte, a cut end, bytes added) is refused whole, saying why, never read
    /// in part.
    @Test func theSavedSystemLayerComesBackWholeAndDamageIsRefused() throws {
        let temp = try RequestHandlerTests.TempStore()
        let file = SystemLayerFile(directory: temp.path)
        #expect(try file.load() == nil, "no file: no layer")
        let a = Self.domain("com.a")
        let b = Self.domain("com.b")
        let many = Dictionary(
            uniqueKeysWithValues: (0..<3).map {
                (Self.key("big\($0)"), Value.string(String(repeating: "v", count: 700_000)))
            })
        let layer = SavedSystemLayer(
            revision: 42,
            values: [a: many.merging([Self.key("n"): .integer(1)]) { $1 }, b: [Self.key("d"): .bool(false)]],
            locks: [a: [Self.key("n"), Self.key("gone")]])
        try file.save(layer)
        #expect(try file.load() == layer)
        let bytes = try Self.contents(of: file.path)
        #expect(bytes.split(separator: UInt8(ascii: "\n")).count > 3, "values are split into lines of about 1 MiB")
        var flipped = bytes
        flipped[bytes.count / 2] ^= 1
        for damaged in [
            flipped, Array(bytes.dropLast(10)), bytes + Array("x".utf8),
            Array(bytes.prefix(through: bytes.firstIndex(of: UInt8(ascii: "\n"))!)),
        ] {
            try Self.write(damaged, to: file.path)
            #expect(throws: StorageError.self) { try file.load() }
        }
    }

    static func contents(of path: String) throws -> [UInt8] {
        guard let stream = fopen(path, "rb") else { throw TestFailure("cannot open \(path)") }
        defer { fclose(stream) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = fread(&buffer, 1, buffer.count, stream)
            if count == 0 { return bytes }
            bytes += buffer[..<count]
        }
    }

    static func write(_ bytes: [UInt8], to path: String) throws {
        guard let stream = fopen(path, "wb") else { throw TestFailure("cannot open \(path)") }
        defer { fclose(stream) }
        guard fwrite(bytes, 1, bytes.count, stream) == bytes.count else { throw TestFailure("cannot write \(path)") }
    }

    // MARK: the system instance: who may write

    static let setCall = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.corp","key":"k","value":"v"}}"#
    static let lockCall = #"{"method":"io.kvd.System.Lock","parameters":{"domain":"com.corp","key":"k"}}"#
    static let getCall = #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.corp","key":"k"}}"#
    static let locksCall = #"{"method":"io.kvd.System.Locks","parameters":{}}"#

    static func systemLoop(maxPerUID: Int = 64) throws -> EventLoopTests.Loop {
        var policy = DaemonOptions.SystemPolicy()
        policy.maxConnectionsPerUID = maxPerUID
        return try EventLoopTests.Loop(role: .system(policy))
    }

    @Test func aCallerOutsideTheAdminGroupMayReadButNotWrite() throws {
        let loop = try Self.systemLoop()
        loop.system.pretendPeers(
            [PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [100])], groups: ["kvd-admin": 4242])
        let user = loop.connect()
        user.send(Self.setCall, Self.lockCall, Self.getCall)
        loop.run("the non-admin's calls were not answered") { user.replies.count == 3 }
        #expect(
            user.replies[0] == #"{"parameters":{},"error":"org.varlink.service.PermissionDenied"}"#, "\(user.replies)")
        #expect(user.replies[1] == user.replies[0])
        #expect(user.replies[2].contains("io.kvd.Defaults.NotFound"), "nothing was written: \(user.replies[2])")
        #expect(loop.store.revision == 0)
    }

    @Test func rootAndAdminGroupMembersMayWrite() throws {
        let loop = try Self.systemLoop()
        loop.system.pretendPeers(
            [
                PeerCredentials(pid: 1, uid: 1001, gid: 1001, groups: [4242]),
                PeerCredentials(pid: 2, uid: 0, gid: 0, groups: []),
            ], groups: ["kvd-admin": 4242])
        let member = loop.connect()
        member.send(Self.setCall, Self.lockCall)
        loop.run("the member's writes were not answered") { member.replies.count == 2 }
        #expect(member.replies == [#"{"parameters":{"revision":1}}"#, #"{"parameters":{"revision":2}}"#])
        let root = loop.connect()
        root.send(Self.getCall, Self.locksCall)
        loop.run("root's reads were not answered") { root.replies.count == 2 }
        #expect(root.replies[0] == #"{"parameters":{"value":"v","revision":1,"source":"locked"}}"#, "\(root.replies)")
        let locks = try VarlinkReply(message: ArraySlice(root.replies[1].utf8))
        #expect(
            locks.parameters["locks"] == .array([.object(["domain": .string("com.corp"), "key": .string("k")])]),
            "\(root.replies[1])")
        #expect(loop.store.domains().map(\.name) == ["-locks.com.corp", "com.corp"])
    }

    @Test func oneUserPastTheCapIsRefusedWhileOthersAreServed() throws {
        let loop = try Self.systemLoop(maxPerUID: 2)
        let user = PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [])
        loop.system.pretendPeers([user, user, user, PeerCredentials(pid: 2, uid: 1002, gid: 1002, groups: [])])
        let held = [loop.connect(), loop.connect()]
        let refused = loop.connect()
        let other = loop.connect()
        loop.run("the third connection of uid 1000 was not refused") { refused.isClosed }
        other.send(Self.locksCall)
        loop.run("another user was not served") { other.replies.count == 1 }
        for client in held { client.send(Self.locksCall) }
        loop.run("the user's first connections were not served") { held.allSatisfy { $0.replies.count == 1 } }
        #expect(loop.server.table.perUID == [1000: 2, 1002: 1])
        held[0].disconnect()
        loop.run("a closed connection was not given back to its uid") { loop.server.table.perUID[1000] == 1 }
    }

    /// A connection counts against its uid only once it is served: one that epoll could not
    /// watch (and was closed at once) does not hold one of its user's connections for good.
    @Test func aConnectionEpollCannotWatchCostsItsUserNothing() throws {
        let loop = try Self.systemLoop(maxPerUID: 1)
        let user = PeerCredentials(pid: 1, uid: 1000, gid: 1000, groups: [])
        loop.system.pretendPeers([user, user])
        let unwatched = loop.connect()
        loop.system.inject(.fail(Errno(rawValue: ENOSPC)), on: .epollControl, fd: unwatched.daemonFD)
        loop.run("the connection epoll could not watch was not closed") { unwatched.isClosed }
        let next = loop.connect()
        next.send(Self.locksCall)
        loop.run("the user's next connection was neither served nor refused") {
            next.replies.count == 1 || next.isClosed
        }
        #expect(next.replies.count == 1, "refused: the connection that failed still counts against uid 1000")
        #expect(loop.server.table.perUID == [1000: 1])
    }

    // MARK: options

    @Test func systemOptionsParseAndMistakesSayWhy() throws {
        let parsed = try DaemonOptions.parse(
            [
                "--system", "--admin-group", "wheel", "--etcd", "http://a:2379,https://b:2379", "--fleet-domain",
                "com.corp.*", "--etcd-progress-interval=1.5",
            ],
            environment: ["STATE_DIRECTORY": "/var/lib/kvd"])
        guard case .run(let options) = parsed, case .system(let policy) = options.role else {
            Issue.record("expected the system instance, got \(parsed)")
            return
        }
        #expect(
            options.socketPath == "/run/kvd/system.sock" && options.stateDirectory == "/var/lib/kvd"
                && options.idleExit == nil)
        #expect(
            policy.adminGroup == "wheel" && policy.etcdEndpoints == ["http://a:2379", "https://b:2379"]
                && policy.fleetDomains == ["com.corp.*"])
        #expect(
            policy.etcdProgressInterval == .milliseconds(1500) && policy.maxConnectionsPerUID == 64
                && policy.etcdPrefix == "kvd/")
        for (arguments, message) in [
            (["--admin-group", "x"], "--admin-group is for the system instance: add --system"),
            (
                ["--system", "--no-system-layer"],
                "--no-system-layer is for a user's kvd, not the system instance (--system)"
            ),
            (["--system", "--etcd", "http://a:2379"], "--etcd needs at least one --fleet-domain PATTERN"),
            (["--system", "--fleet-domain", "x"], "--fleet-domain needs --etcd URL"),
            (
                ["--system", "--etcd", "a:2379"],
                "--etcd needs etcd's client URLs, such as http://127.0.0.1:2379 (several: comma-separated)"
            ),
            (
                ["--system", "--max-connections-per-uid", "0"],
                "--max-connections-per-uid needs a whole number from 1 to 1048576, not \"0\""
            ),
            (
                ["--system-socket", "/s", "--no-system-layer"],
                "--system-socket and --no-system-layer exclude each other"
            ),
        ] {
            #expect(throws: UsageError(message)) { try DaemonOptions.parse(arguments, environment: [:]) }
        }
    }
}
