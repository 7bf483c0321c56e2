import Dispatch
import KVSystem
import KVValues
import Synchronization

@testable import KVStorage

/// One commit the workload asked for and what became of it.
struct Attempt {
    var domain: Domain
    var mutation: Mutation
    /// A group commit's parts (then `domain` and `mutation` are its first part's, unused).
    var group: [DomainChanges]?
    var outcome: Result<Commit, StorageError>
    /// Disk operations recorded when its completion ran: a crash at or after this point must
    /// keep it if it succeeded, and must not show it if it failed.
    var completedAt: Int

    var succeeded: Bool { (try? outcome.get()) != nil }

    /// What the store holds after `content` once this attempt succeeded: the oracle.
    func apply(to content: inout StoreContent) {
        if let group { content.applyGroup(group) } else { content.apply(domain, mutation) }
    }
}

extension StorageError {
    var isStorageFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

/// Runs commits one at a time against a store on a ``SimulatedFileSystem`` and records each
/// attempt with the operation index at which its completion ran.
///
/// Folds of the log into the files are stepped by hand, so that the disk operations come in
/// one order every run: a fold the store starts after a commit runs (on the workload's thread)
/// once the next commit has completed, so that commit's record is carried into the log that
/// replaces the old one; before anything else (a restart, a close, a history change) a fold
/// waiting to run runs first.
final class CrashWorkload {
    let fileSystem: SimulatedFileSystem
    let directory: String
    let options: StoreOptions
    /// What the disk held before the workload.
    let base: StoreContent
    var store: Store?
    var attempts: [Attempt] = []
    /// Why opening the store failed (only with injected faults); each failure is retried.
    var failedOpens: [String] = []
    /// Each history change asked for (``changeHistory(_:)``), with the operation index at
    /// which it completed and whether it succeeded.
    var historyChanges: [(change: HistoryChange, completedAt: Int, succeeded: Bool)] = []
    /// Folds the store handed to its runner and that have not run yet.
    private let folds = SteppedFolds()
    /// How many folds ran after a commit that came after their start.
    private(set) var interleavedFolds = 0
    /// Where the store runs its folds, if not stepped by the workload (``FoldScheduler``).
    var foldRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?

    init(
        fileSystem: SimulatedFileSystem, directory: String = "/data/state", options: StoreOptions,
        base: StoreContent = StoreContent()
    ) {
        self.fileSystem = fileSystem
        self.directory = directory
        self.options = options
        self.base = base
    }

    /// Opens the store, retrying (as a restarted daemon would) if recovery fails.
    func open() {
        var options = self.options
        options.foldRunner = foldRunner ?? { [folds] work in folds.add(work) }
        for _ in 0..<3 {
            do {
                store = try Store(directory: directory, options: options, fileSystem: fileSystem)
                return
            } catch {
                failedOpens.append(error.description)
            }
        }
    }

    /// Runs the folds waiting to run, then lets the store end them (on its commit queue).
    private func runFolds(_ waiting: [@Sendable () -> Void]) {
        guard !waiting.isEmpty else { return }
        for fold in waiting { fold() }
        settle()
    }

    private func runWaitingFolds() { runFolds(takeFolds()) }

    private func takeFolds() -> [@Sendable () -> Void] { folds.take() }

    /// Waits until the store's commit queue has done what was handed to it.
    private func settle() { store?.queue.sync {} }

    func commit(_ domain: Domain, _ mutation: Mutation) {
        let waiting = takeFolds()
        defer {
            settle()  // the drain that committed it may have started a fold
            runFolds(waiting)
            interleavedFolds += waiting.count
        }
        guard let store else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Result<Commit, StorageError>, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submit(domain, mutation) { result in
            outcome.withLock { $0 = (result, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (result, index) = outcome.withLock { $0! }
        attempts.append(Attempt(domain: domain, mutation: mutation, outcome: result, completedAt: index))
    }

    /// Submits a commit and returns at once; the returned closure waits for its completion and
    /// records the attempt (one in flight at a time: attempts stay in commit order).
    func submit(_ domain: Domain, _ mutation: Mutation, onDone: @escaping @Sendable () -> Void = {}) -> () -> Void {
        guard let store else { return {} }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Result<Commit, StorageError>, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submit(domain, mutation) { result in
            outcome.withLock { $0 = (result, fileSystem.operationCount) }
            onDone()
            done.signal()
        }
        return {
            done.wait()
            let (result, index) = outcome.withLock { $0! }
            self.attempts.append(Attempt(domain: domain, mutation: mutation, outcome: result, completedAt: index))
        }
    }

    /// Commits `parts` as one group (``Store/submitGroup(_:completion:)``).
    func commitGroup(_ parts: [DomainChanges]) {
        let waiting = takeFolds()
        defer {
            settle()
            runFolds(waiting)
            interleavedFolds += waiting.count
        }
        guard let store, let first = parts.first else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Result<[Commit], StorageError>, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submitGroup(parts) { result in
            outcome.withLock { $0 = (result, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (result, index) = outcome.withLock { $0! }
        let commit = result.map { $0.first ?? Commit(revision: store.revision, domain: first.domain, changes: []) }
        attempts.append(
            Attempt(
                domain: first.domain, mutation: .apply(first.changes, ifRevision: nil), group: parts, outcome: commit,
                completedAt: index))
    }

    /// Forgets history, or marks what keeps none (``Store/submitHistoryChange(_:completion:)``).
    func changeHistory(_ change: HistoryChange) {
        runWaitingFolds()
        guard let store else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Bool, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submitHistoryChange(change) { result in
            outcome.withLock { $0 = ((try? result.get()) != nil, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (succeeded, index) = outcome.withLock { $0! }
        historyChanges.append((change, index, succeeded))
    }

    /// Stops as a crash of the process would (no compaction) and opens the folder again.
    func restart() {
        runWaitingFolds()
        store?.abandon()
        store = nil
        open()
    }

    func close() {
        runWaitingFolds()
        store?.close()
        store = nil
    }

    /// The contents a recovery from a crash after `operations` disk operations may show: every
    /// commit that completed successfully by then, plus (optionally) the one in flight.
    func allowedContents(after operations: Int) -> [StoreContent] {
        var content = base
        for attempt in attempts {
            guard attempt.completedAt <= operations else {
                // refused: never written
                if case .failure(let error) = attempt.outcome, !error.isStorageFailure { return [content] }
                var withInFlight = content
                attempt.apply(to: &withInFlight)
                return withInFlight == content ? [content] : [content, withInFlight]
            }
            if attempt.succeeded { attempt.apply(to: &content) }
        }
        return [content]
    }

    /// The value every key of an apply holds: `apply-N`, so that a half-visible apply shows.
    static func marker(_ number: Int) -> Value { .string("apply-\(number)") }

    /// A group setting keys `mN-0`, `mN-1`... of each of `domains` to the marker of apply N
    /// (applies and groups share the numbers: the marker check covers every domain).
    static func markedGroup(_ number: Int, keys: Int, in domains: [Domain]) -> [DomainChanges] {
        domains.map { domain in
            DomainChanges(
                domain: domain, changes: (0..<keys).map { Change(key: key("m\(number)-\($0)"), value: marker(number)) })
        }
    }

    /// An apply setting keys `mN-0`, `mN-1`... to the marker of apply N, then `extra`.
    static func markedApply(_ number: Int, keys: Int, also extra: [Change] = []) -> Mutation {
        let changes = (0..<keys).map { Change(key: key("m\(number)-\($0)"), value: marker(number)) }
        return .apply(changes + extra, ifRevision: nil)
    }
}

/// The folds a store handed to a ``CrashWorkload``'s runner, until the workload runs them.
final class SteppedFolds: Sendable {
    private let waiting = Mutex<[@Sendable () -> Void]>([])

    func add(_ fold: @escaping @Sendable () -> Void) { waiting.withLock { $0.append(fold) } }

    /// The folds waiting to run, which then are the caller's.
    func take() -> [@Sendable () -> Void] {
        waiting.withLock { waiting in
            defer { waiting = [] }
            return waiting
        }
    }
}
