import Dispatch
import KVValues
import Synchronization

/// The commit queue: group commit of batches, publication, compaction. Everything here runs
/// on ``Store/queue`` only.
extension Store {
    /// One batch being prepared: a view of each domain it changes (sharing the committed
    /// state, never copying it), the changes to publish in order, the framed log records, and
    /// the outcome of each mutation in order.
    struct Batch {
        var views: [Domain: DomainView] = [:]
        var revision: Int64
        /// When the batch commits (``StoreOptions/clock``): every record of it carries this time.
        var time: Int64
        var planned: [PlannedCommit] = []
        var records: [UInt8] = []
        /// Each planned change's size (``LogFormat/append(_:to:entryBytes:)``), in order.
        var entryBytes: [Int] = []
        var outcomes: [Pending.Outcome] = []
    }

    /// One planned commit: its changes, where their sizes are in ``Batch/entryBytes``, and the
    /// domain's budget after it.
    struct PlannedCommit {
        var domain: Domain
        var changes: [Change]
        var entryBytes: Range<Int>
        var budgetBytes: Int
        var revision: Int64
        var writer: Writer?
        /// Where the value of its sole change lies in ``Batch/records`` (``RecordSizes/soleValue``):
        /// publishing stores those bytes. Nil for several changes (their values are encoded again).
        var soleValue: Range<Int>? = nil
    }

    /// Commits batches until nothing is queued; each batch is all that was queued when it
    /// started, so submitters arriving during a sync share the next one. Called with
    /// `State.draining` set; clears it when done. After each batch, a fold that falls due is
    /// started (``startFoldIfDue()``) and one that has finished is ended; without
    /// `endingFolds` (on a caller's thread) that is left to the commit queue. A running fold is
    /// never waited for: the commits go to the log that follows the folded one.
    func drain(endingFolds: Bool = true) {
        while let pending = takeBatch() {
            commit(pending)
            if endingFolds { finishFoldIfDone() }
            startFoldIfDue()
        }
    }

    private func takeBatch() -> [Pending]? {
        state.withLock { $0.takeBatch() }
    }

    /// Plans every mutation, writes all records with one sync, and only then publishes the
    /// new state and calls the completions. If the write fails, every mutation of the batch
    /// fails with `.failure` and memory is unchanged.
    private func commit(_ pending: [Pending]) {
        var batch = Batch(revision: state.withLock { $0.revision }, time: options.clock())
        for item in pending { plan(item, into: &batch) }
        batch.views = [:]  // drop the shared references, so publishing changes the state in place
        if !batch.records.isEmpty {
            do {
                try wal.append(batch.records)
            } catch {
                // A full disk: history goes first, then the log is compacted, and the batch tried again.
                // Tried again when either step freed space (dropped history alone may be enough).
                let retried =
                    Self.isFull(wal.appendFailure) && makeRoom().freedAny
                    && (try? wal.append(batch.records)) != nil
                if !retried {
                    log(.error, error.description)
                    for item in pending { item.fail(error) }
                    return
                }
            }
            publish(batch)
        }
        for (item, outcome) in zip(pending, batch.outcomes) { item.finish(outcome) }
    }

    /// Plans one piece of work into `batch`: its changes, its record appended to the batch's
    /// bytes (removed again if the limits refuse it), its outcome.
    private func plan(_ item: Pending, into batch: inout Batch) {
        switch item {
        case .one(let domain, let mutation, let writer, _):
            batch.outcomes.append(.one(plan(domain, mutation, writer: writer, into: &batch)))
        case .group(let parts, _):
            guard Set(parts.map(\.domain)).count == parts.count else {
                return batch.outcomes.append(.group(.failure(.invalidValue("a group names a domain more than once"))))
            }
            let mutations = parts.map { ($0.domain, Mutation.apply($0.changes, ifRevision: nil)) }
            batch.outcomes.append(.group(plan(mutations, kind: parts.count == 1 ? "apply" : "group", into: &batch)))
        }
    }

    /// Plans one mutation of one domain (every Set: no per-call arrays, unlike a group).
    private func plan(_ domain: Domain, _ mutation: Mutation, writer: Writer?, into batch: inout Batch) -> Result<
        Commit, StorageError
    > {
        if batch.views[domain] == nil { batch.views[domain] = DomainView(state.withLock { $0.domains[domain] }) }
        let changes: PlannedChanges
        do {
            changes = try MutationPlanner.changes(of: mutation, in: domain, current: batch.views[domain]!)
        } catch {
            return .failure(error)
        }
        guard !changes.changes.isEmpty else {
            return .success(Commit(revision: batch.revision, domain: domain, changes: []))
        }
        let revision = batch.revision + 1
        let (recordStart, sizesStart) = (batch.records.count, batch.entryBytes.count)
        let record = LogRecord(
            revision: revision, domain: domain, kind: mutation.kind, changes: changes.changes, time: batch.time,
            writer: writer)
        let sizes = LogFormat.append(record, to: &batch.records, entryBytes: &batch.entryBytes)
        let entryBytes = sizesStart..<batch.entryBytes.count
        let budget: Int
        do {
            budget = try CommitLimits.check(
                sizes, changes, entryBytes: batch.entryBytes[entryBytes], in: domain, view: batch.views[domain]!)
        } catch {
            batch.records.removeSubrange(recordStart...)
            batch.entryBytes.removeSubrange(sizesStart...)
            return .failure(error)
        }
        batch.revision = revision
        return .success(
            take(
                domain, changes.changes, entryBytes: entryBytes, budget: budget, at: revision, writer: writer,
                soleValue: sizes.soleValue, into: &batch))
    }

    /// Takes one domain's planned changes, accepted by the limits, into `batch` at `revision`:
    /// its view (in place: no copy of the overlay) and what publishing will apply.
    private func take(
        _ domain: Domain, _ changes: [Change], entryBytes: Range<Int>, budget: Int, at revision: Int64,
        writer: Writer? = nil, soleValue: Range<Int>? = nil, into batch: inout Batch
    ) -> Commit {
        batch.views[domain]!.apply(changes, entryBytes: batch.entryBytes[entryBytes], budgetBytes: budget, at: revision)
        batch.planned.append(
            PlannedCommit(
                domain: domain, changes: changes, entryBytes: entryBytes, budgetBytes: budget, revision: revision,
                writer: writer, soleValue: soleValue))
        return Commit(revision: revision, domain: domain, changes: changes, writer: writer)
    }

    /// Plans mutations of different domains as one record at one revision: all of them, or
    /// (an error) none. Returns a commit per domain that changes; none, and no revision used,
    /// if nothing changes.
    private func plan(_ mutations: [(Domain, Mutation)], kind: String, into batch: inout Batch) -> Result<
        [Commit], StorageError
    > {
        var planned: [(domain: Domain, changes: PlannedChanges)] = []
        for (domain, mutation) in mutations {
            if batch.views[domain] == nil { batch.views[domain] = DomainView(state.withLock { $0.domains[domain] }) }
            do {
                let changes = try MutationPlanner.changes(of: mutation, in: domain, current: batch.views[domain]!)
                if !changes.changes.isEmpty { planned.append((domain, changes)) }
            } catch {
                return .failure(error)
            }
        }
        guard !planned.isEmpty else { return .success([]) }
        let revision = batch.revision + 1
        let (recordStart, sizesStart) = (batch.records.count, batch.entryBytes.count)
        let parts = planned.map { LogRecord.Part(domain: $0.domain, changes: $0.changes.changes) }
        let sizes = LogFormat.append(
            LogRecord(revision: revision, kind: kind, parts: parts, time: batch.time), to: &batch.records,
            entryBytes: &batch.entryBytes)
        let budgets: [Int]
        do {
            budgets = try checkLimits(planned, sizes, from: sizesStart, in: batch)
        } catch {
            batch.records.removeSubrange(recordStart...)
            batch.entryBytes.removeSubrange(sizesStart...)
            return .failure(error)
        }
        batch.revision = revision
        var commits: [Commit] = []
        var start = sizesStart
        for (part, budget) in zip(planned, budgets) {
            let entryBytes = start..<(start + part.changes.changes.count)
            start = entryBytes.upperBound
            commits.append(
                take(
                    part.domain, part.changes.changes, entryBytes: entryBytes, budget: budget, at: revision,
                    into: &batch))
        }
        return .success(commits)
    }

    /// The budget of each planned domain once its changes (their entries' sizes in
    /// `batch.entryBytes` from `start` on) are in, or the limit the first one breaks.
    private func checkLimits(
        _ planned: [(domain: Domain, changes: PlannedChanges)], _ sizes: RecordSizes, from start: Int,
        in batch: Batch
    ) throws(StorageError) -> [Int] {
        var budgets: [Int] = []
        var start = start
        for part in planned {
            let entryBytes = start..<(start + part.changes.changes.count)
            start = entryBytes.upperBound
            budgets.append(
                try CommitLimits.check(
                    sizes, part.changes, entryBytes: batch.entryBytes[entryBytes], in: part.domain,
                    view: batch.views[part.domain]!))
        }
        return budgets
    }

    /// Makes a durable batch visible to readers: applies its changes in place (the committed
    /// dictionaries are not shared at this point, so no copy is made) and drops emptied domains.
    private func publish(_ batch: Batch) {
        let keepsHistory = files.history.options != nil
        let exclusions = files.history.exclusions
        state.withLock { $0.publish(batch, keepsHistory: keepsHistory, exclusions: exclusions) }
        var last: Domain?
        for commit in batch.planned where commit.domain != last {  // a run of changes to one domain: one insert
            wal.markDirty(commit.domain)
            last = commit.domain
        }
    }

    /// Waits for a running fold, then folds the log's commits into the history files, writes
    /// the dirty domain files and resets the log, on the commit queue (at close); a failure is
    /// logged and retried at the next fold (the log still holds everything). On a full disk,
    /// history is dropped to make room (``makeRoom()``).
    func compact() {
        awaitFold()
        let (domains, revision, recent) = state.withLock { ($0.domains, $0.revision, $0.recent) }
        let count = wal.dirty.count
        do {
            try wal.compact(into: files, domains, revision: revision, history: recent)
            // in the history files now; nothing was published meanwhile (this queue publishes)
            state.withLock { $0.dropRecent() }
            log(.debug, "compacted the log into \(count) domain files at revision \(revision)")
        } catch  where Self.isFull(error) && makeRoom().compacted {
            return
        } catch {
            retryFoldLater(after: error)
        }
    }
}

/// What the store checks before it acknowledges a change: that every reader can take it back.
enum CommitLimits {
    /// The domain's budget after the change `planned`, whose record has `sizes` and whose
    /// changes `entryBytes` (``LogFormat/append(_:to:entryBytes:)``),
    /// or `.tooLarge` if the log could not read the record back, a `Watch` reply could not
    /// carry its changes, or the domain would grow past what one `List` or `Watch` reply
    /// carries. Removals alone, and a change that does not grow the domain, are never refused
    /// for a reply's size (a hand-made domain over the limit can still be shrunk). A few
    /// comparisons.
    static func check(
        _ record: RecordSizes, _ planned: PlannedChanges, entryBytes: ArraySlice<Int>, in domain: Domain,
        view: DomainView
    ) throws(StorageError) -> Int {
        guard record.payloadBytes <= LogFormat.maxRecordBytes else {
            throw .tooLarge(
                limit: LogFormat.maxRecordBytes,
                reason:
                    "the change's log record would take \(record.payloadBytes) bytes, more than kvd reads back; make it in smaller parts"
            )
        }
        let limit = Limits.messageBytes
        guard record.changesBytes <= Limits.domainBytes || !planned.changes.contains(where: { $0.value != nil }) else {
            throw .tooLarge(
                limit: limit,
                reason:
                    "the change takes \(record.changesBytes) bytes as typed JSON, more than one reply carries; store less at once"
            )
        }
        let budget = view.budgetBytes(after: planned, entryBytes: entryBytes)
        guard budget <= Limits.domainBytes || budget <= view.budgetBytes else {
            throw .tooLarge(
                limit: limit,
                reason:
                    "domain \(domain) would take \(budget) bytes as typed JSON, more than one List or Watch reply carries; store less in it, or use another domain"
            )
        }
        return budget
    }
}

extension Mutation {
    /// The record kind named in the log.
    var kind: String {
        switch self {
        case .set: "set"
        case .delete: "delete"
        case .apply: "apply"
        case .deleteDomain: "deleteDomain"
        }
    }
}
