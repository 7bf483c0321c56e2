import Dispatch
import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// A deterministic scheduler of a fold running on its own thread beside the commit queue, over
/// a ``SimulatedFileSystem``: every call that may change the disk waits at the gate
/// (``SimulatedFileSystem/beforeCall``) until its side (the fold's thread, or anyone else: the
/// commit queue) has a step left; the test hands out steps and waits until both sides are
/// parked (at the gate with no step left, or done), so the disk operations come in one chosen
/// order, the same every run.
final class FoldScheduler: Sendable {
    enum Side { case fold, commit }

    private struct State {
        var foldThread: pthread_t?
        var foldRunning = false
        var foldsRun = 0
        /// Steps left per side; nil: unlimited.
        var foldSteps: Int?
        var commitSteps: Int?
        var parked: Set<Side> = []
        var commitsDone = 0
        /// Calls that took a step each side was allowed (not those made while it had no limit).
        var stepped: [Side: Int] = [:]
    }

    private let state = Mutex(State())
    private let foldQueue = DispatchQueue(label: "test.fold-scheduler")

    /// For ``StoreOptions/foldRunner``: runs each fold on the scheduler's own thread.
    var runner: @Sendable (@escaping @Sendable () -> Void) -> Void {
        { [self] work in
            state.withLock { $0.foldRunning = true }
            foldQueue.async {
                self.state.withLock { $0.foldThread = pthread_self() }
                work()
                self.state.withLock { state in
                    (state.foldThread, state.foldRunning) = (nil, false)
                    state.foldsRun += 1
                }
            }
        }
    }

    var foldsRun: Int { state.withLock { $0.foldsRun } }

    /// How many calls of `side` took a step it was allowed.
    func stepped(_ side: Side) -> Int { state.withLock { $0.stepped[side] ?? 0 } }

    /// The gate each disk call passes (``SimulatedFileSystem/beforeCall``).
    func gate() {
        let side: Side =
            state.withLock { state in
                state.foldThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            } ? .fold : .commit
        while true {
            let go = state.withLock { state -> Bool in
                let steps = side == .fold ? state.foldSteps : state.commitSteps
                guard let steps else { return true }
                guard steps > 0 else {
                    state.parked.insert(side)
                    return false
                }
                if side == .fold { state.foldSteps = steps - 1 } else { state.commitSteps = steps - 1 }
                state.stepped[side, default: 0] += 1
                return true
            }
            if go { return }
            usleep(20)
        }
    }

    /// Gives `side` `steps` more disk calls (nil: any number).
    func allow(_ side: Side, _ steps: Int?) {
        state.withLock { state in
            state.parked.remove(side)
            if side == .fold {
                state.foldSteps = steps.map { $0 + (state.foldSteps ?? 0) }
            } else {
                state.commitSteps = steps.map { $0 + (state.commitSteps ?? 0) }
            }
        }
    }

    /// Counts a commit's completion (``CrashWorkload/submit(_:_:onDone:)``).
    func commitDone() { state.withLock { $0.commitsDone += 1 } }

    /// Waits until the fold is parked at the gate or has finished.
    func waitForFold() {
        waitUntil { !$0.foldRunning || $0.parked.contains(.fold) }
    }

    /// Waits until `count` commits completed, or the commit queue is parked at the gate.
    func waitForCommits(_ count: Int) {
        waitUntil { $0.commitsDone >= count || $0.parked.contains(.commit) }
    }

    private func waitUntil(_ condition: (State) -> Bool) {
        for _ in 0..<500_000 where !state.withLock({ condition($0) }) { usleep(20) }
    }
}

/// Every order the scheduler can make of a running fold's disk calls and a commit's (the
/// commit after the fold's first `foldSteps` calls, the fold going on after the commit's first
/// `commitSteps`), with a crash at every disk operation of each run, in every way the unsynced
/// data could reach the disk (``CrashEnumeration``): no acknowledged write is lost, no revision
/// reused, the history served is what was committed.
@Suite struct FoldInterleavingTests {
    static let options = StoreOptions(compactionLogBytes: 300, logReservationBytes: 64)
    static let checker = CrashChecker(directory: CrashPointTests.directory, options: options, applies: [:])
    static let a = domain("com.example.a")
    static let b = domain("com.example.b")

    /// One run: commits until a fold starts (the fold parked at its first call), then the fold
    /// takes `foldSteps` calls, a commit `commitSteps`, the fold the rest, the commit the rest;
    /// one more commit after the fold's end, and a close. Returns the workload, its disk and
    /// the scheduler.
    static func run(foldSteps: Int, commitSteps: Int, fileSystem: SimulatedFileSystem = SimulatedFileSystem()) -> (
        CrashWorkload, SimulatedFileSystem, FoldScheduler
    ) {
        let scheduler = FoldScheduler()
        let work = CrashWorkload(fileSystem: fileSystem, directory: CrashPointTests.directory, options: options)
        work.foldRunner = scheduler.runner
        scheduler.allow(.fold, 0)
        fileSystem.beforeCall.withLock { $0 = { scheduler.gate() } }
        work.open()
        var round = 0
        while scheduler.foldsRun == 0 && round < 20 && !started(work) {
            work.commit(round % 2 == 0 ? a : b, .set(key("k\(round % 3)"), .integer(Int64(round)), ifRevision: nil))
            round += 1
        }
        scheduler.waitForFold()
        scheduler.allow(.fold, foldSteps)
        scheduler.waitForFold()
        scheduler.allow(.commit, 0)
        let finish = work.submit(a, .set(key("during"), .integer(1), ifRevision: nil)) { scheduler.commitDone() }
        scheduler.allow(.commit, commitSteps)
        scheduler.waitForCommits(1)
        scheduler.allow(.fold, nil)
        scheduler.waitForFold()
        scheduler.allow(.commit, nil)
        finish()
        work.store?.queue.sync {}  // the fold's end
        work.commit(b, .set(key("after"), .string("x"), ifRevision: nil))
        work.close()
        fileSystem.beforeCall.withLock { $0 = nil }
        // the commit after it may start a second fold (on that thread, unlimited): one after a promotion
        #expect(scheduler.foldsRun >= 1, "a fold ran on the scheduler's thread")
        return (work, fileSystem, scheduler)
    }

    /// Whether the store started a fold (``kvd.wal.next`` is in use).
    static func started(_ work: CrashWorkload) -> Bool {
        work.store.map { store in store.queue.sync { store.wal.fold != nil } } ?? false
    }

    /// The disk calls of the fold and of the commit (up to its completion), from a run in
    /// which the fold runs whole before the commit.
    static func calls() -> (fold: Int, commit: Int) {
        let (_, _, scheduler) = run(foldSteps: 1000, commitSteps: 1000)
        return (scheduler.stepped(.fold), scheduler.stepped(.commit))
    }

    @Test func everyInterleavingOfAFoldAndACommitSurvivesEveryCrash() {
        var known: [Disk: CrashChecker.Recovered] = [:]
        var failures: [String] = []
        var (points, states, runs) = (0, 0, 0)
        let (foldCalls, commitCalls) = Self.calls()
        #expect(foldCalls >= 8 && commitCalls >= 2, "the fold makes \(foldCalls) disk calls, the commit \(commitCalls)")
        // The fold parked at each of its calls (and done), the commit at each of its own: the
        // commit's calls past its last one would repeat the schedule before.
        for foldSteps in 0...foldCalls {
            for commitSteps in 0..<max(commitCalls, 1) {
                let (work, fileSystem, _) = Self.run(foldSteps: foldSteps, commitSteps: commitSteps)
                runs += 1
                let succeeded = work.attempts.allSatisfy { $0.succeeded }
                #expect(succeeded, "every commit succeeds")
                let report = CrashEnumeration.run(fileSystem, work, Self.checker, known: known)
                known = report.recovered
                (points, states) = (points + report.points, states + report.states)
                failures += report.failures.map { "fold steps \(foldSteps), commit steps \(commitSteps): \($0)" }
            }
            if failures.count > 3 { break }
        }
        print(
            "fold interleavings: a fold of \(foldCalls) disk calls, a commit of \(commitCalls); \(runs) schedules, \(points) crash points, \(states) crash states (\(known.count) distinct disks)"
        )
        #expect(failures.isEmpty, "crash states failed; the first:\n\(failures.prefix(3).joined(separator: "\n\n"))")
    }

    /// The folder sync after the fold's end renamed `kvd.wal.next` over `kvd.wal` fails (the
    /// rename not durable): the next fold syncs the folder before its own `kvd.wal.next`, or a
    /// crash could bring the old `kvd.wal` back under it, without the commits between the folds.
    @Test func aFailedSyncAfterAFoldsEndIsMadeBeforeTheNextFold() {
        let fileSystem = SimulatedFileSystem()
        let seen = Mutex((renames: 0, failed: false))
        fileSystem.inject { _, operation, name in
            seen.withLock { seen -> InjectedFault? in
                // the first: the log started at open; the second: the fold's end
                if operation == "rename" && name == StorageFormat.logFileName { seen.renames += 1 }
                guard seen.renames == 2, !seen.failed, operation == "fsync", name == "state" else { return nil }
                seen.failed = true
                return InjectedFault(code: EIO, tookEffect: false)
            }
        }
        let (work, _, _) = Self.run(foldSteps: 1000, commitSteps: 1000, fileSystem: fileSystem)
        #expect(seen.withLock { $0.failed }, "the folder sync after the fold's end failed")
        let starts = fileSystem.labels.filter { $0 == "rename .kvd.wal.next.tmp to kvd.wal.next" }.count
        #expect(starts == 2, "a second fold started after the failed sync: \(starts) starts")
        let succeeded = work.attempts.allSatisfy { $0.succeeded }
        #expect(succeeded, "every commit succeeds")
        let report = CrashEnumeration.run(fileSystem, work, Self.checker)
        #expect(
            report.failures.isEmpty,
            "crash states failed; the first:\n\(report.failures.prefix(3).joined(separator: "\n\n"))")
    }
}
