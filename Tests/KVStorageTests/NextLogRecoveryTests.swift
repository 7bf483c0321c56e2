import Glibc
import KVSystem
import KVValues
import Testing

@testable import KVStorage

/// What recovery makes of `kvd.wal.next`, the log a fold's commits go to (see
/// ``WriteAheadLog/startFold(_:revision:)``) when it finds one that no crash of kvd leaves
/// behind in that shape: a compaction's leftover (its base at or below `kvd.wal`'s) is removed
/// unread, so a value it still holds never comes back, not even in history; something other
/// than a regular file at its name is treated as at `kvd.wal`'s.
@Suite struct NextLogRecoveryTests {
    let app = domain("app")

    /// `kvd.wal.next` of base `base` holding one Set of `key` of `domain` (`app`) at `revision`.
    func nextLog(base: Int64, revision: Int64, _ key: String, _ value: Value, in domain: Domain? = nil) -> String {
        var bytes = LogFormat.header(baseRevision: base)
        var sizes: [Int] = []
        LogFormat.append(
            LogRecord(
                revision: revision, domain: domain ?? app, kind: "set",
                changes: [Change(key: KVStorageTests.key(key), value: value)],
                time: 1_800_000_000_000), to: &bytes, entryBytes: &sizes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Two commits, their history forgotten, then a close (a compaction: `kvd.wal` of base
    /// 2), or two commits and a crash (`kvd.wal` of base 0 holding both, as a fold finds it).
    func folderAtRevision2(closed: Bool = true) throws -> TemporaryFolder {
        let folder = TemporaryFolder()
        let store = try Store(directory: folder.state)
        _ = try store.commit(app, .set(key("k"), .integer(1), ifRevision: nil))
        _ = try store.commit(app, .set(key("k"), .integer(2), ifRevision: nil))
        if closed {
            try store.changeHistory(.forget(app, key("k")))
            store.close()
        } else {
            store.abandon()
        }
        return folder
    }

    @Test(arguments: [Int64(1), 2])
    func aStaleNextLogIsRemovedUnread(base: Int64) throws {
        let folder = try folderAtRevision2()
        defer { folder.remove() }
        folder.write(StorageFormat.nextLogFileName, nextLog(base: base, revision: 2, "k", .string("forgotten")))
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("k")) == .value(.integer(2), revision: 2))
        #expect(store.domains() == [app])
        #expect(store.revision == 2)
        #expect(folder.read(StorageFormat.nextLogFileName) == nil)
        let values = try store.history(app).entries.map(\.value)
        #expect(!values.contains(.string("forgotten")), "a stale log's value came back in history: \(values)")
    }

    /// A domain deleted (or never written) is not brought back by a stale log's record.
    @Test func aStaleNextLogBringsNoDomainBack() throws {
        let folder = try folderAtRevision2()
        defer { folder.remove() }
        folder.write(
            StorageFormat.nextLogFileName, nextLog(base: 1, revision: 2, "k", .string("gone"), in: domain("gone")))
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.domains() == [app])
        #expect(folder.read(StorageFormat.nextLogFileName) == nil)
    }

    @Test func aNextLogAboveTheLogIsReplayedAndFoldedAtOnce() throws {
        let folder = try folderAtRevision2(closed: false)
        defer { folder.remove() }
        folder.write(StorageFormat.nextLogFileName, nextLog(base: 2, revision: 3, "k", .string("three")))
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(app, key("k")) == .value(.string("three"), revision: 3))
            #expect(folder.read(StorageFormat.nextLogFileName) == nil, "both logs folded at once")
            #expect(try store.commit(app, .set(key("k"), .integer(4), ifRevision: nil)).revision == 4)
            store.abandon()
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("k")) == .value(.integer(4), revision: 4))
        #expect(try store.history(app).entries.map(\.revision) == [4, 3, 2, 1])
    }

    @Test func aSymbolicLinkAtTheNextLogIsRefused() throws {
        let folder = try folderAtRevision2()
        defer { folder.remove() }
        folder.write("elsewhere", nextLog(base: 2, revision: 3, "k", .string("three")))
        #expect(symlink(folder.state + "/elsewhere", folder.state + "/" + StorageFormat.nextLogFileName) == 0)
        #expect {
            try Store(directory: folder.state)
        } throws: { error in
            guard case .invalidStateDirectory(let message) = error as? StorageError else { return false }
            return message.contains("symbolic link")
        }
    }

    @Test func aFolderAtTheNextLogIsMovedAside() throws {
        let folder = try folderAtRevision2()
        defer { folder.remove() }
        #expect(mkdir(folder.state + "/" + StorageFormat.nextLogFileName, 0o700) == 0)
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("k")) == .value(.integer(2), revision: 2))
        #expect(folder.names().contains { $0.hasPrefix(StorageFormat.nextLogFileName + ".unreadable-") })
    }
}
