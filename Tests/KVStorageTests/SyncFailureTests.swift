import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// Failed writes and syncs on the simulated file system, followed by crashes: a change whose
/// sync failed is reported as failed and never becomes durable later, not even when a later
/// sync of the same file succeeds (PostgreSQL's "fsyncgate": after a failed fsync, Linux may
/// keep the unwritten pages in the page cache, or mark them clean without writing them).
@Suite struct SyncFailureTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var operation: String
        var fault: InjectedFault
        var testDescription: String {
            "\(operation) fails with errno \(fault.code)\(fault.tookEffect ? " after taking effect" : "")"
        }
    }

    static let cases = [
        Case(operation: "fdatasync", fault: InjectedFault(code: EIO, tookEffect: false)),  // pages stay dirty
        // the data reached the disk anyway
        Case(operation: "fdatasync", fault: InjectedFault(code: EIO, tookEffect: true)),
        // Half the record written. (Not ENOSPC: a full disk makes room and tries again, see
        // FullDiskCrashPointTests.)
        Case(operation: "write", fault: InjectedFault(code: EIO, tookEffect: true)),
        Case(operation: "write", fault: InjectedFault(code: EIO, tookEffect: false)),
    ]

    static let failedValue = "FAILED-CHANGE-7f3a"

    @Test(arguments: cases) func failedChangeNeverBecomesDurable(_ failure: Case) throws {
        let fileSystem = SimulatedFileSystem()
        let work = CrashWorkload(fileSystem: fileSystem, options: CrashPointTests.options)
        let app = domain("com.example.a")
        work.open()
        work.commit(app, .set(key("kept"), .integer(1), ifRevision: nil))
        let armed = Mutex(true)
        fileSystem.inject { _, operation, name in
            guard operation == failure.operation, name == "kvd.wal" else { return nil }
            return armed.withLock { armed in
                defer { armed = false }
                return armed ? failure.fault : nil
            }
        }
        work.commit(app, .set(key("lost"), .string(Self.failedValue), ifRevision: nil))
        work.commit(domain("com.example.b"), CrashWorkload.markedApply(1, keys: 3))
        work.commit(app, .set(key("after"), .integer(3), ifRevision: nil))
        #expect(work.store?.get(app, key("lost")) == .missing)
        work.restart()  // a crash of the process: the log is replayed
        work.commit(app, .set(key("more"), .integer(4), ifRevision: nil))
        #expect(work.store?.get(app, key("lost")) == .missing)
        work.store?.abandon()  // ends with a crash: no compaction

        let failed = try #require(work.attempts.count == 5 ? work.attempts[1] : nil)
        guard case .failure(.failure(let reason)) = failed.outcome else {
            Issue.record(
                "the change whose \(failure.operation) failed was not reported as a storage failure: \(failed.outcome)")
            return
        }
        #expect(reason.contains(String(cString: strerror(failure.fault.code))), "\(reason)")
        #expect([0, 2, 3, 4].allSatisfy { work.attempts[$0].succeeded })

        // After the failure was reported, no crash state may hold the failed change's bytes.
        let marker = Array(Self.failedValue.utf8)
        var model = DiskModel(fileSystem.initial)
        let operations = fileSystem.operations
        var leaks: [String] = []
        for point in 0...operations.count {
            if point > 0 { model.apply(operations[point - 1]) }
            guard point >= failed.completedAt else { continue }
            for disk in model.crashStates() {
                for (name, bytes) in disk.files(in: work.directory) where Self.contains(bytes, marker) {
                    leaks.append("after operation \(point) (\(fileSystem.labels[point - 1])): \(name)")
                }
            }
        }
        #expect(leaks.count == 0, "the failed change is on disk: \(leaks.prefix(3))")

        let report = CrashEnumeration.run(fileSystem, work, CrashPointTests.checker)
        #expect(
            report.failures.count == 0,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }

    static func contains(_ bytes: [UInt8], _ part: [UInt8]) -> Bool {
        guard bytes.count >= part.count else { return false }
        return (0...(bytes.count - part.count)).contains { bytes[$0..<($0 + part.count)].elementsEqual(part) }
    }

    /// Runs the crash-point workload once per failable call (open, write, fsync, fdatasync,
    /// truncate, rename, unlink, mkdir), failing that call (`ENOSPC` for a write, else `EIO`),
    /// once without and once with the call taking effect; then crashes after every commit
    /// that completed from the fault on and at the end, keeping all or none of the unsynced
    /// data, and checks recovery shows exactly the acknowledged commits (and, but after a full
    /// disk, which drops history to make room, the history they made).
    @Test func everyFailedCallThenACrashKeepsExactlyTheAcknowledgedCommits() {
        let baseline = SimulatedFileSystem()
        CrashPointTests.run(CrashWorkload(fileSystem: baseline, options: CrashPointTests.options))
        let calls = baseline.calls
        #expect(calls.count > 150)
        var faults = 0
        var states = 0
        var failedCommits = 0
        var failures: [String] = []
        var known: [Disk: CrashChecker.Recovered] = [:]
        var knownFull: [Disk: CrashChecker.Recovered] = [:]
        var dataOnly = CrashPointTests.checker
        dataOnly.checksHistory = false
        for index in calls.indices {
            let full = calls[index].hasPrefix("write ")  // ENOSPC: history may be dropped
            let checker = full ? dataOnly : CrashPointTests.checker
            for tookEffect in [false, true] {
                let fileSystem = SimulatedFileSystem()
                fileSystem.inject { call, operation, _ in
                    guard call == index else { return nil }
                    return InjectedFault(code: operation == "write" ? ENOSPC : EIO, tookEffect: tookEffect)
                }
                let work = CrashWorkload(fileSystem: fileSystem, options: CrashPointTests.options)
                CrashPointTests.run(work)
                faults += 1
                failedCommits += work.attempts.filter { !$0.succeeded }.count
                let start = fileSystem.faults.first ?? 0
                let points = Set(work.attempts.map(\.completedAt).filter { $0 >= start } + [fileSystem.operationCount])
                var model = DiskModel(fileSystem.initial)
                let operations = fileSystem.operations
                for point in 0...operations.count {
                    if point > 0 { model.apply(operations[point - 1]) }
                    guard points.contains(point) else { continue }
                    let allowed = work.allowedContents(after: point)
                    for disk in Set([model.durable.reachable(), model.current.reachable()]) {
                        states += 1
                        let recovered = (full ? knownFull[disk] : known[disk]) ?? checker.recover(disk)
                        if full { knownFull[disk] = recovered } else { known[disk] = recovered }
                        let problem: String? =
                            switch recovered {
                            case .failed(let reason): reason
                            case .content(let content): checker.judge(content, allowed: allowed)
                            }
                        if let problem {
                            failures.append(
                                "failing call \(index) (\(calls[index]), took effect: \(tookEffect)), crash after operation \(point): \(problem)"
                            )
                        }
                    }
                }
            }
        }
        print(
            "faults injected: \(faults) (each of \(calls.count) calls failed in 2 ways), \(failedCommits) commits failed, \(states) crash states checked after them"
        )
        if getenv("KVD_CRASH_TRACE") != nil { print(failures.joined(separator: "\n")) }
        #expect(failures.count == 0, "crash states failed; the first:\n\(failures.prefix(3).joined(separator: "\n\n"))")
    }
}

/// Where the file system refuses `O_DIRECT` writes (`EINVAL`: other alignment, or none at all),
/// the log is written through the page cache, unpadded, and nothing is lost.
@Suite struct DirectWriteFallbackTests {
    @Test func refusedDirectWritesFallBackToThePageCache() throws {
        let fileSystem = SimulatedFileSystem()
        let refused = Mutex(true)
        fileSystem.inject { _, operation, name in  // the first log write is the O_DIRECT probe
            guard operation == "write", name == "kvd.wal" else { return nil }
            return refused.withLock { first in
                defer { first = false }
                return first ? InjectedFault(code: EINVAL, tookEffect: false) : nil
            }
        }
        let app = domain("com.example.fallback")
        do {
            let store = try Store(directory: "/data/state", options: CrashPointTests.options, fileSystem: fileSystem)
            #expect(store.logIsDirect == false)
            for index in 0..<5 {
                _ = try store.commit(app, .set(key("k\(index)"), .integer(Int64(index)), ifRevision: nil))
            }
            store.abandon()
        }
        // Without O_DIRECT the records are not padded to whole 512-byte blocks.
        let logWrites = fileSystem.labels.filter { $0.hasPrefix("write kvd.wal ") }
        #expect(logWrites.count >= 5)
        #expect(
            logWrites.allSatisfy { !$0.hasPrefix("write kvd.wal 512 ") && !$0.hasPrefix("write kvd.wal 1024 ") },
            "\(logWrites)")
        let reopened = try Store(
            directory: "/data/state", fileSystem: SimulatedFileSystem(fileSystem.model.durable.reachable()))
        defer { reopened.close() }
        #expect(reopened.list(app)?.values.count == 5)
        #expect(reopened.logIsDirect == true, "the simulated disk takes O_DIRECT when not told otherwise")
    }
}
