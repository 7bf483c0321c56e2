@testable import KVStorage
import KVValues
import Testing

/// History's own crash points: a domain whose history is pruned (each key keeps its last 2
/// values), appended to at every fold and rewritten once it has grown past its bound, through
/// a restart and a domain deletion. Every crash state must serve, of each key, the newest
/// committed values (at least 2, or all) and nothing uncommitted, and rebuild the committed
/// state at its oldest revision, halfway, and now (``CrashChecker/judgeHistory``).
@Suite struct HistoryCrashPointTests {
    static let options = StoreOptions(compactionLogBytes: 700, logReservationBytes: 64, historyKeep: 2, historyDays: 0)
    static let checker = CrashChecker(directory: CrashPointTests.directory, options: options, applies: [:])

    static func run(_ work: CrashWorkload) {
        let a = domain("com.example.a"), b = domain("com.example.b")
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
        #expect(work.attempts.count == 91 && work.attempts.allSatisfy(\.succeeded), "every commit of the workload succeeds")
        let rewrites = fileSystem.labels.filter { $0 == "rename .com.example.a.history.tmp to com.example.a.history" }.count
        let appends = fileSystem.labels.filter { $0.hasPrefix("write com.example.a.history") }.count
        #expect(rewrites >= 2 && appends >= 5, "the history of a is created, appended to (\(appends)) and pruned (\(rewrites) rewrites)")
        let report = CrashEnumeration.run(fileSystem, work, Self.checker)
        print("history crash points: \(report.points) disk operations; crash states checked: \(report.states) (\(report.distinct) distinct disks)")
        #expect(report.failures.count == 0, "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }
}
