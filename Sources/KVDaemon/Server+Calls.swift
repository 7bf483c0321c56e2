import KVProtocol
import KVStorage
import KVValues

/// Calls: each message is answered from memory (reads), queued for the pass's group commit
/// (writes, ``CommitPipeline``), or turns the connection into a watcher; finished commits send
/// their replies and, like the system layer's updates, reach the watchers through the
/// ``WatchFanOut``, in commit order. Loop thread only.
extension Server {
    /// Answers one call of `connection` (a read, at once), queues it for this pass's commit (a
    /// write: the connection then awaits it), or makes the connection a watcher.
    func handle(_ message: ArraySlice<UInt8>, from connection: ClientConnection) {
        if connection.reach == .everything, answerFastGet(message, connection) { return }
        guard let (request, oneway) = parseCall(message, connection) else { return }
        if refuseUnprivileged(request, oneway, connection) { return }
        if confineSandboxed(request, oneway, connection) { return }
        if answerShared(request, oneway, connection) { return }
        switch handler.handle(request) {
        case .reply(let reply):
            if !oneway { connection.send(reply) }
        case .commit(let domain, let mutation):
            let writer = connection.writer()
            _ = commits.submit(.write(domain, mutation, writer: writer), for: connection, oneway: oneway)
        case .watch(let domain, let key):
            let access = sandboxAccess(connection)
            startWatch(
                ClientConnection.Watch(domain: domain, key: key, since: store.revision, access: access), connection)
        case .watchAll(let prefix, let current):
            startWatchAll(prefix: prefix?.name ?? "", current: current, connection)
        case .fleetWrite(let change):
            if !commits.submit(.fleet(change), for: connection, oneway: oneway), !oneway {
                connection.send(RequestHandler.reply(to: .failure("the fleet is starting; try again")))
            }
        case .mirror(let profile):
            connection.chooseDconfProfile(profile)
            startWatch(ClientConnection.Watch(domain: nil, key: nil, since: store.revision), connection)
        case .status:
            if !oneway { connection.send(handler.statusReply(fleet: commits.fleetWriter?.mirror.status)) }
        case .stream(let stream):
            if oneway { return }
            connection.startStreaming()
            startStream(stream, to: connection)
        case .historyChange(let domain, let change):
            _ = commits.submit(.history(domain, change), for: connection, oneway: oneway)
        case .source(let domain, let key):
            if !oneway { connection.send(handler.sourceReply(domain, key, for: connection.dropInPeer)) }
        case .locks(let domain):
            if !oneway { connection.send(handler.locksReply(domain, for: connection.dropInPeer)) }
        }
    }

    /// Refuses a privileged request of a connection that may not write (PermissionDenied);
    /// returns whether it did.
    private func refuseUnprivileged(_ request: DefaultsRequest, _ oneway: Bool, _ connection: ClientConnection) -> Bool
    {
        guard request.isPrivileged, !connection.mayWrite else { return false }
        if !oneway { connection.send(.failure(ServiceInterface.Error.permissionDenied)) }
        log.log(
            .debug,
            "client \(connection.id) (uid \(connection.uid.map(String.init) ?? "?")) may not write: \(request.call.method) refused"
        )
        return true
    }

    /// Makes `connection` a `WatchAll` of the domains under `prefix`: its first reply, or with
    /// `current` their current values first (``CurrentStateStream``, kept in ``Server/replies``
    /// while nothing changes; sent as one shared reply), then every change after. With `access`
    /// (a sandboxed connection), only of the domains it may read, its current values made for it.
    func startWatchAll(
        prefix: String, current: Bool, access: SandboxAccess? = nil, _ connection: ClientConnection
    ) {
        let all = ClientConnection.Watch(domain: nil, since: store.revision, prefix: prefix, access: access)
        guard current else { return startWatch(all, connection) }
        if let access {
            let (bytes, revision) = CurrentStateStream(
                handler: handler, domainBytes: limits.currentDomainBytes, totalBytes: limits.currentTotalBytes
            ).encoded(prefix: prefix, where: access.mayRead)
            connection.startWatching(
                ClientConnection.Watch(domain: nil, since: revision, prefix: prefix, access: access))
            table.addWatcher(connection)
            return connection.send(shared: SharedReply(bytes))
        }
        let stamp = GetReplyCache.Stamp(revision: store.revision, layerVersion: handler.layer.version)
        let (reply, revision) = replies.currentState(prefix, at: stamp) {
            CurrentStateStream(
                handler: handler, domainBytes: limits.currentDomainBytes, totalBytes: limits.currentTotalBytes
            ).encoded(prefix: prefix)
        }
        connection.startWatching(ClientConnection.Watch(domain: nil, since: revision, prefix: prefix))
        table.addWatcher(connection)
        connection.send(shared: reply)
    }

    /// Makes `connection` a watcher of `watch`: its first replies, then every change after them.
    private func startWatch(_ watch: ClientConnection.Watch, _ connection: ClientConnection) {
        connection.startWatching(watch)
        table.addWatcher(connection)
        startStream(fanOut.initialStream(for: watch, peer: connection.dropInPeer), to: connection)
    }

    /// The request `message` carries and whether it is `oneway`: a compact `Set` through the
    /// fast path (``DefaultsRequest/fastSet(_:)``), anything else through the general one. Nil
    /// after answering a call that is not valid (nothing for a `oneway` one).
    private func parseCall(_ message: ArraySlice<UInt8>, _ connection: ClientConnection) -> (
        DefaultsRequest, oneway: Bool
    )? {
        if let request = DefaultsRequest.fastSet(message) { return (request, false) }
        let call: VarlinkCall
        do {
            call = try VarlinkCall(message: message)
        } catch {
            connection.send(
                .failure(ServiceInterface.Error.invalidParameter, ["parameter": .string(error.description)]))
            return nil
        }
        do {
            return (try DefaultsRequest(call: call), call.oneway)
        } catch {
            if !call.oneway { connection.send(error.reply) }
            return nil
        }
    }

    /// Answers `List` and `History`, whose large replies are kept and shared
    /// (``Server/replies``); false for any other request.
    private func answerShared(_ request: DefaultsRequest, _ oneway: Bool, _ connection: ClientConnection) -> Bool {
        let reply: () -> SharedReply
        switch request {
        case .list(let domain):
            reply = { self.listReply(domain) }
        case .history(let domain, let key, let limit, let atRevision, let before):
            let call = KeptReplies.HistoryCall(
                domain: domain, key: key, limit: limit, atRevision: atRevision, beforeRevision: before)
            reply = { self.historyReply(call) }
        default:
            return false
        }
        if !oneway { connection.send(shared: reply()) }
        return true
    }

    /// The reply to `List` of `domain`: from ``Server/replies`` when it holds it, else made (and
    /// kept there if large). The stamp is read before the reply is made (see ``GetReplyCache``).
    private func listReply(_ domain: Domain) -> SharedReply {
        let stamp = GetReplyCache.Stamp(revision: store.revision, layerVersion: handler.layer.version)
        return replies.list(domain, at: stamp) { SharedReply(handler.list(domain, withUnreadable: false).encoded()) }
    }

    /// The reply to `History` `call`: from ``Server/replies`` when it holds it, else made (and
    /// kept there if large). The stamp is read before the reply is made (see ``GetReplyCache``).
    private func historyReply(_ call: KeptReplies.HistoryCall) -> SharedReply {
        let stamp = KeptReplies.HistoryStamp(revision: store.revision, historyVersion: store.historyVersion)
        return replies.history(call, at: stamp) {
            SharedReply(
                handler.history(
                    call.domain, call.key, limit: call.limit, atRevision: call.atRevision,
                    beforeRevision: call.beforeRevision
                ).encoded())
        }
    }

    /// Answers `message` if it is a `Get` the fast path takes (``DefaultsRequest/fastGet(_:)``):
    /// from ``Server/replies`` when it holds the reply, else made and kept there. The stamp is read
    /// before the reply is made (see ``GetReplyCache``).
    private func answerFastGet(_ message: ArraySlice<UInt8>, _ connection: ClientConnection) -> Bool {
        guard DefaultsRequest.beginsAsGet(message) else { return false }
        let stamp = GetReplyCache.Stamp(revision: store.revision, layerVersion: handler.layer.version)
        let slot = GetReplyCache.slot(of: message)
        if let reply = replies.get(message, in: slot, at: stamp) {
            connection.send { $0.append(contentsOf: reply) }
            return true
        }
        guard let (domain, key) = DefaultsRequest.fastGet(message) else { return false }
        connection.send { output in
            let start = output.count
            handler.writeGetReply(domain, key, into: &output)
            replies.keep(output[start...], forGet: message, in: slot, at: stamp)
        }
        return true
    }

    /// What tells the loop of a commit made outside it (``CommitPipeline/announcer``).
    /// Callable from any thread.
    var announcer: @Sendable (Commit) -> Void { commits.announcer }

    /// Sends the replies of finished commits and the changes to watchers, in commit order.
    func deliverCompletions() {
        for item in commits.takeFinished() {
            if item.notify, case .success(let commit) = item.result {
                if commit.domain == .dropInState {
                    deliverDropIns(commit)
                } else if commit.domain == .permits {
                    refreshSandboxedWatches()
                } else {
                    var news = fanOut.news(of: commit)
                    notifyWatchers(&news)
                }
            }
            guard let connection = table.byID[item.connection] else { continue }
            commits.finish(item, of: connection)
            process(connection)
        }
    }

    /// A user's kvd: applies what the mirror read since the last pass together, telling each
    /// watcher one change set for all of it (a reload of drop-in files is never seen half
    /// done; ``WatchFanOut/applySystemUpdates(_:watchers:)``).
    func applySystemUpdates() {
        let updates = handler.follower.takeUpdates()
        guard !updates.isEmpty else { return }
        var news = fanOut.applySystemUpdates(updates, watchers: table.watchers.values)
        notifyWatchers(&news)
        log.log(.debug, "system layer: \(handler.layer.domains.count) domain(s)")
    }

    /// Who `connection` may be told made a change: on a user's kvd, everyone (it is its
    /// user's); on the system instance, an admin everyone, a user only themself.
    private func seesWriter(_ connection: ClientConnection) -> (Writer) -> Bool {
        guard handler.isSystem, !connection.mayWrite else { return { _ in true } }
        let uid = connection.uid
        return { $0.visible(to: uid) != nil }
    }

    /// Tells every watcher what `news` has for it: the one place watchers hear of a change, be
    /// it a commit or the system layer's. A shared reply is encoded once for all who get it.
    private func notifyWatchers(_ news: inout WatchFanOut.News) {
        for connection in table.watchers.values {
            guard case .watching(let watch) = connection.phase, watch.followsItsDomain,
                let reply = news.reply(for: watch, peer: connection.dropInPeer, seesWriter: seesWriter(connection))
            else { continue }
            deliver(reply, to: connection)
        }
    }
}
