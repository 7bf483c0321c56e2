import Foundation
import KVFleet
import KVProtocol
import KVStorage
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVDaemon

/// The system instance's side of the fleet: how the reflector's updates become group commits
/// of fleet domains, lock domains and the etcd revision reached (the reflector and the etcd
/// client are tested in KVFleetTests).
@Suite struct FleetMirrorTests {
    /// An etcd that is never called: these tests hand the mirror its updates themselves.
    struct NoEtcd: EtcdAPI {
        func range(from key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) throws(EtcdError) -> EtcdRangePage {
            throw .unreachable("test")
        }
        func commit(_ transaction: EtcdTransaction) throws(EtcdError) -> (succeeded: Bool, revision: Int64) {
            throw .unreachable("test")
        }
        func watch(
            from key: [UInt8], end: [UInt8], startRevision: Int64, progressInterval: Duration,
            receive: (EtcdWatchMessage) -> Bool
        ) throws(EtcdError) {
            throw .unreachable("test")
        }
    }

    static func domain(_ name: String) -> Domain { try! Domain(validating: name) }
    static func key(_ name: String) -> Key { try! Key(validating: name) }

    /// What the mirror announced to the loop.
    final class Announced: Sendable {
        let commits = Mutex<[Commit]>([])
    }

    final class Scene {
        let folder: String
        let layout: FleetLayout
        let announced = Announced()
        var store: Store
        var mirror: FleetMirror

        init() throws {
            var template = Array("/tmp/kvd-fleet-XXXXXX".utf8CString)
            folder = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            layout = try FleetLayout(domainPatterns: ["com.corp.*"])
            store = try Store(directory: folder + "/state")
            mirror = Self.mirror(store, layout, announced)
        }

        static func mirror(_ store: Store, _ layout: FleetLayout, _ announced: Announced) -> FleetMirror {
            FleetMirror(
                store: store, reflector: FleetReflector(etcd: NoEtcd(), layout: layout), layout: layout,
                log: Logger(toJournal: false, system: LinuxSystem()),
                announce: { commit in announced.commits.withLock { $0.append(commit) } })
        }

        func reopen() throws {
            store.close()
            store = try Store(directory: folder + "/state")
            mirror = Self.mirror(store, layout, announced)
        }

        deinit {
            store.close()
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    @Test func aListingAndTheEventsAfterItBecomeGroupCommitsWithTheirEtcdRevision() throws {
        let scene = try Scene()
        let (app, old, mine) = (Self.domain("com.corp.app"), Self.domain("com.corp.old"), Self.domain("org.mine"))
        _ = try scene.store.commit(mine, .set(Self.key("k"), .string("local"), ifRevision: nil))
        _ = try scene.store.commit(old, .set(Self.key("stale"), .integer(1), ifRevision: nil))
        let snapshot = FleetSnapshot(
            values: [app: [Self.key("home"): .string("https://intranet"), Self.key("n"): .integer(3)]],
            locks: [app: [Self.key("home")]])
        try scene.mirror.commit(.replace(snapshot, revision: 5))
        #expect(scene.mirror.appliedRevision == 5)
        #expect(scene.store.get(app, Self.key("home")) == .value(.string("https://intranet"), revision: 3))
        #expect(
            scene.store.get(Domain.locks(of: app), Self.key("home")) == .value(.bool(true), revision: 3),
            "values, locks and the etcd revision in one commit")
        #expect(scene.store.list(old) == nil, "a fleet domain etcd no longer has is emptied")
        #expect(
            scene.store.get(mine, Self.key("k")) == .value(.string("local"), revision: 1),
            "a domain outside the fleet is left alone")
        #expect(
            Set(scene.announced.commits.withLock { $0 }.map(\.domain)) == [app, Domain.locks(of: app), old],
            "watchers hear of every fleet commit, not of -fleet")

        try scene.mirror.commit(
            .apply(
                [.remove(app, Self.key("n")), .unlock(app, Self.key("home")), .remove(app, Self.key("never"))],
                revision: 7))
        #expect(scene.store.get(app, Self.key("n")) == .missing && scene.store.list(Domain.locks(of: app)) == nil)
        try scene.reopen()
        #expect(scene.mirror.appliedRevision == 7, "the etcd revision reached survives a restart")
        let again = FleetSnapshot(values: [app: [Self.key("home"): .string("https://intranet")]])
        let before = scene.store.revision
        try scene.mirror.commit(.replace(again, revision: 9))
        #expect(
            scene.store.revision == before + 1
                && scene.store.get(app, Self.key("home")) == .value(.string("https://intranet"), revision: 3),
            "a listing that changes nothing rewrites no value (only the etcd revision moves)")
    }

    @Test func theSystemInstanceSendsWritesToFleetDomainsToEtcd() throws {
        let scene = try Scene()
        let handler = RequestHandler(store: scene.store, isSystem: true, fleet: scene.layout)
        let fleetDomain = Self.domain("com.corp.app")
        for request in [
            DefaultsRequest.set(fleetDomain, Self.key("k"), .integer(1), ifRevision: nil), .delete(fleetDomain, nil),
            .lock(fleetDomain, Self.key("k")),
        ] {
            guard case .fleetWrite(let change) = handler.handle(request), change.domain == fleetDomain else {
                Issue.record("\(request) was not sent to etcd")
                continue
            }
        }
        guard case .commit = handler.handle(.set(Self.domain("org.local"), Self.key("k"), .integer(1), ifRevision: nil))
        else {
            Issue.record("a domain outside the fleet was not committed locally")
            return
        }
    }
}
