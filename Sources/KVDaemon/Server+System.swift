import KVProtocol
import KVStorage
import KVSystem
import KVValues

/// The system layer in the loop: who may write to the system instance (decided once, at
/// accept, from the kernel's word), how many connections one user may hold there, and, in a
/// user's kvd, applying what ``SystemMirror`` read and telling watchers what it changed.
/// Loop thread only.
extension Server {
    /// The system instance: learns the new connection's peer from the kernel (`SO_PEERCRED`,
    /// `SO_PEERGROUPS`, as they were when it connected), fixes whether it may write (root, or
    /// a member of the admin group; anyone else's calls may be at most
    /// ``DaemonOptions/SystemPolicy/maxReaderMessageBytes``), and counts it against its uid's cap. Returns false when the
    /// connection is refused (the caller closes it). A user's kvd admits everyone: only its
    /// user can reach its socket.
    func admit(_ connection: ClientConnection) -> Bool {
        guard case .system(let policy) = role else { return true }
        let peer: PeerCredentials
        do {
            peer = try system.peerCredentials(connection.fd)
        } catch {
            noteRefusal("cannot tell who connected (getsockopt SO_PEERCRED: \(error))")
            return false
        }
        let open = connectionsPerUID[peer.uid, default: 0]
        guard open < policy.maxConnectionsPerUID else {
            noteRefusal(
                "uid \(peer.uid) already holds \(open) connections, the most one user may (--max-connections-per-uid)")
            return false
        }
        connectionsPerUID[peer.uid] = open + 1
        connection.uid = peer.uid
        connection.mayWrite =
            peer.uid == 0 || (system.groupID(named: policy.adminGroup).map(peer.isMember(of:)) ?? false)
        if !connection.mayWrite {
            connection.framer = MessageFramer(limit: DaemonOptions.SystemPolicy.maxReaderMessageBytes)
        }
        log.log(
            .debug,
            "client \(connection.id) is uid \(peer.uid) (pid \(peer.pid)), \(connection.mayWrite ? "may write" : "reads only")"
        )
        return true
    }

    /// A user's kvd: applies what the mirror read since the last pass, and sends each watcher
    /// the keys whose combined value or source changed (at the store's current revision: the
    /// user's own data did not change).
    func applySystemUpdates() {
        guard let mirror else { return }
        for update in mirror.takeUpdates() { applySystem(update) }
    }

    private func applySystem(_ update: SystemLayer.Update) {
        let layer = handler.layer
        var watched: [Domain: [Key: WatchedKey]] = [:]
        let touched = layer.touchedKeys(by: update)
        for connection in watchers.values {
            guard case .watching(let watch) = connection.phase, let domain = watch.domain, watched[domain] == nil,
                let keys = touched[domain]
            else { continue }
            watched[domain] = Dictionary(uniqueKeysWithValues: keys.map { ($0, watchedKey(domain, $0)) })
        }
        layer.apply(update)
        for (domain, before) in watched {
            var changes: [Change] = []
            var sources: [Key: ValueSource] = [:]
            for (key, old) in before {
                let now = watchedKey(domain, key)
                guard now != old else { continue }
                changes.append(Change(key: key, value: now.value?.value))
                if let source = now.value?.source ?? (now.locked ? .locked : nil), source != .user {
                    sources[key] = source
                }
            }
            guard !changes.isEmpty else { continue }
            changes.sort { $0.key < $1.key }
            notifyWatchers(of: domain, changes, sources)
        }
        log.log(.debug, "system layer: \(layer.domains.count) domain(s)")
    }

    /// Sends the system layer's changes to the watchers of `domain`: at the store's revision
    /// (the user's data did not change) and the layer's new `systemRevision`.
    private func notifyWatchers(of domain: Domain, _ changes: [Change], _ sources: [Key: ValueSource]) {
        let revision = store.revision
        for connection in watchers.values {
            guard case .watching(let watch) = connection.phase, watch.domain == domain else { continue }
            let mine = changes.filter { watch.key == nil || $0.key == watch.key }
            guard !mine.isEmpty else { continue }
            let reply = RequestHandler.watchReply(
                revision: revision, changes: mine, initial: false, sources: sources,
                systemRevision: handler.layer.revision)
            deliver(.own(reply.encoded()), to: connection)
        }
    }

    /// What a watcher of `domain` is told of `key`: its value as the layers combine, and whether
    /// the system layer locks it (a key locked without a value is sent with no value and the
    /// source "locked", so that clients know it is not writable).
    private struct WatchedKey: Equatable {
        var value: LayeredValue?
        var locked: Bool
    }

    private func watchedKey(_ domain: Domain, _ key: Key) -> WatchedKey {
        WatchedKey(value: combined(domain, key), locked: handler.layer.layer(domain)?.locks.contains(key) ?? false)
    }

    /// The value of `key` a reader of `domain` gets now, as the layers combine.
    private func combined(_ domain: Domain, _ key: Key) -> LayeredValue? {
        var user: Value?
        if case .value(let value, _) = store.get(domain, key) { user = value }
        guard let system = handler.layer.layer(domain) else {
            return user.map { LayeredValue(value: $0, source: .user) }
        }
        return system.combine(key, user: user)
    }
}
