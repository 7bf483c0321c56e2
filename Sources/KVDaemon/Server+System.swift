import KVProtocol
import KVStorage
import KVSystem
import KVValues

/// The system layer in a user's kvd: applying what ``SystemMirror`` read and telling watchers
/// what it changed. (Who may write to the system instance, and how many connections one user
/// may hold there, is ``ConnectionTable/admit(_:)``'s.) Loop thread only.
extension Server {
    /// A user's kvd: applies what the mirror read since the last pass, and sends each watcher
    /// the keys whose combined value or source changed (at the store's current revision: the
    /// user's own data did not change).
    func applySystemUpdates() {
        guard let mirror else { return }
        for update in mirror.takeUpdates() { applySystem(update) }
    }

    private func applySystem(_ update: SystemLayer.Update) {
        let layer = handler.layer
        var watched: [Domain: [Key: LayeredValue?]] = [:]
        let touched = layer.touchedKeys(by: update)
        for connection in table.watchers.values {
            guard case .watching(let watch) = connection.phase, let domain = watch.domain, watched[domain] == nil,
                let keys = touched[domain]
            else { continue }
            watched[domain] = Dictionary(uniqueKeysWithValues: keys.map { ($0, combined(domain, $0)) })
        }
        layer.apply(update)
        for (domain, before) in watched {
            var changes: [Change] = []
            var sources: [Key: ValueSource] = [:]
            for (key, old) in before {
                let now = combined(domain, key)
                guard now != old else { continue }
                changes.append(Change(key: key, value: now?.value))
                if let source = now?.source, source != .user { sources[key] = source }
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
        for connection in table.watchers.values {
            guard case .watching(let watch) = connection.phase, watch.domain == domain else { continue }
            let mine = changes.filter { watch.key == nil || $0.key == watch.key }
            guard !mine.isEmpty else { continue }
            let reply = RequestHandler.watchReply(
                revision: revision, changes: mine, initial: false, sources: sources,
                systemRevision: handler.layer.revision)
            deliver(.own(reply.encoded()), to: connection)
        }
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
