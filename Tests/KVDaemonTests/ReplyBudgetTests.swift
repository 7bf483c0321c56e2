import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// The budget the store keeps per domain matches the replies kvd really sends. A domain filled to
/// exactly ``Limits/domainBytes`` gives a `List` and a first `Watch` reply that a client reads; one
/// byte more is refused.
@Suite struct ReplyBudgetTests {
    @Test func domainFilledToItsBudgetIsListedInOneReplyAndWatchedInPiecesThatFit() throws {
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store)
        let domain = try Domain(validating: "d")
        // Many small keys (the per-key overhead is what a budget can get wrong), some needing escapes.
        let small = (0..<20_000).map {
            Change(
                key: try! Key(validating: "k\($0)\($0 % 7 == 0 ? "\"\n" : "")"), value: .integer(Int64($0) * -1_000_003)
            )
        }
        _ = try temp.store.commit(domain, .apply(small, ifRevision: nil))
        let used = try #require(temp.store.list(domain)).budgetBytes
        let key = try Key(validating: "big")
        let fill = Limits.domainBytes - used - DomainBudget.cost(entryBytes: #""big""#.utf8.count + 2)
        _ = try temp.store.commit(domain, .set(key, .string(String(repeating: "x", count: fill)), ifRevision: nil))
        #expect(temp.store.list(domain)?.budgetBytes == Limits.domainBytes)
        #expect(throws: StorageError.self) {
            try temp.store.commit(domain, .set(key, .string(String(repeating: "x", count: fill + 1)), ifRevision: nil))
        }
        guard case .reply(let list) = handler.handle(.list(domain)) else {
            Issue.record("List must be answered")
            return
        }
        let pieces = Self.pieces(
            of: WatchFanOut(handler: handler).initialWatchStream(domain, nil, revision: .max))
        for reply in [list] + pieces {
            let bytes = reply.encoded().dropLast()
            #expect(bytes.count <= Limits.messageBytes, "\(bytes.count) bytes")
            let read = try VarlinkReply(message: bytes)
            #expect(read.error == nil)
        }
        let watched = pieces.reduce(0) { sum, piece in
            guard case .array(let changes)? = piece.parameters["changes"] else { return sum }
            return sum + changes.count
        }
        #expect(watched == small.count + 1, "the pieces carry every key once")
        #expect(pieces.first?.parameters["initial"] == .bool(true) && pieces.last?.parameters["partial"] == nil)
        #expect(pieces.dropLast().allSatisfy { $0.parameters["partial"] == .bool(true) })
    }

    /// A commit that fills a domain with the longest name to its budget, made by a writer whose
    /// texts take the most they can once escaped: its `WatchAll` and `Watch` replies still fit one
    /// message, the change sent and the writer left out (there is no room for it).
    @Test func aCommitAtTheBudgetIsWatchedWithItsWriterLeftOutWhenThereIsNoRoom() throws {
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store)
        let domain = try Domain(validating: String(repeating: "n", count: Limits.domainNameBytes))
        let key = try Key(validating: "big")
        let fill = Limits.domainBytes - DomainBudget.cost(entryBytes: #""big""#.utf8.count + 2)
        let control = String(repeating: "\u{1}", count: Writer.maxTextBytes)
        let writer = Writer(uid: .max, pid: .max, program: control, app: control)
        let commit = try temp.store.commit(
            domain, .set(key, .string(String(repeating: "x", count: fill)), ifRevision: nil), writer: writer)
        #expect(temp.store.list(domain)?.budgetBytes == Limits.domainBytes)
        var news = WatchFanOut(handler: handler).news(of: commit)
        let watches = [
            ClientConnection.Watch(domain: nil, key: nil, since: 0, prefix: ""),
            ClientConnection.Watch(domain: domain, key: nil, since: 0),
        ]
        for watch in watches {
            guard case .shared(let reply)? = news.reply(for: watch, peer: nil, seesWriter: { _ in true }) else {
                Issue.record("no reply for \(watch)")
                continue
            }
            let bytes = reply.bytes.dropLast()
            #expect(bytes.count <= Limits.messageBytes, "a commit's reply of \(bytes.count) bytes")
            let read = try VarlinkReply(message: bytes)
            #expect(read.parameters["writer"] == nil)
            guard case .array(let changes)? = read.parameters["changes"] else {
                Issue.record("no changes")
                continue
            }
            #expect(changes.count == 1)
        }
    }

    /// Every piece of a stream, made at once.
    static func pieces(of stream: ReplyStream) -> [VarlinkReply] {
        var pieces: [VarlinkReply] = []
        while let piece = stream.nextPiece() {
            switch piece {
            case .own(let reply): pieces.append(reply)
            case .shared(let reply): pieces.append(try! VarlinkReply(message: reply.bytes.dropLast()))
            }
        }
        return pieces
    }

    /// A domain with a 255-byte name filled to exactly its budget by one key is mirrored: each
    /// piece of the `Mirror` snapshot fits one message (the whole snapshot in one reply would be
    /// 16,777,312 bytes, which every user's kvd refuses), and a reader gets the whole value.
    @Test func theLongestDomainNameFilledToItsBudgetIsMirroredInMessagesThatFit() throws {
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store, isSystem: true)
        let domain = try Domain(validating: String(repeating: "n", count: Limits.domainNameBytes))
        let key = try Key(validating: "big")
        let fill = Limits.domainBytes - DomainBudget.cost(entryBytes: #""big""#.utf8.count + 2)
        _ = try temp.store.commit(domain, .set(key, .string(String(repeating: "x", count: fill)), ifRevision: nil))
        #expect(temp.store.list(domain)?.budgetBytes == Limits.domainBytes)
        _ = try temp.store.commit(Domain.locks(of: domain), .set(key, .bool(true), ifRevision: nil))
        var reader = MirrorReader()
        var updates: [SystemLayer.Update] = []
        for piece in Self.pieces(of: handler.initialMirrorStream(revision: temp.store.revision)) {
            let bytes = piece.encoded().dropLast()
            #expect(bytes.count <= Limits.messageBytes, "a Mirror reply of \(bytes.count) bytes")
            updates += try reader.read(try VarlinkReply(message: bytes))
        }
        guard case .snapshot(let values, let locks, _)? = updates.first else {
            Issue.record("no snapshot: \(updates.count) updates")
            return
        }
        #expect(values[domain]?[key] == .string(String(repeating: "x", count: fill)) && locks[domain] == [key])
    }

    /// A system default of 15 MiB and 2 MiB of the user's own values in the same domain, both
    /// accepted: the first `Watch` reply (17.8 MB whole, more than a client reads) comes in pieces
    /// that fit, and `List` says how large the combined domain is (not the user's size).
    @Test func aLayeredDomainLargerThanOneReplyIsWatchedInPiecesAndListSaysWhy() throws {
        let temp = try RequestHandlerTests.TempStore()
        let follower = SystemFollower()
        let handler = RequestHandler(store: temp.store, follower: follower)
        let domain = try Domain(validating: "org.ex.big")
        let system = (0..<15).map {
            (try! Key(validating: "system\($0)"), Value.string(String(repeating: "s", count: 1 << 20)))
        }
        follower.apply([.snapshot([domain: Dictionary(uniqueKeysWithValues: system)], locks: [:], revision: 9)])
        for index in 0..<2 {
            _ = try temp.store.commit(
                domain,
                .set(
                    try Key(validating: "user\(index)"), .string(String(repeating: "u", count: 1 << 20)),
                    ifRevision: nil))
        }
        let pieces = Self.pieces(
            of: WatchFanOut(handler: handler).initialWatchStream(
                domain, nil, revision: temp.store.revision))
        var keys: Set<String> = []
        for piece in pieces {
            let bytes = piece.encoded().dropLast()
            #expect(bytes.count <= Limits.messageBytes)
            let read = try VarlinkReply(message: bytes)
            #expect(read.parameters["systemRevision"] == .integer(9))
            guard case .array(let changes)? = read.parameters["changes"] else { continue }
            for case .object(let change) in changes { if case .string(let name)? = change["key"] { keys.insert(name) } }
        }
        #expect(pieces.count > 1 && keys.count == 17, "\(pieces.count) pieces, \(keys.count) keys")
        guard case .reply(let list) = handler.handle(.list(domain)) else {
            Issue.record("List must be answered")
            return
        }
        #expect(list.error == DefaultsInterface.Error.tooLarge)
        guard case .string(let reason)? = list.parameters["reason"] else {
            Issue.record("no reason: \(list)")
            return
        }
        #expect(
            reason.contains("with the system layer's values") && reason.contains("(\(Limits.domainBytes))"), "\(reason)"
        )
        let said = Int(reason.split(separator: " ")[3]) ?? 0
        #expect(said > Limits.domainBytes && said < 18 << 20, "\(reason)")
    }

    @Test func tooLargeIsTheContractsError() {
        #expect(
            RequestHandler.reply(to: .tooLarge(limit: Limits.messageBytes, reason: "x"))
                == .failure("io.kvd.Defaults.TooLarge", ["limit": .integer(Int64(Limits.messageBytes))]))
        #expect(RequestHandler.reply(to: .invalidValue("nesting")).error == "io.kvd.Defaults.InvalidValue")
    }
}
