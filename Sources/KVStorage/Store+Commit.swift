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
        var planned: [PlannedCommit] = []
        var records: [UInt8] = []
        /// Each planned change's size (``LogFormat/append(_:to:entryBytes:)``), in order.
        var entryBytes: [Int] = []
        var outcomes: [Result<Commit, StorageError>] = []
    }

    /// One planned commit: its changes, where their sizes are in ``Batch/entryBytes``, and the
    /// domain's budget after it.
    struct PlannedCommit {
        var domain: Domain
        var changes: [Change]
        var entryBytes: Range<Int>
        var budgetBytes: Int
        var revision: Int64
    }

    /// Commits batches until nothing is queued; each batch is all that was queued when it
    /// started, so submitters arriving during a sync share the next one. Called with
    /// `State.draining` set; clears it when done. Without `compactingInline` (on a caller's
    /// thread), a compaction that falls due goes to the commit queue, which keeps draining.
    func drain(compactingInline: Bool = true) {
        while let pending = takeBatch() {
            commit(pending)
            guard journal.logLength >= journal.nextCompactionLength else { continue }
            guard compactingInline else {
                return queue.async {
                    self.compact()
                    self.drain()
                }
            }
            compact()
        }
    }

    private func takeBatch() -> [Pending]? {
        state.withLock { state in
            guard !state.pending.isEmpty else {
                state.draining = false
                return nil
            }
            defer { state.pending = [] }
            return state.pending
        }
    }

    /// Plans every mutation, writes all records with one sync, and only then publishes the
    /// new state and calls the completions. If the write fails, every mutation of the batch
    /// fails with `.failure` and memory is unchanged.
    private func commit(_ pending: [Pending]) {
        var batch = state.withLock { Batch(revision: $0.revision) }
        for item in pending { plan(item, into: &batch) }
        batch.views = [:]  // drop the shared references, so publishing changes the state in place
        if !batch.records.isEmpty {
            do {
                try journal.append(batch.records, revision: state.withLock { $0.revision })
            } catch {
                log(.error, error.description)
                for item in pending { item.completion(.failure(error)) }
                return
            }
            publish(batch)
        }
        for (item, outcome) in zip(pending, batch.outcomes) { item.completion(outcome) }
    }

    /// Plans one mutation into `batch`: its changes, its record appended to the batch's bytes
    /// (removed again if the limits refuse it), its outcome.
    private func plan(_ item: Pending, into batch: inout Batch) {
        if batch.views[item.domain] == nil {
            batch.views[item.domain] = DomainView(state.withLock { $0.domains[item.domain] })
        }
        let changes: PlannedChanges
        do {
            changes = try MutationPlanner.changes(of: item.mutation, in: item.domain, current: batch.views[item.domain]!)
        } catch {
            return batch.outcomes.append(.failure(error))
        }
        guard !changes.changes.isEmpty else {
            return batch.outcomes.append(.success(Commit(revision: batch.revision, domain: item.domain, changes: [])))
        }
        let revision = batch.revision + 1
        let (recordStart, sizesStart) = (batch.records.count, batch.entryBytes.count)
        let record = LogRecord(revision: revision, domain: item.domain, kind: item.mutation.kind, changes: changes.changes)
        let sizes = LogFormat.append(record, to: &batch.records, entryBytes: &batch.entryBytes)
        let entryBytes = sizesStart..<batch.entryBytes.count
        let budget: Int
        do {
            budget = try CommitLimits.check(sizes, changes, entryBytes: batch.entryBytes[entryBytes], in: item.domain, view: batch.views[item.domain]!)
        } catch {
            batch.records.removeSubrange(recordStart...)
            batch.entryBytes.removeSubrange(sizesStart...)
            return batch.outcomes.append(.failure(error))
        }
        batch.revision = revision
        batch.views[item.domain]!.apply(changes.changes, entryBytes: batch.entryBytes[entryBytes], budgetBytes: budget, at: revision)  // in place: no copy of the view's overlay
        batch.planned.append(PlannedCommit(domain: item.domain, changes: changes.changes, entryBytes: entryBytes, budgetBytes: budget, revision: revision))
        batch.outcomes.append(.success(Commit(revision: revision, domain: item.domain, changes: changes.changes)))
    }

    /// Makes a durable batch visible to readers: applies its changes in place (the committed
    /// dictionaries are not shared at this point, so no copy is made) and drops emptied domains.
    private func publish(_ batch: Batch) {
        state.withLock { state in
            for commit in batch.planned {
                let emptied = state.domains[commit.domain, default: DomainState()]
                    .apply(commit.changes, entryBytes: batch.entryBytes[commit.entryBytes], budgetBytes: commit.budgetBytes, at: commit.revision)
                if emptied { state.domains[commit.domain] = nil }
            }
            state.revision = batch.revision
        }
        var last: Domain?
        for commit in batch.planned where commit.domain != last {  // a run of changes to one domain: one insert
            journal.dirty.insert(commit.domain)
            last = commit.domain
        }
    }

    /// Writes the dirty domain files and resets the log; a failure is logged and retried at
    /// the next batch (the log still holds everything).
    func compact() {
        let (domains, revision) = state.withLock { ($0.domains, $0.revision) }
        let count = journal.dirty.count
        let threshold = Int64(options.compactionLogBytes)
        do {
            try journal.compact(domains, revision: revision)
            journal.nextCompactionLength = threshold
            log(.debug, "compacted the log into \(count) domain files at revision \(revision)")
        } catch {
            // Retry once the log has grown by another quarter of the threshold, not every batch.
            journal.nextCompactionLength = journal.logLength + max(threshold / 4, 1)
            log(.error, "compaction of \(journal.logPath) failed, the log is kept and compaction will be retried: \(error)")
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
        _ record: RecordSizes, _ planned: PlannedChanges, entryBytes: ArraySlice<Int>, in domain: Domain, view: DomainView
    ) throws(StorageError) -> Int {
        guard record.payloadBytes <= LogFormat.maxRecordBytes else {
            throw .tooLarge(
                limit: LogFormat.maxRecordBytes, reason: "the change's log record would take \(record.payloadBytes) bytes, more than kvd reads back; make it in smaller parts")
        }
        let limit = Limits.messageBytes
        guard record.changesBytes <= Limits.domainBytes || !planned.changes.contains(where: { $0.value != nil }) else {
            throw .tooLarge(limit: limit, reason: "the change takes \(record.changesBytes) bytes as typed JSON, more than one reply carries; store less at once")
        }
        let budget = view.budgetBytes(after: planned, entryBytes: entryBytes)
        guard budget <= Limits.domainBytes || budget <= view.budgetBytes else {
            throw .tooLarge(
                limit: limit,
                reason: "domain \(domain) would take \(budget) bytes as typed JSON, more than one List or Watch reply carries; store less in it, or use another domain")
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
