import KVProtocol
import KVStorage
import KVValues

/// The first replies of a `WatchAll(current: true)`: the current values of every domain it
/// follows, as the layers combine (what a `Snapshot` of each gives), all at one store revision
/// and one system-layer revision, so that a client needs no read per domain and nothing to
/// reconcile: the stream's later replies are the commits after that revision.
///
/// Bounded: a domain is sent only if it takes at most ``domainBytes`` and all sent take at
/// most ``totalBytes`` (as ``DomainBudget`` counts them; 256 KiB and 4 MiB, from
/// ``Server/Limits``), the smallest first; the others are only named, in
/// `withheld`, for the client to read apart. A domain with nothing to read is not sent (absent
/// is empty). The replies: one run per domain sent (`initial`, `partial`, its `domain` and
/// values, in pieces of ``ReplyStream/pieceBytes``), then the withheld names in runs of at
/// most ``namesPerReply``, the last of which is the stream's first reply proper (`initial`, no
/// domain, not `partial`, `withheld` present even when empty). The values are taken from
/// one ``StoreSnapshot`` when the call is answered, shared with the store, not copied; the
/// replies are encoded at once, into one ``SharedReply`` that ``KeptReplies`` keeps while the
/// store's revision and the layer's version stay (bounded by the budgets: about 4 MiB and the
/// names). Loop thread only.
struct CurrentStateStream {
    /// The most withheld names one reply lists (names are at most 255 bytes: under 1 MiB).
    static let namesPerReply = 2048

    let handler: RequestHandler
    /// The most a domain may take (as ``DomainBudget`` counts) and still be sent.
    let domainBytes: Int
    /// The most all domains sent may take together.
    let totalBytes: Int

    /// The replies of the domains whose names start with `prefix`, encoded one after the other
    /// (each a message and its NUL), and the store revision they are at (the `since` of the watch
    /// that follows). At most about ``totalBytes`` and the names: sent as one shared reply.
    func encoded(prefix: String, where included: (Domain) -> Bool = { _ in true }) -> (
        bytes: [UInt8], revision: Int64
    ) {
        let (stream, revision) = make(prefix: prefix, where: included)
        var bytes: [UInt8] = []
        while let piece = stream.next() { piece.encode(into: &bytes) }
        return (bytes, revision)
    }

    /// The stream of the domains whose names start with `prefix` (those `included` takes: a
    /// sandboxed caller's; the others are not named, not even as withheld), and the store
    /// revision it is at.
    func make(prefix: String, where included: (Domain) -> Bool = { _ in true }) -> (
        stream: ReplyStream, revision: Int64
    ) {
        let snapshot = handler.store.snapshotAll()
        let layer = handler.layer
        let systemRevision = layer.revision
        var names = Set(snapshot.domains.filter { Self.follows($0, prefix) && included($0) })
        names.formUnion(layer.domains.keys.filter { Self.follows($0, prefix) && included($0) })
        let sent = fitting(names, snapshot, layer)
        var runs: [ReplyStream.Run] = []
        var sources: [Domain: [Key: ValueSource]] = [:]
        var withheld: [Domain] = []
        for domain in names.sorted() {
            guard let user = sent[domain] else {
                withheld.append(domain)
                continue
            }
            let current = handler.currentChanges(domain, nil, user: user ?? snapshot.snapshot(of: domain))
            guard !current.changes.isEmpty else { continue }
            runs.append(.init(domain: domain, changes: current.changes))
            if !current.sources.isEmpty { sources[domain] = current.sources }
        }
        runs += Self.nameRuns(withheld)
        let revision = snapshot.revision
        let stream = ReplyStream(runs: runs) { run, slice, _, last in
            WatchReply(
                revision: revision, changes: Array(slice), initial: true,
                sources: run.domain.flatMap { sources[$0] } ?? [:],
                systemRevision: systemRevision, partial: !last, domain: run.domain,
                withheld: run.domain == nil ? run.names : nil
            ).reply
        }
        return (stream, revision)
    }

    /// The domains the budget takes, the smallest first, so that one large domain early in name
    /// order does not leave many small ones to be read apart. Decodes only the domains the
    /// system layer changes (their size as the layers combine); of those, the user's snapshot
    /// taken to measure them is the value, so that it is taken once (nil: none taken yet).
    private func fitting(_ names: Set<Domain>, _ snapshot: StoreSnapshot, _ layer: SystemLayer) -> [Domain:
        DomainSnapshot?]
    {
        let empty = DomainSnapshot(values: [:], revisions: [:], unreadable: [:], revision: 0)
        let sizes = names.map { domain -> (Domain, Int, DomainSnapshot?) in
            guard let system = layer.layer(domain) else { return (domain, snapshot.budgetBytes(of: domain), nil) }
            let user = snapshot.snapshot(of: domain)
            return (domain, handler.combinedBudget(user ?? empty, system), user)
        }
        var sent: [Domain: DomainSnapshot?] = [:]
        var total = 0
        for (domain, bytes, user) in sizes.sorted(by: { ($0.1, $0.0) < ($1.1, $1.0) }) {
            guard bytes <= domainBytes, total + bytes <= totalBytes else { break }
            total += bytes
            sent[domain] = .some(user)
        }
        return sent
    }

    /// The withheld names in runs of at most ``namesPerReply`` (one, maybe empty, at least).
    private static func nameRuns(_ names: [Domain]) -> [ReplyStream.Run] {
        var runs: [ReplyStream.Run] = []
        var start = 0
        repeat {
            let end = min(start + namesPerReply, names.count)
            runs.append(.init(domain: nil, changes: [], names: Array(names[start..<end])))
            start = end
        } while start < names.count
        return runs
    }

    private static func follows(_ domain: Domain, _ prefix: String) -> Bool {
        !domain.isInternal && domain.name.hasPrefix(prefix)
    }
}
