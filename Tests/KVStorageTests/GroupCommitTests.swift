import Glibc
import KVValues
import Testing

@testable import KVStorage

/// Group commits (`Store/submitGroup`): several domains at one revision, in one log record, all
/// or nothing. What a fleet mirror needs to apply one etcd revision, and the etcd revision it
/// reached, together. (Crash points of groups: `CrashPointTests`.)
@Suite struct GroupCommitTests {
    @Test func aGroupChangesEveryDomainAtOneRevisionAndSurvivesReplayAndCompaction() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let (values, locks, meta) = (
            domain("com.corp.app"), Domain.locks(of: domain("com.corp.app")), domain("kvd.fleet")
        )
        let group = [
            DomainChanges(
                domain: values,
                changes: [Change(key: key("a"), value: .integer(1)), Change(key: key("gone"), value: nil)]),
            DomainChanges(domain: locks, changes: [Change(key: key("a"), value: .bool(true))]),
            DomainChanges(domain: meta, changes: [Change(key: key("etcdRevision"), value: .integer(42))]),
        ]
        do {
            let store = try Store(directory: folder.state)
            _ = try store.commit(domain("other"), .set(key("x"), .string("first"), ifRevision: nil))
            let commits = try store.commitGroup(group)
            #expect(commits.map(\.domain) == [values, locks, meta])
            #expect(commits.allSatisfy { $0.revision == 2 }, "one revision for the whole group: \(commits)")
            #expect(
                commits[0].changes == [Change(key: key("a"), value: .integer(1))], "removing a missing key is no change"
            )
            let nothing = [
                DomainChanges(domain: values, changes: [Change(key: key("gone"), value: nil)]),
                DomainChanges(domain: meta, changes: []),
            ]
            #expect(try store.commitGroup(nothing).isEmpty, "a group that changes nothing uses no revision")
            #expect(store.revision == 2)
            store.abandon()  // as a crash: the log is replayed
        }
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(values, key("a")) == .value(.integer(1), revision: 2))
            #expect(store.get(locks, key("a")) == .value(.bool(true), revision: 2))
            #expect(store.get(meta, key("etcdRevision")) == .value(.integer(42), revision: 2))
            #expect(store.revision == 2)
            store.close()  // compacts into the domain files
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(meta, key("etcdRevision")) == .value(.integer(42), revision: 2))
        #expect(store.get(domain("other"), key("x")) == .value(.string("first"), revision: 1))
    }

    @Test func aGroupOneOfWhosePartsIsRefusedChangesNothing() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        let big = Value.string(String(repeating: "x", count: Limits.domainBytes / 2))
        _ = try store.commit(domain("full"), .set(key("half"), big, ifRevision: nil))
        let group = [
            DomainChanges(domain: domain("fine"), changes: [Change(key: key("k"), value: .integer(1))]),
            DomainChanges(
                domain: domain("full"),
                changes: [Change(key: key("other half"), value: big), Change(key: key("more"), value: .integer(1))]),
        ]
        #expect(throws: StorageError.self) { try store.commitGroup(group) }
        #expect(store.get(domain("fine"), key("k")) == .missing, "the part that fits was not committed alone")
        #expect(store.revision == 1)
        #expect(throws: StorageError.invalidValue("a group names a domain more than once")) {
            try store.commitGroup([
                DomainChanges(domain: domain("fine"), changes: []), DomainChanges(domain: domain("fine"), changes: []),
            ])
        }
        _ = try store.commit(domain("fine"), .set(key("k"), .integer(2), ifRevision: nil))
        #expect(store.revision == 2, "a refused group leaves the store taking commits")
    }

    @Test func aGroupRecordNamesNoSingleDomainSoAnOlderReaderSetsItAsideWhole() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state)
        _ = try store.commitGroup([
            DomainChanges(domain: domain("a"), changes: [Change(key: key("k"), value: .integer(1))]),
            DomainChanges(domain: domain("b"), changes: [Change(key: key("k"), value: .integer(2))]),
        ])
        store.abandon()
        let log = folder.read("kvd.wal") ?? ""
        let line = log.split(separator: "\n").first { $0.contains("\"group\"") }.map(String.init) ?? ""
        #expect(
            line.contains(#""kind":"group","parts":[{"domain":"a","changes":[{"key":"k","value":1}]},{"domain":"b""#),
            "\(line)")
        #expect(
            !line.contains(#"{"revision":1,"domain""#),
            "an older kvd reads a record by its top-level domain: a group has none")
    }
}
