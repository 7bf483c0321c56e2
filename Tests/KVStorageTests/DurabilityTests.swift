import Dispatch
import FoundationEssentials
import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

@Suite struct DurabilityTests {
    @Test func concurrentSubmittersShareOneSyncPerBatch() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let store = try Store(directory: folder.state, fileSystem: fileSystem)
        fileSystem.resetCounts()
        let app = domain("com.example.group")
        let threads = 8
        let perThread = 50
        let results = Mutex<[Result<Commit, StorageError>]>([])
        let group = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                group.enter()
                store.submit(app, .set(key("t\(thread)-\(index)"), .integer(Int64(index)), ifRevision: nil)) { result in
                    results.withLock { $0.append(result) }
                    group.leave()
                }
            }
        }
        group.wait()
        let all = results.withLock { $0 }
        #expect(all.count == threads * perThread)
        let revisions = all.compactMap { try? $0.get().revision }
        #expect(revisions == Array(1...Int64(threads * perThread)))  // completions in commit order
        #expect(
            fileSystem.syncs < threads * perThread / 4, "\(fileSystem.syncs) syncs for \(threads * perThread) commits")
        #expect(waitUntil { store.isIdle })
        store.close()
        let reopened = try Store(directory: folder.state)
        defer { reopened.close() }
        #expect(reopened.list(app)?.values.count == threads * perThread)
    }

    @Test func smallChangeToLargeDomainWritesOnlyALogRecord() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let app = domain("com.example.large")
        let changes = (0..<20_000).map { Change(key: key("key-\($0)"), value: .string("value number \($0)")) }
        do {
            let store = try Store(directory: folder.state, fileSystem: fileSystem)
            _ = try store.commit(app, .apply(changes, ifRevision: 0))
            store.close()
        }
        let store = try Store(directory: folder.state, fileSystem: fileSystem)
        fileSystem.resetCounts()
        _ = try store.commit(app, .set(key("key-7"), .integer(7), ifRevision: nil))
        #expect(fileSystem.bytesWritten(toFilesContaining: "com.example.large") == 0)
        // The record, rewritten with the log's last block and padded to whole 512-byte blocks.
        #expect(fileSystem.bytesWritten(toFilesContaining: "kvd.wal") <= 2 * WriteAheadLog.blockSize)
        #expect(store.list(app)?.values.count == 20_000)
        store.close()
        #expect(fileSystem.bytesWritten(toFilesContaining: "com.example.large") > 500_000)  // compacted on close
    }

    @Test func compactionThenReopenGivesTheSameState() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let options = StoreOptions(compactionLogBytes: 2_000)
        var expected: [Domain: DomainSnapshot] = [:]
        var revision: Int64 = 0
        do {
            let store = try Store(directory: folder.state, options: options)
            for index in 0..<300 {
                let app = domain("com.example.d\(index % 7)")
                _ = try store.commit(app, .set(key("k\(index % 13)"), .integer(Int64(index)), ifRevision: nil))
                if index % 50 == 49 { _ = try store.commit(app, .deleteDomain) }
            }
            let log = (folder.read("kvd.wal") ?? "").prefix { $0 != "\0" }  // records, not reserved space
            // About 33 kB of records in all; folds run beside the commits, so the log may hold
            // what came during the last fold too.
            #expect(log.utf8.count < 12_000, "the log was compacted while running: \(log.utf8.count) bytes")
            for app in store.domains() { expected[app] = store.list(app) }
            revision = store.revision
            store.abandon()  // as a crash: recovery replays the log over the compacted files
        }
        let store = try Store(directory: folder.state, options: options)
        defer { store.close() }
        #expect(store.revision == revision)
        #expect(Set(store.domains()) == Set(expected.keys))
        for (app, snapshot) in expected { #expect(store.list(app) == snapshot) }
    }

    @Test func secondStoreOnTheSameFolderIsLocked() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state)
        let message =
            "another kvd is already using state folder \(folder.state) (lock file \(folder.state)/kvd.lock is held)"
        #expect(throws: StorageError.locked(message)) { try Store(directory: folder.state) }
        store.close()
        let again = try Store(directory: folder.state)
        again.close()
    }

    @Test func failedSyncFailsTheBatchAndChangesNothing() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let app = domain("com.example.eio")
        do {
            let store = try Store(directory: folder.state, fileSystem: fileSystem)
            _ = try store.commit(app, .set(key("kept"), .integer(1), ifRevision: nil))
            fileSystem.fail { operation, _ in operation == "fdatasync" || operation == "fsync" ? EIO : nil }
            #expect {
                try store.commit(app, .set(key("lost"), .integer(2), ifRevision: nil))
            } throws: { error in
                guard case .failure(let reason) = error as? StorageError else { return false }
                return reason.contains("Input/output error")
            }
            #expect(store.get(app, key("lost")) == .missing)
            #expect(store.revision == 1)
            fileSystem.fail { _, _ in nil }
            // The next write first cuts the log back, so the failed record can never resurface.
            let next = try store.commit(app, .set(key("after"), .integer(3), ifRevision: nil))
            #expect(next.revision == 2)
            store.abandon()  // as a crash: no compaction
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("lost")) == .missing)
        #expect(store.get(app, key("kept")) == .value(.integer(1), revision: 1))
        #expect(store.get(app, key("after")) == .value(.integer(3), revision: 2))
    }

    @Test func failedRenameDuringCompactionLosesNothing() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let logs = LogCollector()
        let app = domain("com.example.rename")
        do {
            let store = try Store(directory: folder.state, fileSystem: fileSystem, log: logs.callback)
            _ = try store.commit(app, .set(key("a"), .integer(1), ifRevision: nil))
            fileSystem.fail { operation, _ in operation == "rename" ? EIO : nil }
            store.close()
            #expect(!logs.messages(at: .error).isEmpty)
        }
        #expect(!folder.names().contains { $0.hasSuffix(".tmp") })
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("a")) == .value(.integer(1), revision: 1))
    }
}

@Suite struct VisibilityTests {
    @Test func readsSeeOnlyDurableStateAndNeverWaitForASync() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let store = try Store(directory: folder.state, fileSystem: fileSystem)
        defer { store.close() }
        let app = domain("com.example.visible")
        let syncStarted = DispatchSemaphore(value: 0)
        let releaseSync = DispatchSemaphore(value: 0)
        fileSystem.fail { operation, _ in
            if operation == "fdatasync" {
                syncStarted.signal()
                releaseSync.wait()
            }
            return nil
        }
        let done = DispatchSemaphore(value: 0)
        store.submit(app, .set(key("k"), .integer(1), ifRevision: nil)) { _ in done.signal() }
        syncStarted.wait()
        #expect(store.get(app, key("k")) == .missing)  // answered while the sync is still running
        #expect(store.revision == 0)
        #expect(!store.isIdle)
        fileSystem.fail { _, _ in nil }
        releaseSync.signal()
        done.wait()
        #expect(store.get(app, key("k")) == .value(.integer(1), revision: 1))
    }
}
