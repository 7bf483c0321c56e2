import Dispatch
import FoundationEssentials
import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

extension TemporaryFolder {
    /// The size of the state folder's file `name` (0 if missing).
    func size(_ name: String) -> Int64 {
        var status = stat()
        return stat(file(name), &status) == 0 ? Int64(status.st_size) : 0
    }
}

/// History at the storage level: what is kept, across folds, restarts and damage.
@Suite struct HistoryTests {
    static let tight = StoreOptions(compactionLogBytes: 1)  // folds after every batch

    @Test func tornAppendIsCutOffAndTheLogFillsIn() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let b = domain("com.example.b")
        do {
            let store = try Store(directory: folder.state, options: Self.tight)
            _ = try store.commit(b, .set(key("one"), .integer(1), ifRevision: nil))
            store.close()
        }
        let before = try #require(folder.read("com.example.b.history"))
        do {
            let store = try Store(directory: folder.state, options: StoreOptions())
            _ = try store.commit(b, .set(key("plain"), .real(2.5), ifRevision: nil))
            store.abandon()
        }
        // As if the append of the next fold was cut short by a crash.
        folder.write("com.example.b.history", before + "0000abcd {\"revision\":2,\"ke")
        let store = try Store(directory: folder.state, options: StoreOptions())
        let page = try store.history(b)
        #expect(page.entries.map(\.revision) == [2, 1])
        store.close()
        let again = try Store(directory: folder.state, options: StoreOptions())
        #expect(try again.history(b).entries.map(\.revision) == [2, 1])
        again.close()
    }
}

/// History held in memory once read: kept in step with every fold and prune, and the same as
/// what the files give a store opened afresh; a start reads and writes no history file.
@Suite struct HistoryInMemoryTests {
    @Test func historyHeldInMemoryFollowsFoldsAndPruning() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let options = StoreOptions(compactionLogBytes: 1, historyKeep: 3, historyDays: 0)  // folds after every batch
        let app = domain("com.example.memory")
        let store = try Store(directory: folder.state, options: options)
        var served: [Value?] = []
        var committed: [Value?] = []  // newest first
        for value in 1...40 {
            _ = try store.commit(app, .set(key("k\(value % 2)"), .integer(Int64(value)), ifRevision: nil))
            committed.insert(.integer(Int64(value)), at: 0)
            if value == 30 {
                _ = try store.commit(app, .delete(key("k1")))
                committed.insert(nil, at: 0)
            }
            served = try store.history(app).entries.map(\.value)
            #expect(served.prefix(4) == committed.prefix(4), "after \(value): \(served)")
        }
        store.close()
        let reopened = try Store(directory: folder.state, options: options)
        defer { reopened.close() }
        let fromFile = try reopened.history(app).entries.map(\.value)
        #expect(fromFile.prefix(4) == [40, 39, 38, 37].map { Value.integer($0) }[...], "\(fromFile)")
        #expect(served == fromFile, "what memory served is what the file holds")
    }

    @Test func startReadsAndWritesNoHistoryFile() throws {
        let fileSystem = SimulatedFileSystem()
        let app = domain("com.example.cold")
        let first = try Store(directory: CrashPointTests.directory, fileSystem: fileSystem)
        for value in 1...5 { _ = try first.commit(app, .set(key("k"), .integer(Int64(value)), ifRevision: nil)) }
        first.close()
        let mark = fileSystem.calls.count
        let second = try Store(directory: CrashPointTests.directory, fileSystem: fileSystem)
        let atStart = fileSystem.calls[mark...].filter { $0.contains(".history") }
        #expect(atStart.isEmpty, "\(atStart)")
        #expect(try second.history(app).entries.count == 5)
        #expect(fileSystem.calls[mark...].contains { $0.contains(".history") }, "read when first asked for")
        let reads = fileSystem.calls.count
        #expect(try second.history(app).entries.count == 5)
        #expect(fileSystem.calls.count == reads, "then served from memory: \(fileSystem.calls[reads...])")
        second.close()
    }
}

/// Retention, size and the audit trail at the storage level.
@Suite struct HistoryRetentionTests {
    /// A clock the test moves (milliseconds since the epoch).
    final class TestClock: Sendable {
        let now = Mutex<Int64>(1_800_000_000_000)
        var read: @Sendable () -> Int64 { { self.now.withLock { $0 } } }
        func advance(days: Double) { now.withLock { $0 += Int64(days * 86_400_000) } }
    }

    /// 100,000 changes to four keys, folded every 64 KiB of log: the history file stays within
    /// what retention keeps plus one fold's worth, and keeps every key's last 20 values.
    @Test func historyFileStaysBoundedUnder100000Changes() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let options = StoreOptions(compactionLogBytes: 64 << 10, historyKeep: 20, historyDays: 0)
        let store = try Store(directory: folder.state, options: options)
        let app = domain("com.example.busy")
        let keys = (0..<4).map { key("k\($0)") }
        var largest = 0
        for round in 0..<200 {
            let done = DispatchSemaphore(value: 0)
            for index in 0..<500 {
                let value = Value.integer(Int64(round * 500 + index))
                store.submit(app, .set(keys[index % 4], value, ifRevision: nil)) { _ in
                    if index == 499 { done.signal() }
                }
            }
            done.wait()
            largest = max(largest, Int(folder.size("com.example.busy.history")))
        }
        store.close()
        let size = folder.size("com.example.busy.history")
        print("history file: \(size) bytes at the end, at most \(largest) bytes during 100,000 changes")
        #expect(largest < 160_000, "the history file grew to \(largest) bytes")
        let reopened = try Store(directory: folder.state, options: options)
        defer { reopened.close() }
        for key in keys {
            let values = try reopened.history(app, key: key).entries.map(\.value)
            let expected = (0..<20).map { step in Value.integer(Int64(99_996 + Int(key.name.dropFirst())! - step * 4)) }
            #expect(Array(values.prefix(20)) == expected, "\(key): \(values.prefix(3))...")
        }
    }

    /// Each key keeps every value of the last `days` days, and at least its last `keep`.
    @Test func retentionKeepsRecentDaysAndTheLastValues() throws {
        for (keep, expected) in [(2, [8, 7, 6, 5]), (6, [8, 7, 6, 5, 4, 3])] {
            let folder = TemporaryFolder()
            defer { folder.remove() }
            let clock = TestClock()
            let options = StoreOptions(historyKeep: keep, historyDays: 1, clock: clock.read)
            let store = try Store(directory: folder.state, options: options)
            let app = domain("com.example.aging")
            for value in 1...4 { _ = try store.commit(app, .set(key("k"), .integer(Int64(value)), ifRevision: nil)) }
            clock.advance(days: 5)
            for value in 5...8 { _ = try store.commit(app, .set(key("k"), .integer(Int64(value)), ifRevision: nil)) }
            clock.advance(days: 0.5)
            store.close()  // folds: the file is written as retention keeps it
            let reopened = try Store(directory: folder.state, options: options)
            let page = try reopened.history(app)
            #expect(page.entries.map(\.value) == expected.map { .integer(Int64($0)) }, "keep \(keep)")
            #expect(page.oldestRevision == Int64(9 - expected.count))
            #expect(throws: HistoryError.truncated(app, oldestRevision: page.oldestRevision)) {
                try reopened.history(app, at: page.oldestRevision - 1)
            }
            reopened.close()
        }
    }

    /// The system instance's uid of each change is kept, through the log and the fold.
    @Test func uidOfEachChangeIsKept() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("com.example.audit")
        let store = try Store(directory: folder.state)
        _ = try store.commit(app, .set(key("k"), .integer(1), ifRevision: nil), writer: Writer(uid: 1000))
        _ = try store.commit(app, .set(key("k"), .integer(2), ifRevision: nil))
        #expect(try store.history(app).entries.map(\.writer?.uid) == [nil, 1000], "served from the log")
        store.close()
        let reopened = try Store(directory: folder.state)
        defer { reopened.close() }
        #expect(try reopened.history(app).entries.map(\.writer?.uid) == [nil, 1000], "served from the history file")
    }
}
