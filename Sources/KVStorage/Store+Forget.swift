import Dispatch
import Glibc
import KVSystem
import KVValues
import Synchronization

/// A change to what history keeps (``Store/submitHistoryChange(_:completion:)``).
public enum HistoryChange: Sendable, Equatable {
    /// Removes the past values of a key (of every key of the domain, if nil) from every file
    /// the store keeps.
    case forget(Domain, Key?)
    /// Marks a key (every key of the domain, if nil) to keep history (`true`) or none
    /// (`false`: its past values are forgotten at once, as by ``forget``).
    case keep(Domain, Key?, Bool)
}

/// Forgetting history and making room on a full disk. Commit queue only, but for the public
/// entry points.
extension Store {
    /// Queues `change` after everything queued before it and returns at once. `completion`
    /// runs on the commit queue once it is durable, with the store's revision then, or with
    /// `.failure` (nothing acknowledged: run it again). A forget rewrites the domain's history
    /// file without the key's (or domain's) entries (the values the domain still has stay, as
    /// values of no known time), compacts the log into the domain files (the log held them
    /// too) and removes or rewrites the copies set aside that name them
    /// (``CopiesSetAside/scrub(_:in:key:)``): once it completed, no file of the folder holds
    /// those past values, across any crash. Works with history off too (then only log and copies).
    public func submitHistoryChange(
        _ change: HistoryChange, completion: @escaping @Sendable (Result<Int64, StorageError>) -> Void
    ) {
        guard !state.withLock({ $0.closed }) else {
            return queue.async { completion(.failure(.failure("the store is closed"))) }
        }
        queue.async {
            self.state.withLock { $0.markDraining() }
            self.drain()  // what was queued before it comes first
            // busy: an event loop's commitQueued() leaves new work to this queue
            self.state.withLock { $0.markDraining() }
            completion(self.perform(change))
            self.drain()  // what was queued meanwhile
        }
    }

    /// ``submitHistoryChange(_:completion:)``, waiting until it is durable; returns the
    /// store's revision then. Blocks; not on the commit queue.
    @discardableResult
    public func changeHistory(_ change: HistoryChange) throws(StorageError) -> Int64 {
        dispatchPrecondition(condition: .notOnQueue(queue))
        let outcome = Mutex<Result<Int64, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        submitHistoryChange(change) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// The domains and keys marked to keep no history. Never blocks on I/O.
    public var historyExclusions: HistoryExclusions { state.withLock { $0.exclusions } }

    private func perform(_ change: HistoryChange) -> Result<Int64, StorageError> {
        awaitFold()  // the history files and what keeps none are the fold's while it runs
        defer { state.withLock { $0.historyChanged() } }  // even on failure: part may be done
        do throws(SystemError) {
            switch change {
            case .forget(let domain, let key):
                try forget(domain, key)
            case .keep(let domain, let key, let keep):
                try files.history.setExclusion(domain, key: key, keep: keep)
                let exclusions = files.history.exclusions
                state.withLock { $0.setExclusions(exclusions) }
                if !keep { try forget(domain, key) }
            }
            return .success(state.withLock { $0.revision })
        } catch {
            log(.error, "could not change what history keeps (\(change)): \(error)")
            return .failure(
                .failure("could not change what history keeps: \(error); nothing is sure to be forgotten, run it again")
            )
        }
    }

    /// See ``submitHistoryChange(_:completion:)``.
    private func forget(_ domain: Domain, _ key: Key?) throws(SystemError) {
        let (domains, revision, recent, original) = state.withLock { state in
            let original = state.forgetRecent(domain, key: key)
            return (state.domains, state.revision, state.recent, original)
        }
        try files.history.forget(domain, key: key, current: domains[domain], revision: revision, recent: original)
        try wal.compact(into: files, domains, revision: revision, history: recent)
        state.withLock { $0.dropRecent() }
        try CopiesSetAside.scrub(domain, in: files.folder, key: key)
        log(.info, "forgot the history of \(key.map { "key \($0) of " } ?? "")domain \(domain)")
    }

    /// Whether `error` says the disk (or the user's quota) is full.
    static func isFull(_ error: SystemError?) -> Bool {
        error?.code == ENOSPC || error?.code == EDQUOT
    }

    /// What ``makeRoom()`` freed.
    struct RoomMade {
        /// Every history file was removed.
        var droppedHistory = false
        /// The log was compacted into the domain files.
        var compacted = false
        var freedAny: Bool { droppedHistory || compacted }
    }

    /// Makes room on a full disk for the data: drops every history file, then compacts the
    /// log into the domain files (freeing the log's space). Says what it freed; logged.
    func makeRoom() -> RoomMade {
        // A fold that failed for the same full disk: this call makes the room (not a nested one,
        // whose freed space this one would not count).
        if let task = wal.fold { finishFold(task, task.wait(), makingRoom: true) }
        defer { state.withLock { $0.historyChanged() } }  // history may have been dropped
        let (domains, revision) = state.withLock { ($0.domains, $0.revision) }
        var made = RoomMade()
        do throws(SystemError) {
            made.droppedHistory =
                files.history.options != nil ? try files.history.drop(domains: domains, revision: revision) : false
            try wal.compact(into: files, domains, revision: revision)
            made.compacted = true
            state.withLock { $0.dropRecent() }
            log(
                .warning,
                "the disk holding \(wal.folder.directory) is full: \(made.droppedHistory ? "dropped the history of every domain (it starts again from the values) and " : "")compacted the log"
            )
        } catch {
            log(
                .error,
                "the disk holding \(wal.folder.directory) is full, \(made.droppedHistory ? "dropped the history of every domain, " : "")and compacting the log failed: \(error)"
            )
        }
        return made
    }
}
