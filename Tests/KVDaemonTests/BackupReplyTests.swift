import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// `Backup`'s replies: made piece by piece as the client reads them, a domain larger than one piece
/// split across several, all at the revision of the call, and the client's next call answered after
/// the last piece.
@Suite struct BackupReplyTests {
    static let backup = #"{"method":"io.kvd.Defaults.Backup","more":true}"#
    static let domains = #"{"method":"io.kvd.Defaults.Domains"}"#

    @Test func backupPiecesAreMadeAsTheClientReadsThemAtOneRevision() throws {
        let loop = try EventLoopTests.Loop()
        let mib = 1 << 20
        let (big, small) = (try Domain(validating: "big"), try Domain(validating: "small"))
        for index in 0..<12 {
            _ = try loop.store.commit(
                big,
                .set(try Key(validating: "k\(index)"), .string(String(repeating: "a", count: mib)), ifRevision: nil))
        }
        for index in 0..<4 {
            _ = try loop.store.commit(
                small, .set(try Key(validating: "k\(index)"), .integer(Int64(index)), ifRevision: nil))
        }
        let revision = loop.store.revision
        let client = loop.connect()
        client.send(Self.backup, Self.domains)
        loop.run("the backup did not begin") { loop.server.table.streams.count == 1 }
        for _ in 0..<20 { _ = try loop.server.runPass(maxWait: 1) }
        let held = loop.server.table.byID.values.map(\.pendingOutput).max() ?? 0
        #expect(held <= ReplyStream.lowWater + (2 << 20), "a client that does not read holds \(held) bytes")
        #expect(loop.server.table.streams.count == 1, "the pieces wait for the client to read")
        // Written while the backup streams: not in it.
        _ = try loop.store.commit(big, .set(try Key(validating: "k11"), .string("later"), ifRevision: nil))
        _ = try loop.store.commit(small, .delete(try Key(validating: "k0")))

        let expected = 12 + 1 + 1 + 1  // a piece per big value, one for small, the last, Domains
        loop.run("the backup did not end", passes: 2000) {
            _ = client.isClosed  // reads what arrived
            return loop.server.table.streams.isEmpty
                && loop.server.table.byID.values.allSatisfy { $0.pendingOutput == 0 }
        }
        loop.run("the call after the backup was not answered") { client.replies.count == expected }
        let replies = try client.replies.map { try VarlinkReply(message: ArraySlice($0.utf8)) }
        #expect(replies.count == expected)
        guard replies.count == expected else { return }
        let pieces = replies.prefix(expected - 1)
        #expect(pieces.allSatisfy { $0.parameters["revision"] == .integer(revision) })
        #expect(
            pieces.dropLast().allSatisfy { $0.continues } && !pieces.last!.continues,
            "every piece but the last says more follow")
        #expect(pieces.last!.parameters["domain"] == nil)
        var values: [String: [String: JSON]] = [:]
        for piece in pieces.dropLast() {
            guard case .string(let domain)? = piece.parameters["domain"],
                case .object(let members)? = piece.parameters["values"]
            else {
                Issue.record("a piece without a domain or values")
                continue
            }
            values[domain, default: [:]].merge(members) { _, new in new }
        }
        #expect(
            values["big"]?.count == 12 && values["big"]?["k11"] == .string(String(repeating: "a", count: mib)),
            "the state at the call's revision")
        #expect(values["small"] == ["k0": .integer(0), "k1": .integer(1), "k2": .integer(2), "k3": .integer(3)])
        #expect(
            replies.last!.parameters["domains"] != nil,
            "the next call is answered after the last piece: \(replies.last!.parameters)")
        #expect(loop.server.table.streams.isEmpty)
    }
}
