import Dispatch
import KVSystem
import KVValues
import Synchronization

/// The storage engine: domains of typed values in one state folder, with durable, group-
/// committed changes (see ``StorageFormat`` for what is on disk).
///
/// Threading: every method is thread-safe. Reads (``get(_:_:)``, ``list(_:)``, ``domains()``,
/// ``revision``) take a short lock on the committed in-memory state and never wait for I/O.
/// Changes go through ``submit(_:_:completion:)`` to one commit queue that writes each batch
/// of queued mutations to the log with one sync, then publishes it to readers, then calls the
/// completions in commit order. An event loop can instead ``enqueue(_:_:completion:)`` the
/// changes of one pass and ``commitQueued()`` them on its own thread (no thread hand-off; the
/// commit queue still serializes it with everything else). Never call the blocking
/// ``commit(_:_:)``, ``commitQueued()`` or ``close()`` from a completion.
///
/// Example:
/// ```swift
/// let store = try Store(directory: "/home/me/.config/kvd")
/// let commit = try store.commit(domain, .set(key, .integer(3), ifRevision: nil))
/// store.get(domain, key)  // .value(.integer(3), revision: commit.revision)
/// ```
public final class Store: Sendable {
    /// Queued work: one mutation of one domain, or a group of several domains' changes.
    enum Pending: Sendable {
        /// One mutation, with who asked for it.
        case one(Domain, Mutation, Writer?, @Sendable (Result<Commit, StorageError>) -> Void)
        case group([DomainChanges], @Sendable (Result<[Commit], StorageError>) -> Void)

        /// What its planning gave; ``finish(_:)`` hands it to the completion.
        enum Outcome {
            case one(Result<Commit, StorageError>)
            case group(Result<[Commit], StorageError>)
        }

        func finish(_ outcome: Outcome) {
            switch (self, outcome) {
            case (.one(_, _, _, let completion), .one(let result)): completion(result)
            case (.group(_, let completion), .group(let result)): completion(result)
            default: preconditionFailure("an outcome of another kind of work")
            }
        }

        func fail(_ error: StorageError) {
            switch self {
            case .one(_, _, _, let completion): completion(.failure(error))
            case .group(_, let completion): completion(.failure(error))
            }
        }
    }

    let options: StoreOptions
    let log: @Sendable (LogLevel, String) -> Void
    let state: Mutex<State>
    /// The log, the lock and what the log owes the files: the commit queue's.
    let wal: WriteAheadLog
    /// The domain and history files: the commit queue's, or a running fold's.
    let files: StateFiles
    let queue = DispatchQueue(label: "kvd.storage.commit")
    /// Where folds of the log into the files run, beside the commit queue (``startFoldIfDue()``).
    let foldQueue = DispatchQueue(label: "kvd.storage.fold")

    /// Opens (creating it with mode 0700 if missing) and locks the state folder, and recovers
    /// its committed state. Blocks on I/O.
    ///
    /// - Throws: `.locked` if another store holds the folder, `.invalidStateDirectory` if the
    ///   folder cannot be used, `.failure` if reading or repairing it failed.
    public init(
        directory: String, options: StoreOptions = .init(), fileSystem: any FileSystem = LinuxSystem(),
        log: @escaping @Sendable (LogLevel, String) -> Void = { _, _ in }
    ) throws(StorageError) {
        let folder = StateFolder(fileSystem: fileSystem, directory: directory, log: log)
        let wal = WriteAheadLog(
            folder: folder, compactionBytes: Int64(options.compactionLogBytes),
            reservation: Int64(max(options.logReservationBytes, 0)))
        let files = StateFiles(folder: folder, historyOptions: options.keepsHistory ? options : nil)
        let recovered: RecoveredState
        do { recovered = try Recovery(wal: wal, files: files).run() } catch {
            wal.releaseAll()  // a refused folder is not left locked
            throw error
        }
        self.wal = wal
        self.files = files
        self.options = options
        self.log = log
        self.state = Mutex(
            State(
                domains: recovered.domains, revision: recovered.revision, recent: recovered.recent,
                exclusions: files.history.exclusions))
        log(
            .info,
            "opened state folder \(directory) at revision \(recovered.revision) with \(recovered.domains.count) domains"
        )
    }

    /// Stops as a crash would, for tests: waits for a running fold (without rotating the log),
    /// finishes queued work, then releases the folder without compacting. Later submissions fail.
    func abandon() {
        _ = state.withLock { $0.close() }
        queue.sync {
            abandonFold()
            drain()
            wal.releaseAll()
        }
    }

    deinit {
        wal.releaseAll()  // no queued work can remain: each holds a reference to self
    }

    /// The value of `key` in `domain` and the revision at which it last changed. Never blocks
    /// on I/O.
    public func get(_ domain: Domain, _ key: Key) -> KeyLookup {
        let found: RawLookup = state.withLock { state in
            guard let entries = state.domains[domain]?.entries else { return .missing }
            return entries.withValueJSON(key) { stored in
                switch stored {
                case .value(let json, let revision): .value(Array(json), revision: revision)
                case .missing: .missing
                case .unreadable(let reason): .unreadable(reason: reason)
                }
            }
        }
        switch found {  // decoded outside the lock
        case .value(let json, let revision):
            switch EntryTable.decode(json) {
            case .value(let value): return .value(value, revision: revision)
            case .unreadable(_, let reason): return .unreadable(reason: reason)
            }
        case .missing: return .missing
        case .unreadable(let reason): return .unreadable(reason: reason)
        }
    }

    /// Calls `body` with the value of `key` in `domain` as the compact typed JSON it is kept in
    /// (valid only during the call; object members in sorted order), or with why there is
    /// none; a `Get` reply copies it as it is. `body` runs under the store's lock: it must be
    /// short and must not call the store. Never blocks on I/O.
    public func withValueJSON(_ domain: Domain, _ key: Key, _ body: (ValueJSON) -> Void) {
        state.withLock { state in
            guard let entries = state.domains[domain]?.entries else { return body(.missing) }
            entries.withValueJSON(key) { stored in
                switch stored {
                case .value(let json, let revision): body(.value(json, revision: revision))
                case .missing: body(.missing)
                case .unreadable(let reason): body(.unreadable(reason: reason))
                }
            }
        }
    }

    /// A consistent copy of `domain`, or nil if it does not exist (has no key a request can
    /// name). Never blocks on I/O.
    public func list(_ domain: Domain) -> DomainSnapshot? {
        state.withLock { $0.domains[domain] }.flatMap { $0.entries.isEmpty ? nil : $0.snapshot }
    }

    /// The existing domains, sorted by name. Never blocks on I/O.
    public func domains() -> [Domain] {
        state.withLock { $0.domains.compactMap { $0.value.entries.isEmpty ? nil : $0.key } }.sorted()
    }

    /// The store-wide revision of the last commit; it never goes back, across restarts too.
    public var revision: Int64 {
        state.withLock { $0.revision }
    }

    /// Changes whenever what ``history(_:key:limit:before:)`` serves changes without a commit:
    /// a forget, a change of what keeps history, a fold's end (retention may have pruned), a
    /// full disk's dropped history. With ``revision``, it tells a cached `History` reply is
    /// still right. Never blocks on I/O.
    public var historyVersion: Int {
        state.withLock { $0.historyVersion }
    }

    /// Whether the log is written with `O_DIRECT` (for tests).
    var logIsDirect: Bool { queue.sync { wal.direct } }

    /// Whether nothing is queued or being written (or compacted or folded).
    public var isIdle: Bool {
        state.withLock { $0.pending.isEmpty && !$0.draining && !$0.folding }
    }

    /// Queues `mutation` for `domain` and returns at once. `completion` runs on the commit
    /// queue, in commit order, once the change is durable and visible to readers, or with the
    /// error: `.notFound`, `.revisionMismatch`, or `.failure` (nothing changed; also after
    /// ``close()``, for a value that cannot be stored, and for a domain named like a backup).
    /// `writer` names who asked for it, in the log and in history.
    public func submit(
        _ domain: Domain, _ mutation: Mutation, writer: Writer? = nil,
        completion: @escaping @Sendable (Result<Commit, StorageError>) -> Void
    ) {
        add(.one(domain, mutation, writer, completion), startDrain: true)
    }

    /// Queues `mutation` like ``submit(_:_:completion:)``, but leaves its commit to the next
    /// ``commitQueued()`` of the caller (an event loop that group-commits once per pass), so no
    /// thread is woken for it. `completion` then runs on that caller's thread, or on the commit
    /// queue if that queue was busy (syncing or compacting) at the time, or if the caller chose
    /// ``commitQueuedInBackground()``.
    public func enqueue(
        _ domain: Domain, _ mutation: Mutation, writer: Writer? = nil,
        completion: @escaping @Sendable (Result<Commit, StorageError>) -> Void
    ) {
        add(.one(domain, mutation, writer, completion), startDrain: false)
    }

    /// Commits everything queued, on the calling thread, with one sync per batch, and calls
    /// the completions there; returns at once if nothing is queued. If the commit queue is busy
    /// (a drain runs there), leaves the work to it instead of waiting. A fold that falls due
    /// runs on the fold queue, and its end (a rename of the log) on the commit queue, so the
    /// caller waits for neither (commits go to `kvd.wal.next` while it runs). Blocks on
    /// I/O (a sync); must not be called from a completion.
    public func commitQueued() {
        guard claimDrain() else { return }
        queue.sync { drain(endingFolds: false) }
    }

    /// Hands everything queued to the commit queue and returns at once: the batch is written,
    /// synced and published there, and its completions run there, while the caller goes on (an
    /// event loop reads and queues the next batch during this one's sync; the commit queue takes
    /// it as soon as this one is durable). Nothing if nothing is queued or the queue is already
    /// draining (then it takes what was queued too).
    public func commitQueuedInBackground() {
        guard claimDrain() else { return }
        queue.async { self.drain() }
    }

    /// Sets `State.draining` and returns true when something is queued and no drain is running
    /// or scheduled; otherwise false (the running drain takes what is queued).
    private func claimDrain() -> Bool {
        state.withLock { $0.claimDrain() }
    }

    private func add(_ pending: Pending, startDrain: Bool) {
        let schedule = state.withLock { $0.add(pending, startDrain: startDrain) }
        switch schedule {
        case nil: queue.async { pending.fail(.failure("the store is closed")) }
        case true?: queue.async { self.drain() }
        case false?: break
        }
    }

    /// Commits `mutation` and waits until it is durable. Blocks the calling thread; must not be
    /// called on the commit queue (from a completion).
    public func commit(_ domain: Domain, _ mutation: Mutation, writer: Writer? = nil) throws(StorageError) -> Commit {
        try waitFor { submit(domain, mutation, writer: writer, completion: $0) }
    }

    /// Runs `start` with a completion and waits for it. Blocks; not on the commit queue.
    private func waitFor<T: Sendable>(_ start: (@escaping @Sendable (Result<T, StorageError>) -> Void) -> Void)
        throws(StorageError) -> T
    {
        dispatchPrecondition(condition: .notOnQueue(queue))
        let outcome = Mutex<Result<T, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        start { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// Commits several domains' changes atomically, at one revision, in one log record: after
    /// a crash all of them are there or none (a fleet mirror applies one etcd revision so,
    /// with the etcd revision it reached in the same group). Each part's changes are absolute,
    /// as an unconditional `Apply`: a value sets its key, none removes it (a missing key is
    /// no change). Each domain may appear once. `completion` gets one ``Commit`` per domain
    /// that changed, all at the same revision (none, and no revision used, if nothing
    /// changed), or the error (nothing changed): `.invalidValue`, `.tooLarge` (each domain's
    /// limits, as for a single commit), `.failure`. Runs on the commit queue, like ``submit(_:_:completion:)``.
    public func submitGroup(
        _ parts: [DomainChanges], completion: @escaping @Sendable (Result<[Commit], StorageError>) -> Void
    ) {
        add(.group(parts, completion), startDrain: true)
    }

    /// ``submitGroup(_:completion:)``, waiting until the group is durable. `whenCommitted` gets
    /// the group's commits on the commit queue, in commit order with every other commit (a
    /// caller that tells watchers of them keeps their order). Blocks the calling thread; must
    /// not be called on the commit queue (from a completion).
    public func commitGroup(_ parts: [DomainChanges], whenCommitted: (@Sendable ([Commit]) -> Void)? = nil)
        throws(StorageError) -> [Commit]
    {
        try waitFor { completion in
            submitGroup(parts) { result in
                if case .success(let commits) = result { whenCommitted?(commits) }
                completion(result)
            }
        }
    }

    /// Finishes the queued work and a running fold, compacts the log into the domain files,
    /// and releases the folder's lock. Later submissions fail; reads keep working. Idempotent;
    /// blocks on I/O; must not be called from a completion.
    public func close() {
        dispatchPrecondition(condition: .notOnQueue(queue))
        let first = state.withLock { $0.close() }
        queue.sync {
            guard first else { return }
            awaitFold()
            drain()
            if !wal.dirty.isEmpty { compact() }
            wal.releaseAll()
            log(.info, "closed state folder \(wal.folder.directory)")
        }
    }
}
