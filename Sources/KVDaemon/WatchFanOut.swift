import KVProtocol
import KVStorage
import KVValues

/// What watchers hear, and how the layers combine in it: the user's own store, the system layer
/// a user's kvd follows (``SystemMirror``), and on the system instance the fleet domains (whose
/// commits the fleet mirror makes in the store, so they reach watchers as commits).
///
/// A change reaches watchers as one ``News``, whatever it came from: a commit (the loop's own,
/// or one made outside it) or an update of the system layer. The server hands each watcher's
/// ``ClientConnection/Watch`` to ``News/reply(for:)`` and delivers what it gets: that is the only
/// place watchers are told anything after their first replies (``initialStream(for:)``).
/// What a watcher gets is what a read at the same revision gets: a change under a lock is not
/// seen, a removal uncovers the system default, and a change of the layer is sent for the keys
/// whose combined value or source it changed.
///
/// ``applySystemUpdates(_:watchers:)`` has the handler's ``SystemFollower`` (the layer's only
/// writer) apply the layer's updates, and tells watchers what they changed. Loop thread only.
final class WatchFanOut {
    private let handler: RequestHandler

    init(handler: RequestHandler) {
        self.handler = handler
    }

    // MARK: What a watcher gets

    /// The first replies of a new watcher: a `Mirror`'s snapshot (no domain) with the drop-in
    /// files that apply to `peer`, or a `Watch`'s current values as the layers combine (see
    /// ``initialWatchStream(_:_:revision:)``), all at `revision`.
    func initialStream(for watch: ClientConnection.Watch, peer: DropInPeer?) -> ReplyStream {
        if watch.prefix != nil { return initialAllStream(revision: watch.since) }
        guard let domain = watch.domain else { return handler.initialMirrorStream(revision: watch.since, for: peer) }
        return initialWatchStream(domain, watch.key, revision: watch.since)
    }

    /// The first replies of a watch, made piece by piece (``ReplyStream``): the current values
    /// (all, or the one key) as changes, as the layers combine. The first piece has `initial:
    /// true`; when the values take more than one piece, every piece but the last has `partial:
    /// true` and the later ones `initial: false`: a client gathers them into the current values.
    func initialWatchStream(_ domain: Domain, _ key: Key?, revision: Int64) -> ReplyStream {
        let (changes, sources) = handler.currentChanges(domain, key)
        let systemRevision = handler.layer.revision
        return ReplyStream(runs: [.init(domain: domain, changes: changes)]) { _, slice, first, last in
            WatchReply(
                revision: revision, changes: Array(slice), initial: first, sources: sources,
                systemRevision: systemRevision, partial: !last
            ).reply
        }
    }

    /// The first reply of a `WatchAll`: no domain and no changes, the revision and the system
    /// layer's revision its later replies follow.
    func initialAllStream(revision: Int64) -> ReplyStream {
        let systemRevision = handler.layer.revision
        return ReplyStream(runs: [.init(domain: nil, changes: [])]) { _, _, _, _ in
            WatchReply(revision: revision, changes: [], initial: true, systemRevision: systemRevision).reply
        }
    }

    /// The news of `commit`, for every watcher of its domain and every `Mirror`.
    func news(of commit: Commit) -> News {
        News(
            .commit(commit, system: handler.layer.layer(commit.domain)), systemRevision: handler.layer.revision,
            dropIns: handler.dropIns)
    }

    /// Has `updates` applied to the system layer together (``SystemFollower/apply(_:)``); the
    /// news for the watchers of each domain they touched: the keys whose combined value or source
    /// changed, at the store's current revision (the user's own data did not change), one change
    /// set for all of `updates`. Only the domains some of `watchers` watch are compared (`layer`
    /// is the layer before them).
    func applySystemUpdates(_ updates: [SystemLayer.Update], watchers: some Sequence<ClientConnection>) -> News {
        let layer = handler.layer
        var watched: [Domain: [Key: WatchedKey]] = [:]
        var touched: [Domain: Set<Key>] = [:]
        for update in updates { touched.merge(layer.touchedKeys(by: update)) { $0.union($1) } }
        // A glob lock changes every key it matches: the user's and the system's of its domain.
        for (domain, keys) in touched where keys.contains(where: LockPattern.isPattern) {
            touched[domain]?.formUnion(handler.store.list(domain)?.values.keys.map { $0 } ?? [])
            touched[domain]?.formUnion(layer.layer(domain)?.values.keys.map { $0 } ?? [])
        }
        for connection in watchers {
            guard case .watching(let watch) = connection.phase, !watch.isMirror else { continue }
            for (domain, keys) in touched where watched[domain] == nil && watch.follows(domain) {
                watched[domain] = Dictionary(uniqueKeysWithValues: keys.map { ($0, watchedKey(domain, $0)) })
            }
        }
        handler.follower.apply(updates)
        var changed: [Domain: News.LayerChanges] = [:]
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
            changed[domain] = News.LayerChanges(changes: changes, sources: sources)
        }
        return News(
            .system(revision: handler.store.revision, changed), systemRevision: handler.layer.revision, dropIns: nil)
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

    /// The value of `key` a reader of `domain` gets now, as the layers combine (an unreadable
    /// value of the user's counts as none).
    private func combined(_ domain: Domain, _ key: Key) -> LayeredValue? {
        var user: Value?
        if case .value(let value, _) = handler.store.get(domain, key) { user = value }
        guard let system = handler.layer.layer(domain) else {
            return user.map { LayeredValue(value: $0, source: .user) }
        }
        return system.combine(key, user: user)
    }

    // MARK: News

    /// One change on its way to the watchers: ``reply(for:)`` says what each watcher gets (nil:
    /// nothing). A reply that many watchers get is encoded once and shared (one per key filter
    /// of a commit; one for every `Mirror`).
    struct News {
        /// What changed in one domain's system layer, as a reader sees it.
        struct LayerChanges {
            var changes: [Change]
            var sources: [Key: ValueSource]
        }

        enum Source {
            /// A commit, and the system layer of its domain then.
            case commit(Commit, system: SystemLayer.DomainLayer?)
            /// The system layer changed these domains, at the store's `revision`.
            case system(revision: Int64, [Domain: LayerChanges])
        }

        private let source: Source
        /// The layer's revision the replies carry.
        private let systemRevision: Int64?
        /// A commit's watch replies made so far, by key filter and whether they name the writer
        /// (nil: nothing for that filter).
        private var encoded: [Encoded: SharedReply?] = [:]
        /// A commit's `WatchAll` replies once made (its domain named; `.some(nil)`: nothing to
        /// send), by whether they name the writer.
        private var encodedAll: [Bool: SharedReply?] = [:]

        /// What a commit's `Watch` reply depends on.
        private struct Encoded: Hashable {
            var key: Key?
            var namesWriter: Bool
        }
        /// The system instance's drop-in files: a `Mirror` gets a commit as its peer's files
        /// combine with it (nil: a change of the system layer, which no mirror follows).
        private let dropIns: DropInLayer?
        /// A commit's `Mirror` reply, by drop-in profile (which files apply to the peer).
        private var mirrored: [[Bool]: SharedReply] = [:]

        init(_ source: Source, systemRevision: Int64?, dropIns: DropInLayer?) {
            self.source = source
            self.systemRevision = systemRevision
            self.dropIns = dropIns
        }

        /// What the watcher of `watch` gets from this change; nil when it is not concerned (another
        /// domain, another key, a commit at or before its first replies, nothing it can see).
        /// `peer`: the watcher's, for a `Mirror`'s drop-in profile (read only for a `Mirror`).
        /// `seesWriter`: whether the watcher may be told who made a commit (``Writer``).
        mutating func reply(
            for watch: ClientConnection.Watch, peer: @autoclosure () -> DropInPeer?, seesWriter: (Writer) -> Bool
        ) -> ReplyStream.Deferred? {
            switch source {
            case .commit(let commit, let system):
                let writer = commit.writer.flatMap { seesWriter($0) ? $0 : nil }
                return commitReply(commit, system, writer: writer, for: watch, peer: peer).map { .shared($0) }
            case .system(let revision, let changed):
                if watch.prefix != nil { return allReply(changed, revision: revision, for: watch) }
                guard let domain = watch.domain, let layer = changed[domain] else { return nil }
                let mine = layer.changes.filter { watch.key == nil || $0.key == watch.key }
                guard !mine.isEmpty else { return nil }
                let reply = WatchReply(
                    revision: revision, changes: mine, initial: false, sources: layer.sources,
                    systemRevision: systemRevision)
                return .own(reply.reply.encoded())
            }
        }

        /// A `WatchAll`'s replies to a change of the system layer: one per domain it follows,
        /// in the order of their names, sent together.
        private func allReply(_ changed: [Domain: LayerChanges], revision: Int64, for watch: ClientConnection.Watch)
            -> ReplyStream.Deferred?
        {
            var bytes: [UInt8] = []
            for (domain, layer) in changed.sorted(by: { $0.key < $1.key }) where watch.follows(domain) {
                let reply = WatchReply(
                    revision: revision, changes: layer.changes, initial: false, sources: layer.sources,
                    systemRevision: systemRevision, domain: domain)
                bytes += reply.reply.encoded()
            }
            return bytes.isEmpty ? nil : .own(bytes)
        }

        /// A commit's reply to `watch`: every commit of a mirrored domain to a `Mirror`; the
        /// commit's changes of the watched key (all if none) to a `Watch` of its domain.
        private mutating func commitReply(
            _ commit: Commit, _ system: SystemLayer.DomainLayer?, writer: Writer?, for watch: ClientConnection.Watch,
            peer: () -> DropInPeer?
        ) -> SharedReply? {
            guard commit.revision > watch.since else { return nil }
            if watch.prefix != nil {
                guard watch.follows(commit.domain) else { return nil }
                if let known = encodedAll[writer != nil] { return known }
                let reply = watchReply(to: commit, key: nil, system: system, writer: writer, naming: true)
                encodedAll[writer != nil] = .some(reply)
                return reply
            }
            guard let domain = watch.domain else {
                guard commit.domain.isMirrored else { return nil }
                let peer = peer()
                let profile = dropIns?.current.profile(of: peer) ?? []
                if let known = mirrored[profile] { return known }
                let changes = dropIns?.mirrored(commit, for: peer) ?? commit.changes
                let reply = SharedReply(
                    RequestHandler.mirrorReply(
                        revision: commit.revision, domain: commit.domain, changes: changes, synced: true
                    ).encoded())
                mirrored[profile] = reply
                return reply
            }
            guard domain == commit.domain else { return nil }
            let encoding = Encoded(key: watch.key, namesWriter: writer != nil)
            if let known = encoded[encoding] { return known }
            let reply = watchReply(to: commit, key: watch.key, system: system, writer: writer)
            encoded[encoding] = .some(reply)
            return reply
        }

        /// The watch reply for the commit's changes of `key` (all if `nil`), as the layers combine
        /// (a change under a lock is not seen; a removal uncovers the system default); `nil` if
        /// there are none.
        private func watchReply(
            to commit: Commit, key: Key?, system: SystemLayer.DomainLayer?, writer: Writer?, naming: Bool = false
        ) -> SharedReply? {
            var changes = commit.changes.filter { key == nil || $0.key == key }
            var sources: [Key: ValueSource] = [:]
            if let system {
                changes = changes.compactMap { change in
                    guard !system.locks.contains(change.key) else { return nil }
                    guard change.value == nil, let value = system.values[change.key] else { return change }
                    sources[change.key] = .system
                    return Change(key: change.key, value: value)
                }
            }
            guard !changes.isEmpty else { return nil }
            var reply = WatchReply(
                revision: commit.revision, changes: changes, initial: false, sources: sources,
                systemRevision: systemRevision, domain: naming ? commit.domain : nil, writer: writer)
            var encoded = reply.reply.encoded()
            if encoded.count > Limits.messageBytes, writer != nil {
                // A change at the domain's limit leaves no room for its writer (up to 1,592 bytes
                // besides the reply's overhead): the change is sent, its writer as unknown.
                reply.writer = nil
                encoded = reply.reply.encoded()
            }
            return SharedReply(encoded)
        }
    }
}
