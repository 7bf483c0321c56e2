import KVProtocol
import KVStorage
import KVValues

/// Calls: each message is answered from memory (reads), queued for the pass's group commit
/// (writes), or turns the connection into a watcher; finished commits send their replies and
/// fan out to the watchers of their domain, in commit order. Loop thread only.
extension Server {
    /// Answers one call of `connection` (a read, at once), queues it for this pass's commit (a
    /// write: the connection then awaits it), or makes the connection a watcher.
    func handle(_ message: ArraySlice<UInt8>, from connection: ClientConnection) {
        if let (domain, key) = DefaultsRequest.fastGet(message) {
            return connection.send { handler.writeGetReply(domain, key, into: &$0) }
        }
        let call: VarlinkCall
        do {
            call = try VarlinkCall(message: message)
        } catch {
            connection.send(.failure(ServiceInterface.Error.invalidParameter, ["parameter": .string(error.description)]))
            return
        }
        let request: DefaultsRequest
        do {
            request = try DefaultsRequest(call: call)
        } catch {
            if !call.oneway { connection.send(error.reply) }
            return
        }
        switch handler.handle(request) {
        case .reply(let reply):
            if !call.oneway { connection.send(reply) }
        case .commit(let domain, let mutation):
            connection.phase = .awaitingCommit
            commitsInFlight += 1
            let id = connection.id
            let oneway = call.oneway
            commitsQueued = true
            store.enqueue(domain, mutation) { [completions, poller] result in
                if completions.push(.init(connection: id, oneway: oneway, result: result)) { poller.wake() }
            }
        case .watch(let domain, let key):
            let since = store.revision
            connection.phase = .watching(ClientConnection.Watch(domain: domain, key: key, since: since))
            watchers[connection.id] = connection
            connection.send(handler.initialWatchReply(domain, key, revision: since))
        }
    }

    /// Makes this pass's writes durable with one sync (blocks the loop for it).
    func commitQueued() {
        guard commitsQueued else { return }
        commitsQueued = false
        completions.whileLoopCommits { store.commitQueued() }
    }

    /// Sends the replies of finished commits and the changes to watchers, in commit order.
    func deliverCompletions() {
        for item in completions.takeAll() {
            commitsInFlight -= 1
            if case .success(let commit) = item.result { notifyWatchers(commit) }
            guard let connection = connectionsByID[item.connection] else { continue }
            assert(connection.phase == .awaitingCommit, "a commit finished for client \(item.connection), which awaited none")
            connection.phase = .serving
            if !item.oneway { connection.send(RequestHandler.reply(to: item.result)) }
            process(connection)
        }
    }

    /// Sends the commit's changes to the watchers of its domain: encoded once per key filter,
    /// the same bytes shared by every watcher that uses it.
    private func notifyWatchers(_ commit: Commit) {
        var encoded: [Key?: SharedReply?] = [:]
        for connection in watchers.values {
            guard case .watching(let watch) = connection.phase, watch.domain == commit.domain, commit.revision > watch.since else { continue }
            let reply: SharedReply?
            if let known = encoded[watch.key] {
                reply = known
            } else {
                reply = watchReply(to: commit, key: watch.key)
                encoded[watch.key] = .some(reply)
            }
            guard let reply else { continue }
            connection.send(shared: reply)
            process(connection)
        }
    }

    /// The watch reply for the commit's changes of `key` (all if `nil`); `nil` if there are none.
    private func watchReply(to commit: Commit, key: Key?) -> SharedReply? {
        let changes = commit.changes.filter { key == nil || $0.key == key }
        guard !changes.isEmpty else { return nil }
        return SharedReply(RequestHandler.watchReply(revision: commit.revision, changes: changes, initial: false).encoded())
    }
}
