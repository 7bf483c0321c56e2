import KVProtocol
import KVValues

/// Sandboxed apps: each call of a connection whose peer runs in a sandbox (``PeerReach``) is
/// held to ``SandboxAccess``'s table before it is handled: refused (`PermissionDenied`, logged),
/// served with only the domains it may read, or served as for anyone. Connections that reach
/// everything never come here. Loop thread only.
extension Server {
    /// What `connection` may reach now (its app's grants as the store holds them); nil when it
    /// reaches everything.
    func sandboxAccess(_ connection: ClientConnection) -> SandboxAccess? {
        guard case .sandboxed(let app, _) = connection.reach else { return nil }
        return SandboxAccess(
            app: app, readable: limits.sandboxReadable, permits: app.map { handler.permits(of: $0) } ?? [])
    }

    /// Serves `request` of a sandboxed `connection` when its verdict is to refuse it or to
    /// filter what it names; returns whether it did (false: handle it as usual).
    func confineSandboxed(_ request: DefaultsRequest, _ oneway: Bool, _ connection: ClientConnection) -> Bool {
        guard let access = sandboxAccess(connection) else { return false }
        switch access.verdict(request) {
        case .allowed:
            return false
        case .denied:
            if !oneway { connection.send(.failure(ServiceInterface.Error.permissionDenied)) }
            noteRefusal(request, connection)
            return true
        case .filtered:
            if case .watchAll(let prefix, let current) = request {
                startWatchAll(prefix: prefix?.name ?? "", current: current, access: access, connection)
            } else if !oneway {
                connection.send(handler.domainNames(where: access.mayRead))
            }
            return true
        }
    }

    /// Logs a refusal of `connection`'s, one line for its 1st, 2nd, 4th, 8th... refusal (a
    /// hostile app asking in a loop writes a few dozen lines to the journal, not one per call).
    private func noteRefusal(_ request: DefaultsRequest, _ connection: ClientConnection) {
        let count = connection.noteRefusal()
        guard count & (count - 1) == 0, case .sandboxed(_, let label) = connection.reach else { return }
        let target = SandboxAccess.domain(of: request).map { " of \($0)" } ?? ""
        log.warning(
            "client \(connection.id), \(label): \(request.call.method)\(target) refused: a sandboxed app reaches only "
                + "its own domains, the public ones and what a user permitted it (kvctl permit); "
                + "\(count) refused on this connection so far")
    }

    /// After a grant changed: every sandboxed watcher's access taken again, so a permit reaches
    /// an open watch, and one taken back stops it.
    func refreshSandboxedWatches() {
        for connection in table.watchers.values {
            guard case .watching(var watch) = connection.phase, watch.access != nil else { continue }
            watch.access = sandboxAccess(connection)
            connection.startWatching(watch)
        }
    }
}
