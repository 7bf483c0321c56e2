import KVStorage
import KVValues

/// The writes on their way: what clients asked to commit (in the store's group commit, in etcd
/// for a fleet domain, or a history change on the store's commit queue), how many of those are
/// unanswered, and the finished ones waiting for the loop (``CompletionQueue``), in commit order.
///
/// Every kind of commit takes the same path: ``submit(_:for:oneway:)`` puts the connection in
/// ``ClientConnection/Phase/awaitingCommit`` and counts it in ``inFlight``; when it finishes, on
/// whatever thread, it is queued for the loop, which is woken once per batch; ``takeFinished()``
/// hands them back, in commit order, and uncounts them, and ``finish(_:of:)`` puts the
/// connection back to serving: a connection's commit phase is set and reset here, nowhere else. A commit made outside the loop (the
/// fleet mirror's, through ``announcer``) is queued the same way but awaited by nobody: only
/// watchers hear of it. Loop thread only, except ``announcer`` and the completions.
final class CommitPipeline {
    private let store: Store
    private let poller: Poller
    /// Finished commits, in commit order: from this loop's own commits, from the store's
    /// thread (batches of two or more writes, or while it was busy), or from the fleet's.
    private let completions = CompletionQueue()
    /// Commits clients asked for that have not been handed back by ``takeFinished()``.
    @exclusivity(unchecked) private(set) var inFlight = 0
    /// Writes queued in the store this pass, awaiting ``commitQueued()``.
    @exclusivity(unchecked) private(set) var queued = 0
    /// The system instance with `--etcd`: makes changes to fleet domains in etcd (nil until
    /// the fleet is up, and in every other kvd; ``fleetIsUp(_:)``).
    private(set) var fleetWriter: FleetWriter?

    init(store: Store, poller: Poller) {
        self.store = store
        self.poller = poller
    }

    /// The fleet is up: its changes go to etcd through `writer` from now on.
    func fleetIsUp(_ writer: FleetWriter) {
        fleetWriter = writer
    }

    /// What a client asked to commit.
    enum Work {
        /// A change to the store, in this pass's group commit (`writer`: who asked for it, for
        /// the history and the watchers).
        case write(Domain, Mutation, writer: Writer?)
        /// A change to a fleet domain, made in etcd; watchers hear of it from the fleet
        /// mirror's own commit, not from this one.
        case fleet(FleetWriter.Change)
        /// `ForgetHistory` or `KeepHistory` of `domain`, answered with the revision like a write.
        case history(Domain, HistoryChange)
    }

    /// Starts `work` for `connection`, which awaits it from then on (its later calls wait). Returns
    /// false, starting nothing, for a fleet change while the fleet is not up.
    func submit(_ work: Work, for connection: ClientConnection, oneway: Bool) -> Bool {
        if case .fleet = work, fleetWriter == nil { return false }
        connection.awaitCommit()
        inFlight += 1
        switch work {
        case .write(let domain, let mutation, let writer):
            queued += 1
            store.enqueue(domain, mutation, writer: writer, completion: finisher(connection.id, oneway, notify: true))
        case .fleet(let change):
            fleetWriter?.submit(change, completion: finisher(connection.id, oneway, notify: false))
        case .history(let domain, let change):
            let finish = finisher(connection.id, oneway, notify: false)
            store.submitHistoryChange(change) { result in
                finish(result.map { Commit(revision: $0, domain: domain, changes: []) })
            }
        }
        return true
    }

    /// Queues a commit the loop makes itself (a drop-in reload's marker) in this pass's group
    /// commit, awaited by nobody: watchers hear of it when it finishes.
    func submitUnawaited(_ domain: Domain, _ mutation: Mutation) {
        queued += 1
        store.enqueue(domain, mutation) { [completions, poller] result in
            if completions.push(.init(connection: CompletionQueue.Item.external, oneway: true, result: result)) {
                poller.wake()
            }
        }
    }

    /// What queues a finished commit of connection `id` for the loop and wakes it, any thread.
    private func finisher(_ id: Int, _ oneway: Bool, notify: Bool) -> @Sendable (Result<Commit, StorageError>) -> Void {
        { [completions, poller] result in
            if completions.push(.init(connection: id, oneway: oneway, result: result, notify: notify)) { poller.wake() }
        }
    }

    /// What tells the loop of a commit made outside it (the fleet mirror's, called from the
    /// store's commit queue, in commit order): its watchers and mirrors hear of it at the
    /// loop's next pass. Callable from any thread.
    var announcer: @Sendable (Commit) -> Void {
        { [completions, poller] commit in
            if completions.push(
                .init(connection: CompletionQueue.Item.external, oneway: true, result: .success(commit)))
            {
                poller.wake()
            }
        }
    }

    /// Makes this pass's writes durable with one sync. One write (one client waiting): on the
    /// loop's thread, which blocks for the sync but hands nothing to another thread. More: on the
    /// store's commit queue, so the loop reads and parses the next calls during the sync, and
    /// the commit queue takes them as the next batch as soon as this one is durable (their
    /// completions wake the loop, one wake a batch).
    func commitQueued() {
        guard queued > 0 else { return }
        defer { queued = 0 }
        if queued > 1 {
            store.commitQueuedInBackground()
        } else {
            completions.whileLoopCommits { store.commitQueued() }
        }
    }

    /// The commits finished since the last call, in commit order; those clients asked for are
    /// no longer counted in ``inFlight``. The loop hands each awaited one, with its connection
    /// if still open, to ``finish(_:of:)``.
    func takeFinished() -> [CompletionQueue.Item] {
        let items = completions.takeAll()
        for item in items where item.connection != CompletionQueue.Item.external { inFlight -= 1 }
        return items
    }

    /// The commit of `item` finished for `connection`, which awaited it: it handles its calls
    /// again, and gets the commit's reply unless its call was `oneway`.
    func finish(_ item: CompletionQueue.Item, of connection: ClientConnection) {
        connection.commitFinished()
        if !item.oneway { connection.send(RequestHandler.reply(to: item.result)) }
    }
}
