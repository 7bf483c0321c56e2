import Dispatch
import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// The fold of the log into the files runs beside the commit queue: commits are acknowledged while
/// it writes, into `kvd.wal.next` (started with the fold), readers see every change once
/// throughout, a failed fold loses nothing, and commits never wait for a fold however far behind
/// it falls. Folds are stepped by hand (``SteppedFolds``), so each step is seen.
@Suite struct ConcurrentFoldTests {
    let app = domain("app")

    /// A store whose folds wait in `folds` until the test runs them.
    static func open(_ folder: TemporaryFolder, _ folds: SteppedFolds, fileSystem: any FileSystem = LinuxSystem())
        throws -> Store
    {
        var options = StoreOptions(compactionLogBytes: 600, historyKeep: 50, historyDays: 30)
        options.foldRunner = { work in folds.add(work) }
        return try Store(directory: folder.state, options: options, fileSystem: fileSystem)
    }

    /// Commits Sets of `app` until the store hands a fold to its runner; returns that fold and
    /// the values set so far.
    func commitUntilAFoldStarts(_ store: Store, _ folds: SteppedFolds, values: inout [String: Int]) throws
        -> [@Sendable () -> Void]
    {
        for round in 0..<100 {
            let name = "k\(round % 7)"
            _ = try store.commit(app, .set(key(name), .integer(Int64(round)), ifRevision: nil))
            values[name] = round
            store.queue.sync {}  // the drain that committed it starts the fold after its completions
            let started = folds.take()
            if !started.isEmpty { return started }
        }
        Issue.record("no fold was handed to the runner after 100 commits of a 600-byte threshold")
        return []
    }

    /// The log's base revision and the revisions of its records.
    static func log(_ folder: TemporaryFolder, _ name: String = StorageFormat.logFileName) throws -> (
        base: Int64, revisions: [Int64]
    ) {
        let scan = try LogFormat.scan(Array(folder.read(name)!.utf8))
        return (scan.baseRevision, scan.records.map(\.revision))
    }

    static func integers(_ store: Store, _ domain: Domain) -> [String: Int] {
        var values: [String: Int] = [:]
        for (key, value) in store.list(domain)?.values ?? [:] {
            if case .integer(let value) = value { values[key.name] = Int(value) }
        }
        return values
    }

    @Test func commitsAreAcknowledgedWhileAFoldRunsAndTheNextLogCarriesThem() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        var store = try Self.open(folder, folds)
        var values: [String: Int] = [:]
        let fold = try commitUntilAFoldStarts(store, folds, values: &values)
        let folded = store.revision
        #expect(folder.read("app.json") == nil, "the domain file was written before the fold ran")
        for round in 0..<3 {  // acknowledged while the fold has not run
            _ = try store.commit(app, .set(key("during"), .integer(Int64(round)), ifRevision: nil))
        }
        values["during"] = 2
        #expect(!store.isIdle, "a store with a fold to end is not idle")
        let next = try Self.log(folder, StorageFormat.nextLogFileName)
        #expect(next.base == folded && next.revisions == [folded + 1, folded + 2, folded + 3], "\(next)")
        #expect(try Self.log(folder).revisions.last == folded, "kvd.wal is left as the fold found it")
        for work in fold { work() }
        store.queue.sync {}  // the commit queue ends the fold: kvd.wal.next becomes kvd.wal
        #expect(store.isIdle)
        #expect(folder.read("app.json") != nil)
        #expect(folder.read(StorageFormat.nextLogFileName) == nil)
        let log = try Self.log(folder)
        #expect(log.base == folded && log.revisions == [folded + 1, folded + 2, folded + 3], "\(log)")
        #expect(
            try store.history(app, key: key("during")).entries.map(\.revision) == [folded + 3, folded + 2, folded + 1])
        store.abandon()  // a crash: the files at the fold's revision and the carried records
        store = try Self.open(folder, folds)
        defer { store.close() }
        #expect(Self.integers(store, app) == values)
        #expect(store.revision == folded + 3)
        #expect(try store.history(app).entries.count == Int(folded + 3), "every commit once in history")
    }

    /// Between the fold's writing of the history files and its end on the commit queue, the
    /// changes are both in memory and in the files: a reader takes each once.
    @Test func aReaderSeesEveryChangeOnceWhileAFoldRuns() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        let store = try Self.open(folder, folds)
        defer { store.close() }
        #expect(try store.history(app).entries.isEmpty)  // loaded: later reads never wait
        var values: [String: Int] = [:]
        let fold = try commitUntilAFoldStarts(store, folds, values: &values)
        _ = try store.commit(app, .set(key("during"), .integer(1), ifRevision: nil))
        let expected = Array((1...store.revision).reversed())
        #expect(try store.history(app).entries.map(\.revision) == expected, "before the fold ran")
        store.queue.sync {
            for work in fold { work() }  // the files are written; the commit queue has not ended it
            #expect(!store.isIdle)
            #expect((try? store.history(app).entries.map(\.revision)) == expected, "during the fold's end")
        }
        #expect(try store.history(app).entries.map(\.revision) == expected, "after the fold")
    }

    @Test func aFoldThatFailsLosesNothingAndIsTriedAgain() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        let disk = RecordingFileSystem()
        disk.fail { operation, name in operation == "rename" && name == "app.json" ? EIO : nil }
        var store = try Self.open(folder, folds, fileSystem: disk)
        var values: [String: Int] = [:]
        for work in try commitUntilAFoldStarts(store, folds, values: &values) { work() }
        _ = try store.commit(app, .set(key("after"), .integer(1), ifRevision: nil))
        values["after"] = 1
        store.queue.sync {}
        #expect(folder.read("app.json") == nil)
        #expect(try Self.log(folder).base == 0, "the folded log was let go after a failed fold")
        #expect(try Self.log(folder, StorageFormat.nextLogFileName).revisions.count == 1)
        disk.fail { _, _ in nil }
        // Tried again as a compaction of both logs on the commit queue (never handed to the runner).
        for round in 0..<100 where folder.read("app.json") == nil {
            _ = try store.commit(app, .set(key("retry"), .integer(Int64(round)), ifRevision: nil))
            values["retry"] = round
            store.queue.sync {}
            #expect(folds.take().isEmpty)
        }
        #expect(folder.read("app.json") != nil, "the fold was not tried again")
        #expect(try Self.log(folder).base > 0)
        #expect(folder.read(StorageFormat.nextLogFileName) == nil)
        store.abandon()
        store = try Self.open(folder, folds)
        defer { store.close() }
        #expect(Self.integers(store, app) == values)
        #expect(try store.history(app).entries.count == Int(store.revision))
    }

    /// Nothing is carried in memory: however far the log grows while a fold has not run
    /// (here it never does until the end), commits go on into `kvd.wal.next` and never run it.
    /// A crash then (both logs, files older than either) loses nothing.
    @Test func commitsNeverWaitForAFold() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        var store = try Self.open(folder, folds)
        var values: [String: Int] = [:]
        let fold = try commitUntilAFoldStarts(store, folds, values: &values)
        let big = String(repeating: "x", count: 60_000)
        for count in 0..<40 {
            _ = try store.commit(domain("big\(count % 10)"), .set(key("v\(count)"), .string(big), ifRevision: nil))
        }
        #expect(folder.read("app.json") == nil, "a commit waited for the fold")
        #expect(try Self.log(folder, StorageFormat.nextLogFileName).revisions.count == 40)
        store.abandon()  // a crash mid-fold: runs the fold, leaves both logs
        #expect(folder.read(StorageFormat.nextLogFileName) != nil)
        store = try Self.open(folder, folds)
        defer { store.close() }
        #expect(folder.read(StorageFormat.nextLogFileName) == nil, "recovery compacts both logs at once")
        #expect(Self.integers(store, app) == values)
        #expect(store.list(domain("big9"))?.values.count == 4)
        for work in fold { work() }  // claimed already: does nothing
    }

    /// On a disk without room for the fold's files beside the log's growth meanwhile, the fold runs
    /// on the commit queue while commits wait (never handed to the runner): one that fails for room
    /// then makes room while the log is at its threshold (on a 6 MiB disk under load, a fold beside
    /// commits would let the log fill the disk, and every write would be refused).
    @Test(arguments: [(Int64(1) << 40, true), (Int64(64) << 10, false)])
    func aFoldRunsBesideCommitsOnlyWhenTheDiskHasRoom(available: Int64, beside: Bool) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        let disk = RecordingFileSystem()
        disk.available.withLock { $0 = available }
        let store = try Self.open(folder, folds, fileSystem: disk)
        defer { store.close() }
        var handed = false
        for round in 0..<100 where !handed && folder.read("app.json") == nil {
            _ = try store.commit(app, .set(key("k\(round % 7)"), .integer(Int64(round)), ifRevision: nil))
            store.queue.sync {}
            handed = !folds.take().isEmpty
        }
        #expect(handed == beside, "handed to the runner: \(handed), with \(available) bytes free")
        #expect(folder.read("app.json") != nil || beside, "the fold did not run on the commit queue")
    }

    /// Once a fold has ended (`kvd.wal.next` renamed over `kvd.wal`, the folded commits dropped
    /// from memory), the fold queue gives the allocator's free pages back to the system, once a
    /// fold; commits alone never do (at 100,000 keys they were a fifth of kvd's resident memory).
    @Test func aFoldsEndGivesTheFreedMemoryBack() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let folds = SteppedFolds()
        let disk = RecordingFileSystem()
        let store = try Self.open(folder, folds, fileSystem: disk)
        defer { store.close() }
        var values: [String: Int] = [:]
        let fold = try commitUntilAFoldStarts(store, folds, values: &values)
        store.foldQueue.sync {}
        #expect(disk.releases.isEmpty, "memory given back before any fold ended")
        for work in fold { work() }
        store.foldQueue.sync {}
        #expect(disk.releases.isEmpty, "memory given back before the commit queue ended the fold")
        store.queue.sync {}  // ends the fold: renames kvd.wal.next over kvd.wal
        store.queue.sync {}  // the fold's task let go
        store.foldQueue.sync {}
        let calls = disk.calls
        let end = try #require(calls.lastIndex(of: "rename \(StorageFormat.logFileName)"), "\(calls)")
        #expect(disk.releases.count == 1, "\(disk.releases)")
        #expect(
            disk.releases.allSatisfy { $0 > end }, "given back before the fold's end (call \(end)): \(disk.releases)")
    }
}
