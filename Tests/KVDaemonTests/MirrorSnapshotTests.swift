import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// The system instance's `Mirror` snapshots are made once per caller profile and state and
/// shared (attack/38b-report.md, findings 1 and 2: a flood of `Mirror` calls stalled the loop,
/// each building the caller's whole layer).
@Suite struct MirrorSnapshotTests {
    /// A store of `domains` domains of 50 keys each.
    static func filled(_ domains: Int) throws -> RequestHandlerTests.TempStore {
        let temp = try RequestHandlerTests.TempStore()
        for index in 0..<domains {
            let changes = try (0..<50).map { Change(key: try Key(validating: "k\($0)"), value: .string("v\($0)")) }
            _ = try temp.store.commit(try Domain(validating: "org.ex.d\(index)"), .apply(changes, ifRevision: nil))
        }
        return temp
    }

    /// Many `Mirror` calls of callers with the same profile (other uids, no drop-in file for
    /// them) cost about one snapshot, not one each: answering 40 more and making their first
    /// pieces takes less than 10 times the first one's time (each built whole and encoded
    /// before: about 40 times); their pieces are the same bytes, encoded once.
    @Test func manyMirrorCallsCostOneSnapshot() throws {
        let temp = try Self.filled(400)
        let handler = RequestHandler(store: temp.store, isSystem: true)
        let revision = temp.store.revision
        let clock = ContinuousClock()
        var first: [ReplyStream.Piece?] = []
        let once = clock.measure { first.append(handler.initialMirrorStream(revision: revision, for: nil).nextPiece()) }
        let many = clock.measure {
            for uid in 0..<40 {
                let peer = DropInPeer(uid: UInt32(1000 + uid), gids: [UInt32(1000 + uid)])
                first.append(handler.initialMirrorStream(revision: revision, for: peer).nextPiece())
            }
        }
        #expect(many < once * 10, "40 Mirror calls took \(many), one \(once)")
        guard case .shared(let one)? = first.first, case .shared(let last)? = first.last else {
            Issue.record("the pieces are not shared")
            return
        }
        #expect(one === last)
    }

    /// A snapshot is shared only while the store is unchanged: a commit makes the next one
    /// anew, with the new value; at most a few profiles are kept.
    @Test func aSnapshotIsMadeAnewWhenTheStoreChanges() throws {
        let temp = try Self.filled(2)
        let handler = RequestHandler(store: temp.store, isSystem: true)
        _ = handler.initialMirrorStream(revision: temp.store.revision)
        _ = handler.initialMirrorStream(revision: temp.store.revision)
        #expect(handler.mirrorSnapshots.made == 1)
        let domain = try Domain(validating: "org.ex.d0")
        let key = try Key(validating: "k0")
        _ = try temp.store.commit(domain, .set(key, .string("new"), ifRevision: nil))
        let pieces = ReplyBudgetTests.pieces(of: handler.initialMirrorStream(revision: temp.store.revision))
        #expect(handler.mirrorSnapshots.made == 2)
        var reader = MirrorReader()
        var updates: [SystemLayer.Update] = []
        for piece in pieces { updates += try reader.read(try VarlinkReply(message: piece.encoded().dropLast())) }
        guard case .snapshot(let values, _, _)? = updates.first else {
            Issue.record("no snapshot")
            return
        }
        #expect(values[domain]?[key] == .string("new"))
    }
}
