import KVProtocol
import KVStorage
import KVValues
import Testing
@testable import KVDaemon

/// `Backup`'s replies: one per domain, and a domain one reply cannot carry split across several.
@Suite struct BackupReplyTests {
    @Test func domainLargerThanOneReplyIsSplitAcrossReplies() throws {
        let mib = 1 << 20
        var values: [Key: Value] = [:]
        for index in 0..<40 { values[try Key(validating: "k\(index)")] = .string(String(repeating: "x", count: mib)) }
        // As a hand-made domain file over the limit gives it: kvd refuses writes that would make one.
        let snapshot = DomainSnapshot(values: values, revisions: [:], unreadable: [try Key(validating: "bad"): "not typed JSON"], revision: 3, budgetBytes: 40 * mib)
        let parts = RequestHandler.backupParts(snapshot)
        #expect(parts.count == 3, "\(parts.count) parts")
        var seen: Set<String> = []
        for part in parts {
            let reply = VarlinkReply(
                members: ["revision": .integer(3), "domain": .string("d"), "values": .object(part.values), "unreadable": .object(part.unreadable)], continues: true)
            #expect(reply.encoded().count <= Limits.messageBytes)
            seen.formUnion(part.values.keys)
        }
        #expect(seen.count == 40 && parts.filter { !$0.unreadable.isEmpty }.count == 1, "every key once, the unreadable ones named once")
        let small = DomainSnapshot(values: [try Key(validating: "k"): .integer(1)], revisions: [:], unreadable: [:], revision: 1, budgetBytes: 30)
        #expect(RequestHandler.backupParts(small).map(\.values) == [["k": .integer(1)]])
    }
}
