import FoundationEssentials
import KVProtocol
import KVStorage
import KVValues
import Testing

@testable import KVDaemon

/// The `History` reply, encoded once as it is measured: what does not fit one message is left
/// out from a revision on and marked, never cut silently or within one commit.
@Suite struct HistoryReplyTests {
    static func entry(_ revision: Int64, _ key: String, _ bytes: Int) -> HistoryEntry {
        HistoryEntry(
            revision: revision, time: 1_800_000_000_123, key: try! Key(validating: key),
            value: .string(String(repeating: "v", count: bytes)), writer: Writer(uid: 7))
    }

    @Test func replyPastOneMessageStopsAtACommitAndNamesTheNextPage() throws {
        // Newest first: revision 9 (two keys of 4 MiB), 8, 7 (two keys of 4 MiB): 7 cannot fit whole.
        let mib = 1 << 20
        let entries = [
            Self.entry(9, "a", 4 * mib), Self.entry(9, "b", 4 * mib), Self.entry(8, "a", 4 * mib),
            Self.entry(7, "a", 3 * mib), Self.entry(7, "b", 3 * mib),
        ]
        let reply = RequestHandler.historyReply(entries, oldestRevision: 2, paged: true)
        let bytes = reply.encoded().dropLast()
        #expect(bytes.count <= Limits.messageBytes)
        let read = try VarlinkReply(message: bytes)
        guard case .array(let items)? = read.parameters["entries"] else {
            Issue.record("no entries: \(read.parameters.keys)")
            return
        }
        #expect(
            items.map { $0["revision"] } == [.integer(9), .integer(9), .integer(8)], "revision 7 is left out whole")
        #expect(read.parameters["nextBeforeRevision"] == .integer(8))
        #expect(read.parameters["oldestRevision"] == .integer(2))
        let first = try #require(items.first)
        #expect(
            first["time"] == .string("2027-01-15T08:00:00.123Z") && first["uid"] == .integer(7)
                && first["key"] == .string("a"))
        let whole = RequestHandler.historyReply(Array(entries.prefix(3)), oldestRevision: 2, paged: true)
        #expect(
            try VarlinkReply(message: whole.encoded().dropLast()).parameters["nextBeforeRevision"] == nil,
            "no mark when nothing is left out")
    }

    @Test func newestCommitThatCannotFitIsTooLargeNotCut() throws {
        let mib = 1 << 20
        let entries = (0..<5).map { Self.entry(9, "k\($0)", 4 * mib) }
        #expect(
            RequestHandler.historyReply(entries, oldestRevision: 0, paged: true).error
                == DefaultsInterface.Error.tooLarge)
        #expect(
            RequestHandler.historyReply(
                Array(entries.prefix(3)) + [Self.entry(8, "k", 5 * mib)], oldestRevision: 0, paged: false
            ).error == DefaultsInterface.Error.tooLarge)
    }

    /// A time is written as the millisecond it is, which RFC3339 reads back (a whole second as
    /// ``RFC3339/format(_:)`` writes it).
    @Test func millisecondTimesAreWrittenExactly() throws {
        for milliseconds: Int64 in [
            0, 1, 999, 1_000, 951_782_400_000, 1_800_000_000_123, -1, -86_400_001, 253_402_300_799_999,
            -62_135_596_800_000,
        ] {
            var out: [UInt8] = []
            RFC3339.writeMilliseconds(milliseconds, into: &out)
            let text = String(decoding: out.dropFirst().dropLast(), as: UTF8.self)
            let date = try #require(RFC3339.parse(text), "\(text)")
            #expect((date.timeIntervalSince1970 * 1000).rounded() == Double(milliseconds), "\(milliseconds): \(text)")
            #expect(text.count == 24 && out.first == UInt8(ascii: "\"") && out.last == UInt8(ascii: "\""), "\(text)")
            if milliseconds % 1000 == 0 {
                #expect(
                    text == RFC3339.format(Date(timeIntervalSince1970: Double(milliseconds / 1000))), "\(milliseconds)")
            }
        }
    }
}
