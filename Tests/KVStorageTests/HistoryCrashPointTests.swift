import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// History's own crash points: a domain whose history is pruned (each key keeps its last 2
/// values), appended to at every fold and rewritten once it has grown past its bound, through
/// a restart and a domain deletion. Every crash state must serve, of each key, the newest
/// committed values (at least 2, or all) and nothing uncommitted, and rebuild the committed
/// state at its oldest revision, halfway, and now (``CrashChecker/judgeHistory``).
@Suite struct HistoryCrashPointTests {
    static let options = StoreOptions(compactionLogBytes: 700, logReservationBytes: 64, historyKeep: 2, historyDays: 0)
    static let checker = CrashChecker(directory: CrashPointTests.directory, options: options, applies: [:])

    static func run(_ work: CrashWorkload) {
        let a = domain("com.example.a")
        let b = domain("com.example.b")
        work.open()
        for step in 0..<90 {
            if step == 45 { work.restart() }
            if step == 60 { work.commit(a, .deleteDomain) }
            work.commit(step % 5 == 4 ? b : a, .set(key("k\(step % 3)"), .integer(Int64(step)), ifRevision: nil))
        }
        work.close()
    }

    @Test func prunedHistoryKeepsTheNewestValuesThroughEveryCrash() {
        let fileSystem = SimulatedFileSystem()
        let work = CrashWorkload(fileSystem: fileSystem, directory: CrashPointTests.directory, options: Self.options)
        Self.run(work)
        #expect(
            work.attempts.count == 91 && work.attempts.allSatisfy(\.succeeded), "every commit of the workload succeeds")
        let rewrites = fileSystem.labels.filter { $0 == "rename .com.example.a.history.tmp to com.example.a.history" }
            .count
        let appends = fileSystem.labels.filter { $0.hasPrefix("write com.example.a.history") }.count
        #expect(
            rewrites >= 2 && appends >= 5,
            "the history of a is created, appended to (\(appends)) and pruned (\(rewrites) rewrites)")
        #expect(work.interleavedFolds >= 5, "folds that a commit came between: \(work.interleavedFolds)")
        let report = CrashEnumeration.run(fileSystem, work, Self.checker)
        print(
            "history crash points: \(report.points) disk operations; crash states checked: \(report.states) (\(report.distinct) distinct disks)"
        )
        #expect(
            report.failures.count == 0,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }
}

/// Forgetting at every crash point: a key's values and a whole domain's, in the history file, and
/// the log (before and after a restart). Every crash state keeps every acknowledged commit, and
/// once a forget was acknowledged, no file of the crashed disk holds a forgotten value, nor does
/// what recovery serves or writes.
@Suite struct ForgetCrashPointTests {
    static let options = StoreOptions(compactionLogBytes: 700, logReservationBytes: 64, historyKeep: 20, historyDays: 0)
    static let a = domain("com.example.a"), b = domain("com.example.b")
    /// What each forget (in order) removes: every value it forgets starts so.
    static let forgotten = ["SECRET-A", "SECRET-B"]

    static func run(_ work: CrashWorkload) {
        work.open()
        work.commit(a, .set(key("k1"), .integer(1), ifRevision: nil))
        work.commit(a, .set(key("token"), .string("SECRET-A1"), ifRevision: nil))
        work.commit(b, .set(key("pw"), .string("SECRET-B1"), ifRevision: nil))
        work.commit(a, .set(key("token"), .string("SECRET-A2"), ifRevision: nil))
        work.commit(a, .set(key("k1"), .string(String(repeating: "filler ", count: 60)), ifRevision: nil))  // a fold
        work.commit(a, .set(key("token"), .string("SECRET-A3"), ifRevision: nil))
        work.restart()
        work.commit(a, .set(key("token"), .string("SECRET-A4"), ifRevision: nil))
        work.commit(a, .delete(key("token")))
        work.changeHistory(.forget(a, key("token")))
        work.commit(a, .set(key("k1"), .integer(3), ifRevision: nil))
        work.commit(b, .deleteDomain)
        work.changeHistory(.forget(b, nil))
        work.commit(a, .set(key("token"), .string("LATER"), ifRevision: nil))
        work.close()
    }

    /// Why a crash state at `point` fails, or nil.
    static func judge(_ disk: Disk, point: Int, _ work: CrashWorkload, _ checker: CrashChecker) -> String? {
        let done = work.historyChanges.enumerated().filter { $0.element.completedAt <= point && $0.element.succeeded }
            .map { forgotten[$0.offset] }
        func leak(_ files: [String: [UInt8]], _ when: String) -> String? {
            for (name, bytes) in files {
                for marker in done where CopiesSetAside.contains(bytes, Array(marker.utf8)) {
                    return "\(when): \(name) holds \(marker)"
                }
            }
            return nil
        }
        if let problem = leak(disk.files(in: CrashPointTests.directory), "on the crashed disk") { return problem }
        switch checker.recover(disk) {
        case .failed(let reason): return reason
        case .content(let content):
            if let problem = checker.judge(content, allowed: work.allowedContents(after: point)) { return problem }
        }
        let fileSystem = SimulatedFileSystem(disk)
        do {
            let store = try Store(directory: CrashPointTests.directory, options: options, fileSystem: fileSystem)
            let served = try store.history(a).entries + store.history(b).entries
            store.close()  // compacts: folds what the log held
            if let value = served.compactMap(\.value).first(where: { value in done.contains { "\(value)".contains($0) }
            }) {
                return "history serves \(value)"
            }
        } catch {
            return "recovery failed: \(error)"
        }
        return leak(
            fileSystem.model.durable.reachable().files(in: CrashPointTests.directory), "after recovery and a fold")
    }

    @Test func noForgottenValueComesBackAfterAnyCrash() {
        let fileSystem = SimulatedFileSystem()
        let work = CrashWorkload(fileSystem: fileSystem, directory: CrashPointTests.directory, options: Self.options)
        Self.run(work)
        #expect(work.attempts.allSatisfy(\.succeeded) && work.historyChanges.allSatisfy(\.succeeded))
        var checker = CrashChecker(directory: CrashPointTests.directory, options: Self.options, applies: [:])
        checker.checksHistory = false  // forgetting is not retention: the values are checked above
        var model = DiskModel(fileSystem.initial)
        var (states, failures): (Int, [String]) = (0, [])
        var judged: [Disk: Set<Int>] = [:]
        for point in 0...fileSystem.operations.count {
            if point > 0 { model.apply(fileSystem.operations[point - 1]) }
            for disk in model.crashStates() {
                let done = work.historyChanges.filter { $0.completedAt <= point }.count
                guard
                    judged[disk, default: []].insert(
                        done * 1000 + work.attempts.filter { $0.completedAt <= point }.count
                    ).inserted
                else { continue }
                states += 1
                if let problem = Self.judge(disk, point: point, work, checker) {
                    failures.append(
                        "crash after operation \(point) (\(point > 0 ? fileSystem.labels[point - 1] : "nothing")): \(problem)"
                    )
                }
            }
        }
        print("forget crash points: \(fileSystem.operations.count) disk operations, \(states) crash states checked")
        #expect(failures.isEmpty, "crash states failed; the first:\n\(failures.prefix(3).joined(separator: "\n\n"))")
    }
}

/// A full disk at every crash point: while the disk is full, a commit makes room by dropping the
/// history files, compacting the log, and trying again; every crash state keeps every acknowledged
/// commit (history may be gone: it starts again from the values).
@Suite struct FullDiskCrashPointTests {
    static let options = StoreOptions(compactionLogBytes: 700, logReservationBytes: 64, historyKeep: 20, historyDays: 0)

    @Test func historyIsDroppedBeforeAWriteIsRefusedAndNoAcknowledgedValueIsLost() {
        let a = domain("com.example.a")
        let b = domain("com.example.b")
        let fileSystem = SimulatedFileSystem()
        let full = Mutex(false)
        fileSystem.inject { _, operation, name in
            if operation == "unlink", name.hasSuffix(".history") { full.withLock { $0 = false } }
            guard ["write", "fsync", "fdatasync", "preallocate"].contains(operation), full.withLock({ $0 }) else {
                return nil
            }
            return InjectedFault(code: ENOSPC, tookEffect: false)
        }
        let work = CrashWorkload(fileSystem: fileSystem, directory: CrashPointTests.directory, options: Self.options)
        work.open()
        for step in 0..<12 {
            work.commit(step % 3 == 2 ? b : a, .set(key("k\(step % 2)"), .integer(Int64(step)), ifRevision: nil))
        }
        full.withLock { $0 = true }  // the disk fills up: a history file must go before the next write is taken
        work.commit(a, .set(key("k0"), .string("while full"), ifRevision: nil))
        #expect(!full.withLock { $0 }, "history files were dropped")
        work.commit(b, .set(key("k1"), .string("after"), ifRevision: nil))
        work.restart()
        work.commit(a, .set(key("k1"), .string("after restart"), ifRevision: nil))
        work.close()
        #expect(
            work.attempts.count == 15 && work.attempts.allSatisfy(\.succeeded),
            "every write is taken: \(work.attempts.map(\.outcome))")
        var checker = CrashChecker(directory: CrashPointTests.directory, options: Self.options, applies: [:])
        checker.checksHistory = false  // dropped history is allowed; the data is not
        let report = CrashEnumeration.run(fileSystem, work, checker)
        print(
            "full-disk crash points: \(report.points) disk operations; crash states checked: \(report.states) (\(report.distinct) distinct disks)"
        )
        #expect(
            report.failures.isEmpty,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }
}
