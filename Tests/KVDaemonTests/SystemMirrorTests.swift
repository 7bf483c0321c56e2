import Dispatch
import Glibc
import KVProtocol
import KVSystem
import KVTestSupport
import KVValues
import Synchronization
import Testing

@testable import KVDaemon

/// A user's kvd following a (fake) system instance through KVConnection and its reconnecting
/// stream: each connection's snapshot reaches the loop, a dropped connection is followed again, and
/// an instance that refuses `Mirror` leaves the layer alone.
@Suite struct SystemMirrorTests {
    static let domain = try! Domain(validating: "com.example.mirrored")
    static let key = try! Key(validating: "k")

    /// A private folder in /tmp for the fake instance's socket (the mirror refuses a folder
    /// others may write, such as /tmp itself); removed with the test.
    final class Folder {
        let prefix: String
        private let path: String

        init() {
            var template = Array("/tmp/kvd-mirror-XXXXXX".utf8CString)
            path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            prefix = String(path.dropFirst("/tmp/".count)) + "/instance"
        }

        deinit {
            if let entries = opendir(path) {
                while let entry = readdir(entries) {
                    var name = entry.pointee.d_name
                    let text = withUnsafeBytes(of: &name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if text != "." && text != ".." { unlink(path + "/" + text) }
                }
                closedir(entries)
            }
            rmdir(path)
        }
    }

    /// The updates the loop is woken for, gathered until `done` says they are enough.
    final class Loop: Sendable {
        let woken = DispatchSemaphore(value: 0)

        func gather(from mirror: SystemMirror, until done: ([SystemLayer.Update]) -> Bool) -> [SystemLayer.Update] {
            var updates: [SystemLayer.Update] = []
            while !done(updates) {
                guard woken.wait(timeout: .now() + .seconds(30)) == .success else { break }
                updates += mirror.takeUpdates()
            }
            return updates
        }
    }

    private static func snapshot(_ value: Int64, revision: Int64) -> [VarlinkReply] {
        [
            RequestHandler.mirrorReply(
                revision: revision, domain: domain, changes: [Change(key: key, value: .integer(value))], synced: false),
            RequestHandler.mirrorReply(revision: revision, domain: nil, changes: [], synced: true),
        ]
    }

    @Test func eachConnectionsSnapshotReachesTheLoopAndADroppedConnectionIsFollowedAgain() {
        let folder = Folder()
        let connections = Mutex(0)
        let instance = FakeVarlinkServer(prefix: folder.prefix) { call, send in
            guard call.method == DefaultsRequest.mirror(dconfProfile: nil).call.method else { return false }
            let number = connections.withLock { count in
                count += 1
                return Int64(count)
            }
            for reply in Self.snapshot(number, revision: number) { _ = send(reply) }
            return false  // the instance goes away after each snapshot
        }
        let loop = Loop()
        let mirror = SystemMirror(
            path: instance.path, system: LinuxSystem(), log: Logger(toJournal: false), wake: { loop.woken.signal() })
        mirror.start(waitingAtMost: .seconds(30))
        let updates = loop.gather(from: mirror) { $0.count >= 2 }
        mirror.stop()
        guard updates.count >= 2, case .snapshot(let first, _, 1) = updates[0],
            case .snapshot(let second, _, 2) = updates[1]
        else {
            Issue.record("expected a snapshot from each connection, got \(updates)")
            return
        }
        #expect(first == [Self.domain: [Self.key: .integer(1)]] && second == [Self.domain: [Self.key: .integer(2)]])
    }

    @Test func anInstanceThatRefusesMirrorLeavesTheLayerAloneAndIsAskedAgain() {
        let folder = Folder()
        let calls = DispatchSemaphore(value: 0)
        let instance = FakeVarlinkServer(prefix: folder.prefix) { _ in
            calls.signal()
            return [.failure(ServiceInterface.Error.methodNotFound, ["method": .string("io.kvd.System.Mirror")])]
        }
        let mirror = SystemMirror(path: instance.path, system: LinuxSystem(), log: Logger(toJournal: false), wake: {})
        mirror.start(waitingAtMost: .seconds(30))
        #expect(calls.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(calls.wait(timeout: .now() + .seconds(30)) == .success, "the mirror did not ask again")
        mirror.stop()
        #expect(mirror.takeUpdates().isEmpty)
        #expect(mirror.phase == .away)
    }

    /// A first login (no saved layer): while the system instance answers but its snapshot has
    /// not arrived, a write is refused (it might be to a key the site locks), never taken; once
    /// the snapshot is applied, writes go as its locks say.
    @Test func writesAreRefusedUntilTheFirstSnapshotWhileTheSystemInstanceAnswers() throws {
        let folder = Folder()
        let release = DispatchSemaphore(value: 0)
        let instance = FakeVarlinkServer(prefix: folder.prefix) { call, send in
            guard call.method == DefaultsRequest.mirror(dconfProfile: nil).call.method else { return false }
            release.wait()
            let lock = Change(key: Self.key, value: .bool(true))
            _ = send(
                RequestHandler.mirrorReply(
                    revision: 1, domain: Domain.locks(of: Self.domain), changes: [lock], synced: false))
            _ = send(RequestHandler.mirrorReply(revision: 1, domain: nil, changes: [], synced: true))
            return true
        }
        let loop = Loop()
        let mirror = SystemMirror(
            path: instance.path, system: LinuxSystem(), log: Logger(toJournal: false),
            firstSyncWait: .milliseconds(100), wake: { loop.woken.signal() })
        let follower = SystemFollower(mirror: mirror)
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store, follower: follower)
        follower.start(waitingAtMost: .milliseconds(100))
        let deadline = ContinuousClock.now + .seconds(30)
        while !mirror.isConnected && ContinuousClock.now < deadline { usleep(10_000) }
        let other = try Key(validating: "other")
        guard case .reply(let refused) = handler.handle(.set(Self.domain, other, .integer(1), ifRevision: nil)) else {
            Issue.record("a write before the first snapshot was taken")
            release.signal()
            return
        }
        #expect(refused.error == DefaultsInterface.Error.storageFailure)
        release.signal()
        follower.apply(loop.gather(from: mirror) { !$0.isEmpty })
        mirror.stop()
        guard case .commit = handler.handle(.set(Self.domain, other, .integer(1), ifRevision: nil)) else {
            Issue.record("a write to a key not locked, after the first snapshot, was refused")
            return
        }
        guard case .reply(let locked) = handler.handle(.set(Self.domain, Self.key, .integer(1), ifRevision: nil)) else {
            Issue.record("a write to a locked key was taken")
            return
        }
        #expect(locked.error == DefaultsInterface.Error.keyLocked)
    }

    /// First login to a large site (attack/38b-report.md, finding 3): the system instance takes
    /// the connection but its layer is slow to come. kvd starts serving after a short wait
    /// (not the start's whole timeout): a read is answered from the user's own values, a write
    /// is refused until the layer arrives.
    @Test func readsAreServedSoonWhileTheFirstLayerIsOnItsWay() throws {
        let folder = Folder()
        let release = DispatchSemaphore(value: 0)
        let instance = FakeVarlinkServer(prefix: folder.prefix) { call, send in
            guard call.method == DefaultsRequest.mirror(dconfProfile: nil).call.method else { return false }
            release.wait()
            _ = send(RequestHandler.mirrorReply(revision: 1, domain: nil, changes: [], synced: true))
            return true
        }
        let mirror = SystemMirror(path: instance.path, system: LinuxSystem(), log: Logger(toJournal: false), wake: {})
        let follower = SystemFollower(mirror: mirror)
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store, follower: follower)
        let started = ContinuousClock.now
        follower.start(waitingAtMost: .seconds(6))
        let waited = ContinuousClock.now - started
        defer {
            release.signal()
            mirror.stop()
        }
        #expect(waited < .seconds(3), "kvd answered nothing for \(waited) while the layer was on its way")
        #expect(mirror.isConnected && follower.awaitsFirstLayer)
        guard case .reply(let read) = handler.handle(.get(Self.domain, Self.key)) else {
            Issue.record("a read was not answered at once")
            return
        }
        #expect(read.error != DefaultsInterface.Error.storageFailure, "\(read)")
        guard case .reply(let refused) = handler.handle(.set(Self.domain, Self.key, .integer(1), ifRevision: nil))
        else {
            Issue.record("a write before the first layer was taken")
            return
        }
        #expect(refused.error == DefaultsInterface.Error.storageFailure)
    }

    /// A user's kvd with no system instance at all serves writes at once.
    @Test func withNoSystemInstanceWritesGoAtOnce() throws {
        let folder = Folder()
        let mirror = SystemMirror(
            path: "/tmp/" + folder.prefix + ".sock", system: LinuxSystem(), log: Logger(toJournal: false), wake: {})
        let follower = SystemFollower(mirror: mirror)
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store, follower: follower)
        let started = ContinuousClock.now
        follower.start(waitingAtMost: .seconds(30))
        #expect(ContinuousClock.now - started < .seconds(5), "it waited for nothing")
        guard case .commit = handler.handle(.set(Self.domain, Self.key, .integer(1), ifRevision: nil)) else {
            Issue.record("a write was refused with no system instance")
            mirror.stop()
            return
        }
        mirror.stop()
    }
}
