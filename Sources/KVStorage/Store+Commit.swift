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
        var planned: [(domain: Domain, changes: [Change], revision: Int64)] = []
        var records: [UInt8] = []
        var outcomes: [Result<Commit, StorageError>] = []
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

    private func plan(_ item: Pending, into batch: inout Batch) {
        let changes: [Change]
        if batch.views[item.domain] == nil {
            batch.views[item.domain] = DomainView(state.withLock { $0.domains[item.domain] })
        }
        do {
            changes = try MutationPlanner.changes(of: item.mutation, in: item.domain, current: batch.views[item.domain]!)
        } catch {
            batch.outcomes.append(.failure(error))
            return
        }
        guard !changes.isEmpty else {
            batch.outcomes.append(.success(Commit(revision: batch.revision, domain: item.domain, changes: [])))
            return
        }
        batch.revision += 1
        batch.views[item.domain]!.apply(changes, at: batch.revision)  // in place: no copy of the view's overlay
        batch.planned.append((item.domain, changes, batch.revision))
        let record = LogRecord(revision: batch.revision, domain: item.domain, kind: item.mutation.kind, changes: changes)
        batch.records.append(contentsOf: LogFormat.encode(record))
        batch.outcomes.append(.success(Commit(revision: batch.revision, domain: item.domain, changes: changes)))
    }

    /// Makes a durable batch visible to readers: applies its changes in place (the committed
    /// dictionaries are not shared at this point, so no copy is made) and drops emptied domains.
    private func publish(_ batch: Batch) {
        state.withLock { state in
            for (domain, changes, revision) in batch.planned {
                let emptied = state.domains[domain, default: DomainState()].apply(changes, at: revision)
                if emptied { state.domains[domain] = nil }
            }
            state.revision = batch.revision
        }
        var last: Domain?
        for (domain, _, _) in batch.planned where domain != last {  // a run of changes to one domain: one insert
            journal.dirty.insert(domain)
            last = domain
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
