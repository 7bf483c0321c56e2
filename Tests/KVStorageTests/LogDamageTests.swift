import FoundationEssentials
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// A record the log reader cannot use never takes the records after it with it, and the store
/// revision never goes back.
@Suite struct LogDamageTests {
    /// A log of `records` framed as kvd writes them, after a header at base 0.
    static func log(_ lines: [[UInt8]]) -> String {
        String(decoding: LogFormat.header(baseRevision: 0) + lines.joined(), as: UTF8.self)
    }

    static func record(_ revision: Int64, _ domainName: String, _ keyName: String, _ value: Value) -> [UInt8] {
        LogFormat.encode(
            LogRecord(
                revision: revision, domain: domain(domainName), kind: "set",
                changes: [Change(key: key(keyName), value: value)]))
    }

    /// A line with a valid checksum whose record cannot be decoded (here: a domain name no
    /// request can carry), at `revision`.
    static func undecodable(_ revision: Int64) -> [UInt8] {
        LogFormat.frame(
            .object([
                "revision": .integer(revision), "domain": .string("not a domain!"), "kind": .string("set"),
                "changes": .array([]),
            ]))
    }

    @Test func undecodableRecordInTheMiddleCostsOnlyItselfAndIsReported() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write(
            "kvd.wal",
            Self.log([
                Self.record(1, "a", "k1", .integer(1)), Self.undecodable(2), Self.record(3, "a", "k3", .integer(3)),
            ]))
        let logs = LogCollector()
        do {
            let store = try Store(directory: folder.state, log: logs.callback)
            #expect(store.get(domain("a"), key("k1")) == .value(.integer(1), revision: 1))
            #expect(
                store.get(domain("a"), key("k3")) == .value(.integer(3), revision: 3),
                "the record after the damage is replayed")
            #expect(store.revision == 3)
            #expect(try store.commit(domain("a"), .set(key("k4"), .integer(4), ifRevision: nil)).revision == 4)
            store.abandon()
        }
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") }, "the damaged log is kept aside")
        #expect(logs.messages(at: .error).contains { $0.contains("revision 2") }, "\(logs.lines.withLock { $0 })")
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.list(domain("a"))?.values.count == 3)
        #expect(store.revision == 4)
        #expect(
            folder.names().filter { $0.hasPrefix("kvd.wal.unreadable-") }.count == 1,
            "reported once, not at every start")
    }

    /// A complete record the reader cannot use at the end of the log was written whole (its
    /// checksum holds), so it may have been acknowledged: its revision is never reused.
    @Test func revisionOfAnUndecodableLastRecordIsNeverReused() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("kvd.wal", Self.log([Self.record(1, "a", "k1", .integer(1)), Self.undecodable(2)]))
        let logs = LogCollector()
        let store = try Store(directory: folder.state, log: logs.callback)
        defer { store.close() }
        #expect(store.revision == 2)
        #expect(try store.commit(domain("a"), .set(key("k2"), .integer(2), ifRevision: nil)).revision == 3)
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") })
        #expect(!logs.messages(at: .error).isEmpty)
    }

    /// A record whose checksum fails, followed by valid ones, is damage in the middle (a torn
    /// write leaves no valid record after it): the records after it are replayed.
    @Test func corruptRecordBeforeValidOnesDoesNotDropThem() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        var second = Self.record(2, "a", "k2", .integer(2))
        second[20] ^= 0x01  // the checksum no longer matches
        folder.write(
            "kvd.wal",
            Self.log([Self.record(1, "a", "k1", .integer(1)), second, Self.record(3, "b", "k3", .integer(3))]))
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(domain("a"), key("k1")) == .value(.integer(1), revision: 1))
        #expect(store.get(domain("a"), key("k2")) == .missing)
        #expect(store.get(domain("b"), key("k3")) == .value(.integer(3), revision: 3))
        #expect(store.revision == 3)
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") })
    }

    /// A record written by a kvd with the depth bug (a 510-deep value: 513 levels in the record)
    /// is read now.
    @Test func recordOfA510DeepValueIsRead() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let deep = StorageLimitsTests.nested(510)
        folder.write(
            "kvd.wal", Self.log([Self.record(1, "d", "deep", deep), Self.record(2, "other", "k", .string("acked"))]))
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(domain("d"), key("deep")) == .value(deep, revision: 1))
        #expect(store.get(domain("other"), key("k")) == .value(.string("acked"), revision: 2))
    }
}
