import FoundationEssentials
import Glibc
import KVSystem
import KVValues
import Testing

@testable import KVStorage

/// Simulates a crash after every disk operation of a workload (set, delete, apply, domain
/// deletion, a system instance's lock and unlock, group commits across domains (a fleet
/// mirror's), several compactions, a restart) in every way the unsynced data could reach the
/// disk, and checks recovery (see ``CrashChecker``). `KVD_CRASH_TRACE=1` prints the operations.
@Suite struct CrashPointTests {
    /// A small reservation: crash states still hold reserved zeros after the records.
    static let options = StoreOptions(compactionLogBytes: 700, logReservationBytes: 64)
    static let directory = "/data/state"
    /// Apply number → key count, for the all-or-nothing check.
    static let applies = [1: 3, 2: 2, 3: 2, 4: 4, 5: 3, 6: 4, 7: 3]
    static let checker = CrashChecker(directory: directory, options: options, applies: applies)

    static func run(_ work: CrashWorkload) {
        let a = domain("com.example.a")
        let b = domain("com.example.b")
        let c = domain("com.example.c")
        let global = domain("NSGlobalDomain")
        work.open()
        work.commit(a, .set(key("k1"), .integer(1), ifRevision: nil))
        work.commit(a, .set(key("k2"), .string("two"), ifRevision: nil))
        work.commit(b, CrashWorkload.markedApply(1, keys: 3))
        work.commit(a, .set(key("k1"), .integer(11), ifRevision: nil))
        work.commit(Domain.locks(of: a), .set(key("k1"), .bool(true), ifRevision: nil))  // kvd --system: Lock
        work.commit(global, .set(key("AppleLocale"), .string("en_GB"), ifRevision: nil))
        work.commit(a, .delete(key("k2")))
        work.commit(b, CrashWorkload.markedApply(2, keys: 2, also: [Change(key: key("plain"), value: .real(2.5))]))
        work.commit(c, .set(key("x"), .real(1.5), ifRevision: nil))
        work.commit(c, .set(key("y"), .bool(true), ifRevision: nil))
        work.commit(c, .deleteDomain)
        work.commit(a, CrashWorkload.markedApply(3, keys: 2, also: [Change(key: key("k1"), value: nil)]))
        work.commit(b, .delete(key("plain")))
        work.restart()  // a crash of the process: recovery replays the log
        work.commit(b, .deleteDomain)
        work.commit(b, CrashWorkload.markedApply(4, keys: 4))
        work.commit(Domain.locks(of: b), .set(key("m4-0"), .bool(true), ifRevision: nil))
        // a fleet revision: values and locks
        work.commitGroup(CrashWorkload.markedGroup(6, keys: 2, in: [a, Domain.locks(of: a)]))
        work.commit(a, .set(key("when"), .date(Date(timeIntervalSince1970: 1_800_000_000.25)), ifRevision: nil))
        work.commit(a, .set(key("blob"), .data(Data((0..<64).map { UInt8($0) })), ifRevision: nil))
        work.commit(global, .delete(key("AppleLocale")))
        work.commit(
            c,
            .set(
                key("list"), .array([.integer(1), .string("two"), .dictionary(["$x": .bool(false)])]), ifRevision: nil))
        work.commit(a, .set(key("long"), .string(String(repeating: "long value ", count: 30)), ifRevision: nil))
        work.commit(c, .deleteDomain)
        work.close()  // compacts
        work.open()
        work.commit(a, .set(key("k1"), .integer(42), ifRevision: 0))
        work.commit(Domain.locks(of: a), .delete(key("k1")))  // Unlock
        work.commitGroup(
            CrashWorkload.markedGroup(7, keys: 1, in: [a, b, global]) + [
                DomainChanges(domain: c, changes: [Change(key: key("plain-c"), value: .integer(7))])
            ])
        let removals = (0..<4).map { Change(key: key("m4-\($0)"), value: nil) }
        work.commit(b, CrashWorkload.markedApply(5, keys: 3, also: removals))
        work.commit(a, .delete(key("long")))
        work.close()
    }

    /// The workload's recorded run and the check of every crash state after each operation.
    /// Computed once (lazily, thread-safely) and only read afterwards.
    nonisolated(unsafe) static let enumeration: (SimulatedFileSystem, CrashWorkload, CrashEnumeration.Report) = {
        let fileSystem = SimulatedFileSystem()
        let work = CrashWorkload(fileSystem: fileSystem, directory: directory, options: options)
        run(work)
        if getenv("KVD_CRASH_TRACE") != nil {
            for (index, label) in fileSystem.labels.enumerated() { print(index + 1, label) }
        }
        return (fileSystem, work, CrashEnumeration.run(fileSystem, work, checker))
    }()

    @Test func everyCrashPointKeepsEveryAcknowledgedCommit() {
        let (fileSystem, work, report) = Self.enumeration
        #expect(work.failedOpens.isEmpty)
        #expect(
            work.attempts.count == 28 && work.attempts.allSatisfy(\.succeeded), "every commit of the workload succeeds")
        let resets = fileSystem.labels.filter { $0 == "rename .kvd.wal.tmp to kvd.wal" }.count
        #expect(resets >= 2, "the workload compacts several times (\(resets) log resets)")
        let starts = fileSystem.labels.filter { $0 == "rename .kvd.wal.next.tmp to kvd.wal.next" }.count
        let ends = fileSystem.labels.filter { $0 == "rename kvd.wal.next to kvd.wal" }.count
        #expect(starts >= 3 && ends >= 3, "folds that start and end the next log: \(starts), \(ends)")
        #expect(work.interleavedFolds >= 3, "folds that a commit came between: \(work.interleavedFolds)")
        print(
            "crash points: \(report.points) disk operations; crash states checked: \(report.states) (\(report.distinct) distinct disks)"
        )
        #expect(report.points > 130)
        #expect(
            report.failures.count == 0,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }

    /// Crashes again at every operation of the recovery (and of one commit and a close) of each
    /// distinct crashed disk: recovery itself must be crash-safe, and once it has returned, what
    /// it served must survive.
    @Test func everyCrashDuringRecoveryRecoversTheSameState() {
        let (_, _, outer) = Self.enumeration
        let total = CrashEnumeration.crashDuringRecovery(
            of: outer, directory: Self.directory, options: Self.options, checker: Self.checker
        ) { work in
            work.commit(domain("com.example.a"), .set(key("after"), .integer(7), ifRevision: nil))
        }
        print(
            "crashes during recovery: \(outer.recovered.count) crashed disks recovered again, \(total.points) crash points, \(total.states) crash states checked (\(total.distinct) more distinct disks)"
        )
        #expect(
            total.failures.count == 0,
            "crash states failed; the first:\n\(total.failures.prefix(3).joined(separator: "\n\n"))")
    }
}

/// The limits at every crash point: values as deep as the contract allows, and values that grow
/// when written, each followed by other acknowledged writes, through a compaction and a restart;
/// every crash, and every crash during the recovery from one, keeps every acknowledged write (a
/// record the log cannot read never takes the later ones with it).
@Suite struct LimitsCrashPointTests {
    static let options = StoreOptions(compactionLogBytes: 1500, logReservationBytes: 64)
    static let checker = CrashChecker(directory: CrashPointTests.directory, options: options, applies: [:])

    static func run(_ work: CrashWorkload) {
        let a = domain("com.example.a")
        let b = domain("com.example.b")
        work.open()
        work.commit(a, .set(key("deep"), StorageLimitsTests.nested(512), ifRevision: nil))  // 515 levels in its record
        work.commit(b, .set(key("after-deep"), .integer(1), ifRevision: nil))
        // "1e15" is written in 18 bytes
        work.commit(a, .set(key("grows"), .array(Array(repeating: .real(1e15), count: 40)), ifRevision: nil))
        work.commit(b, .set(key("after-grows"), .integer(2), ifRevision: nil))
        work.restart()
        work.commit(b, .set(key("after-restart"), .string("three"), ifRevision: nil))
        work.close()
    }

    @Test func deepAndGrowingWritesAndTheWritesAfterThemSurviveEveryCrash() {
        let fileSystem = SimulatedFileSystem()
        let work = CrashWorkload(fileSystem: fileSystem, directory: CrashPointTests.directory, options: Self.options)
        Self.run(work)
        #expect(
            work.attempts.count == 5 && work.attempts.allSatisfy(\.succeeded), "every commit of the workload succeeds")
        let report = CrashEnumeration.run(fileSystem, work, Self.checker)
        #expect(report.points > 20)
        #expect(
            report.failures.isEmpty,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
        let again = CrashEnumeration.crashDuringRecovery(
            of: report, directory: CrashPointTests.directory, options: Self.options, checker: Self.checker
        ) { work in
            work.commit(domain("com.example.b"), .set(key("after-recovery"), .integer(4), ifRevision: nil))
        }
        #expect(
            again.failures.isEmpty,
            "crash states during recovery failed; the first:\n\(again.failures.prefix(3).joined(separator: "\n\n"))")
    }
}
