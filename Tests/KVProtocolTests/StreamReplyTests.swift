import KVValues
import Testing

@testable import KVProtocol

/// `Watch` and `Mirror` replies are spelled once (``WatchReply``, ``MirrorReply``): what kvd
/// encodes, a reader decodes to the same reply, through the bytes on the wire; a reply missing
/// what the contract requires is refused, saying what is wrong.
@Suite struct StreamReplyTests {
    static func key(_ name: String) -> Key { try! Key(validating: name) }

    static func wire(_ reply: VarlinkReply) throws -> VarlinkReply {
        try VarlinkReply(message: reply.encoded().dropLast())
    }

    @Test func aWatchReplyReadsBackAsItWasSent() throws {
        let sent = WatchReply(
            revision: 12,
            changes: [Change(key: Self.key("a"), value: .integer(1)), Change(key: Self.key("b"), value: nil)],
            initial: true, sources: [Self.key("a"): .locked], systemRevision: 4, partial: true)
        let read = try WatchReply(decoding: try Self.wire(sent.reply))
        #expect(read == sent)
        let plain = WatchReply(revision: 3, changes: [], initial: false)
        let bytes = String(decoding: plain.reply.encoded().dropLast(), as: UTF8.self)
        #expect(!bytes.contains("partial") && !bytes.contains("systemRevision"), "\(bytes)")
        #expect(try WatchReply(decoding: try Self.wire(plain.reply)) == plain)
    }

    /// libkvd reads a `WatchAll` current state's piece at a glance when it is in exactly this
    /// layout (clib/libkvd/current.c, kvd_layout): the members in this order, `changes` last.
    @Test func aCurrentStatePieceIsWrittenInTheLayoutLibkvdReadsAtAGlance() throws {
        let piece = WatchReply(
            revision: 12, changes: [Change(key: Self.key("a"), value: .integer(1))], initial: true, systemRevision: 4,
            partial: true, domain: try Domain(validating: "org.example.app"))
        let bytes = String(decoding: piece.reply.encoded().dropLast(), as: UTF8.self)
        #expect(
            bytes.hasPrefix(
                #"{"parameters":{"domain":"org.example.app","revision":12,"systemRevision":4,"initial":true,"partial":true,"changes":["#
            ), "\(bytes)")
        #expect(bytes.hasSuffix(#"]},"continues":true}"#), "\(bytes)")
        let plain = WatchReply(revision: 12, changes: [], initial: true, partial: true, domain: piece.domain)
        #expect(
            String(decoding: plain.reply.encoded().dropLast(), as: UTF8.self)
                == #"{"parameters":{"domain":"org.example.app","revision":12,"initial":true,"partial":true,"changes":[]},"continues":true}"#
        )
    }

    @Test func aWatchReplyWithoutWhatTheContractRequiresIsRefused() {
        #expect(throws: StreamReplyError.noChanges) { try WatchReply(decoding: VarlinkReply(parameters: [:])) }
        #expect(throws: StreamReplyError.noRevision) {
            try WatchReply(decoding: VarlinkReply(parameters: ["changes": .array([])]))
        }
        #expect(throws: StreamReplyError.invalidSource) {
            try WatchReply(
                decoding: VarlinkReply(parameters: [
                    "revision": .integer(1),
                    "changes": .array([.object(["key": .string("k"), "source": .string("elsewhere")])]),
                ]))
        }
    }

    @Test func aMirrorReplyReadsBackAsItWasSent() throws {
        let domain = try Domain(validating: "org.example.browser")
        let sent = MirrorReply(
            revision: 9, synced: true, domain: domain, changes: [Change(key: Self.key("home"), value: .string("x"))],
            locks: [(Self.key("home"), true), (Self.key("*"), false)], batch: true)
        let read = try MirrorReply(decoding: try Self.wire(sent.reply))
        #expect(read.revision == 9 && read.synced && read.domain == domain && read.batch)
        #expect(read.changes == sent.changes)
        #expect(read.locks.map(\.key) == sent.locks.map(\.key) && read.locks.map(\.locked) == [true, false])
        let end = try MirrorReply(decoding: try Self.wire(MirrorReply(revision: 9, synced: true, domain: nil).reply))
        #expect(end.domain == nil && end.changes.isEmpty && end.locks.isEmpty && !end.batch)
    }

    @Test func aMirrorReplyWithoutWhatTheContractRequiresIsRefused() {
        #expect(throws: StreamReplyError.noRevision) { try MirrorReply(decoding: VarlinkReply(parameters: [:])) }
        #expect(throws: StreamReplyError.invalidDomain("no domain")) {
            try MirrorReply(
                decoding: VarlinkReply(parameters: ["revision": .integer(1), "domain": .string("no domain")]))
        }
        #expect(throws: StreamReplyError.invalidLockChange) {
            try MirrorReply(
                decoding: VarlinkReply(parameters: [
                    "revision": .integer(1), "locks": .array([.object(["key": .string("k")])]),
                ]))
        }
    }
}
