import KVValues

extension Store {
    /// The store's state behind its lock (``Store/state``): the committed domains readers see,
    /// the work queued for the commit queue, and whether a drain or a fold runs. Each change is
    /// one method, made under the lock by the thread that holds it; readers take copies.
    struct State: Sendable {
        private(set) var domains: [Domain: DomainState]
        private(set) var revision: Int64
        /// The commits still only in the log, per domain, for history (none when it is off).
        private(set) var recent: [Domain: [RecentCommit]]
        /// What keeps no history (``HistoryFiles/exclusions``, copied for readers).
        private(set) var exclusions: HistoryExclusions
        private(set) var pending: [Pending] = []
        /// A drain is scheduled or running on the commit queue.
        private(set) var draining = false
        /// A fold runs off the commit queue, or has not been ended by it yet.
        private(set) var folding = false
        /// Counts the changes to what history serves that no commit makes (see
        /// ``Store/historyVersion``).
        private(set) var historyVersion = 0
        private(set) var closed = false

        init(
            domains: [Domain: DomainState], revision: Int64, recent: [Domain: [RecentCommit]],
            exclusions: HistoryExclusions
        ) {
            (self.domains, self.revision, self.recent, self.exclusions) = (domains, revision, recent, exclusions)
        }

        /// Closes the store to new work; returns whether it was open.
        mutating func close() -> Bool {
            defer { closed = true }
            return !closed
        }

        /// Queues `work` unless the store is closed (nil then). With `startDrain`, also marks a
        /// drain as scheduled and returns true when none was; false otherwise.
        mutating func add(_ work: Pending, startDrain: Bool) -> Bool? {
            guard !closed else { return nil }
            pending.append(work)
            guard startDrain, !draining else { return false }
            draining = true
            return true
        }

        /// Marks a drain as scheduled and returns true when something is queued and no drain is
        /// running or scheduled; otherwise false (the running drain takes what is queued).
        mutating func claimDrain() -> Bool {
            guard !draining, !pending.isEmpty else { return false }
            draining = true
            return true
        }

        /// Marks a drain as running, whatever is queued (the commit queue is busy with other work).
        mutating func markDraining() {
            draining = true
        }

        /// Everything queued, taken off the queue; nil, and the drain marked done, when nothing is.
        mutating func takeBatch() -> [Pending]? {
            guard !pending.isEmpty else {
                draining = false
                return nil
            }
            defer { pending = [] }
            return pending
        }

        /// Applies a durable batch's changes in place (the committed dictionaries are not shared
        /// at this point, so no copy is made) and drops emptied domains; with `keepsHistory`,
        /// keeps its commits of what `exclusions` let keep history in ``recent``.
        mutating func publish(_ batch: Batch, keepsHistory: Bool, exclusions: HistoryExclusions) {
            batch.records.withUnsafeBytes { records in
                for commit in batch.planned {
                    let json = commit.soleValue.map { UnsafeRawBufferPointer(rebasing: records[$0]) }
                    publish(commit, of: batch, json: json, keepsHistory: keepsHistory, exclusions: exclusions)
                }
            }
            revision = batch.revision
        }

        /// Applies one commit of `batch` (its sole value stored as `json`, when given); with `keepsHistory`,
        /// keeps it in ``recent`` unless `exclusions` keep its changes from history.
        private mutating func publish(
            _ commit: PlannedCommit, of batch: Batch, json: UnsafeRawBufferPointer?, keepsHistory: Bool,
            exclusions: HistoryExclusions
        ) {
            let emptied = domains[commit.domain, default: DomainState()]
                .apply(
                    commit.changes, entryBytes: batch.entryBytes[commit.entryBytes], budgetBytes: commit.budgetBytes,
                    at: commit.revision, json: json)
            if emptied { domains[commit.domain] = nil }
            guard keepsHistory else { return }
            // the same array when nothing is excluded
            let changes = exclusions.filter(commit.changes, of: commit.domain)
            if !changes.isEmpty {
                recent[commit.domain, default: []].append(
                    RecentCommit(revision: commit.revision, time: batch.time, writer: commit.writer, changes: changes))
            }
        }

        /// Forgets every commit kept for history: they are in the history files now.
        mutating func dropRecent() {
            recent = [:]
        }

        /// Forgets the commits at or below `revision` of `domains` kept for history (a fold put
        /// them in the history files).
        mutating func dropRecent(through revision: Int64, of domains: some Sequence<Domain>) {
            for domain in domains {
                recent[domain]?.removeAll { $0.revision <= revision }
                if recent[domain]?.isEmpty == true { recent[domain] = nil }
            }
        }

        /// Forgets the changes of `key` (of every key, if nil) of `domain` kept for history, and
        /// returns the domain's commits as they were.
        mutating func forgetRecent(_ domain: Domain, key: Key?) -> [RecentCommit] {
            let original = recent[domain] ?? []
            if let key {
                recent[domain] = recent[domain]?.compactMap { $0.dropping(key) }
            } else {
                recent[domain] = nil
            }
            return original
        }

        /// Marks a fold as started unless the store is closed, and returns what it folds: the
        /// committed state of `dirty` and of every domain with commits kept for history (shared,
        /// not copied), the revision, and those commits. Nil when closed.
        mutating func startFolding(dirty: Set<Domain>)
            -> (domains: [Domain: DomainState], revision: Int64, history: [Domain: [RecentCommit]])?
        {
            guard !closed else { return nil }
            folding = true
            var folded: [Domain: DomainState] = [:]
            for domain in dirty.union(recent.keys) { folded[domain] = domains[domain] }
            return (folded, revision, recent)
        }

        /// Marks the fold as ended; what history serves may have changed (pruned, a file set aside).
        mutating func endFolding() {
            folding = false
            historyVersion += 1
        }

        /// Records a change to what history serves that no commit makes.
        mutating func historyChanged() {
            historyVersion += 1
        }

        /// Records what keeps no history, for readers.
        mutating func setExclusions(_ exclusions: HistoryExclusions) {
            self.exclusions = exclusions
        }
    }
}
