import Dispatch
import KVSystem
import KVValues
import Synchronization

/// What one fold writes (``StateFiles/fold(_:)``): the files of the domains changed since the
/// last fold, as of one revision, and the history of the commits up to it.
struct FoldJob: Sendable {
    /// Every change at or below it is in the files once the fold is done.
    let revision: Int64
    /// The domains whose files it writes.
    let dirty: Set<Domain>
    /// The committed state at ``revision`` of each domain it writes or folds history of (none
    /// for a domain that no longer exists). Shared with the store: a domain the store changes
    /// meanwhile is copied by the store, once.
    let domains: [Domain: DomainState]
    /// The commits up to ``revision`` still only in the log, per domain.
    let history: [Domain: [RecentCommit]]
    /// The log's length at ``revision``.
    let logLength: Int64
}

/// A fold handed to the store's fold queue (or a test's runner): its job and, once done, its
/// outcome. Whoever comes first runs it: the fold queue, or the commit queue when it must wait
/// for the fold before the queue got to it. Thread-safe.
final class FoldTask: Sendable {
    let job: FoldJob
    private let files: StateFiles
    private let outcome = Mutex<Result<Void, SystemError>?>(nil)
    private let claimed = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    init(_ job: FoldJob, files: StateFiles) { (self.job, self.files) = (job, files) }

    /// Runs the fold on the calling thread unless it was run (or is running) already; returns
    /// whether it ran it.
    @discardableResult
    func runUnlessClaimed() -> Bool {
        guard !claimed.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        complete(Result { () throws(SystemError) in try files.fold(job) })
        return true
    }

    /// Whether the fold has finished (successfully or not).
    var isDone: Bool { outcome.withLock { $0 != nil } }

    /// Records the fold's outcome and wakes ``wait()``; once.
    private func complete(_ result: Result<Void, SystemError>) {
        outcome.withLock { $0 = result }
        done.signal()
    }

    /// Runs the fold if nobody did yet, else blocks until it has finished; returns its outcome.
    func wait() -> Result<Void, SystemError> {
        runUnlessClaimed()
        if let result = outcome.withLock({ $0 }) { return result }
        done.wait()
        done.signal()  // a later wait() returns at once too
        return outcome.withLock { $0! }
    }
}

/// Folding the log into the files off the commit queue: commits never wait for it. Everything
/// here runs on ``Store/queue``.
///
/// The order that keeps every acknowledged change across a crash: when a fold of everything up
/// to revision R starts, the commit queue starts `kvd.wal.next` of base R (temporary file,
/// fsync, rename, folder fsync; no record is carried) and commits go there from then on, while
/// the fold writes the history and domain files as of R and syncs them on its own thread, with
/// `kvd.wal` (everything up to R) untouched. Only then is `kvd.wal.next` renamed over `kvd.wal`.
/// A crash at any point finds `kvd.wal` over files at R or older, with or without
/// `kvd.wal.next` above it (recovery replays both, then compacts), or `kvd.wal` of base R over
/// files at R.
extension Store {
    /// What the log may gain while a fold runs, for the disk's room check only
    /// (``startFoldIfDue()``): a quarter of the compaction threshold (1 MiB by default), at
    /// least 64 KiB. Commits never wait for a fold however far the log grows meanwhile.
    var foldGrowthBytes: Int { max(options.compactionLogBytes / 4, 64 << 10) }

    /// Starts a fold of everything up to the current revision when the log has grown past its
    /// threshold, no fold runs, the log is intact and the store is open: takes the committed
    /// state of the dirty domains (shared, not copied), starts `kvd.wal.next`
    /// (``WriteAheadLog/startFold(_:revision:)``), hands the fold to ``foldRunner`` and returns.
    /// After a fold that failed (both logs kept), everything is compacted here instead.
    ///
    /// On a disk without room for what the fold writes beside what the log may gain meanwhile
    /// (``WriteAheadLog/hasRoom(for:growth:)``), the fold runs here instead, commits waiting: one
    /// that fails for room then makes room (``makeRoom()``) while the log is at its threshold,
    /// with room left for the domain files that would let the log go.
    func startFoldIfDue() {
        guard wal.fold == nil, wal.state == .intact, wal.isCompactionDue else { return }
        if wal.followsPrevious { return compact() }
        // kvd.wal.next's base must be above kvd.wal's (recovery tells a stale one so)
        guard state.withLock({ $0.revision }) > wal.baseRevision else { return }
        let dirty = wal.dirty
        let snapshot: (domains: [Domain: DomainState], revision: Int64, history: [Domain: [RecentCommit]])? =
            state.withLock { $0.startFolding(dirty: dirty) }
        guard let snapshot else { return }
        let task = FoldTask(
            FoldJob(
                revision: snapshot.revision, dirty: dirty, domains: snapshot.domains, history: snapshot.history,
                logLength: wal.length), files: files)
        let room = wal.hasRoom(for: files.bytesNeeded(for: task.job), growth: Int64(foldGrowthBytes))
        do { try wal.startFold(task, revision: snapshot.revision) } catch {
            state.withLock { $0.endFolding() }
            return retryFoldLater(after: error)
        }
        guard room else {
            log(.debug, "little room left beside \(wal.path): folding it while commits wait")
            return awaitFold()
        }
        foldRunner {
            guard task.runUnlessClaimed() else { return }
            self.queue.async { self.finishFoldIfDone() }
        }
    }

    /// Where folds run: the test's runner from ``StoreOptions/foldRunner``, or the fold queue.
    private var foldRunner: @Sendable (@escaping @Sendable () -> Void) -> Void {
        options.foldRunner ?? { [foldQueue] work in foldQueue.async(execute: work) }
    }

    /// Ends the running fold if it has finished; nothing otherwise.
    func finishFoldIfDone() {
        guard let task = wal.fold, task.isDone else { return }
        finishFold(task, task.wait())
    }

    /// Waits for the running fold, if any (runs it, if the fold queue has not started it yet),
    /// and ends it: the commit queue owns the files again. Blocks on the fold's I/O.
    func awaitFold() {
        guard let task = wal.fold else { return }
        finishFold(task, task.wait())
    }

    /// Waits until a running fold has ended (for tests that look at the files).
    func waitForFold() {
        queue.sync { awaitFold() }
    }

    /// Waits for a running fold (or runs it) without ending it (a crash, for tests: both logs
    /// stay).
    func abandonFold() {
        guard let task = wal.fold else { return }
        _ = task.wait()
        wal.endFold()
    }

    /// After a fold: drops the commits it put in the history files from memory and renames
    /// `kvd.wal.next` over `kvd.wal`; or, if it failed, keeps its domains dirty (both logs
    /// still hold everything) and compacts later, first making room on a full disk (unless
    /// `makingRoom`: ``makeRoom()`` itself waited for it, and makes the room).
    func finishFold(_ task: FoldTask, _ result: Result<Void, SystemError>, makingRoom: Bool = false) {
        let job = task.job
        wal.endFold()
        defer { state.withLock { $0.endFolding() } }
        switch result {
        case .success:
            endFold(job)
        case .failure(let error):
            wal.markDirty(job.dirty)
            if Self.isFull(error) && !makingRoom && makeRoom().compacted { return }
            retryFoldLater(after: error)
        }
    }

    /// After a fold or compaction that failed (the logs still hold everything): tries again once
    /// the log has grown a bit (``WriteAheadLog/postponeCompaction()``), and says so.
    func retryFoldLater(after error: some Error) {
        wal.postponeCompaction()
        log(.error, "compaction of \(wal.path) failed, the log is kept and compaction will be retried: \(error)")
    }

    /// After a fold that succeeded: drops the commits it put in the history files from memory,
    /// lets `kvd.wal` go (``WriteAheadLog/promoteNext()``) and has the fold queue give the freed
    /// memory back (``releaseFreedMemory()``).
    private func endFold(_ job: FoldJob) {
        state.withLock { $0.dropRecent(through: job.revision, of: job.history.keys) }
        defer { releaseFreedMemory() }
        do {
            try wal.promoteNext()
            log(.debug, "folded the log into \(job.dirty.count) domain files at revision \(job.revision)")
        } catch {
            if wal.followsPrevious { wal.postponeCompaction() }  // both logs kept: compacted at a later fold
            log(
                .error,
                "could not let the folded log go after folding it at revision \(job.revision) (\(wal.followsPrevious ? "both logs are kept and compacted later" : "the folder is synced before the next fold")): \(error)"
            )
        }
    }

    /// Has the fold queue give the pages the allocator holds free back to the system
    /// (``FileSystem/releaseFreedMemory()``) once the fold's task is let go: its job holds the
    /// commits it folded and the domains' states it shared (which commits meanwhile copied),
    /// freed only when the commit queue's work that ended the fold returns. Hence the hop
    /// through the commit queue: given back before that, about 8 MB of them stay resident at
    /// 100,000 keys. Then off the commit queue, as the walk of the whole heap is work no writer
    /// should wait for. Not through ``foldRunner``: a test's runner steps folds alone.
    private func releaseFreedMemory() {
        queue.async { [foldQueue, fileSystem = files.folder.fileSystem] in
            foldQueue.async { fileSystem.releaseFreedMemory() }
        }
    }
}
