import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.Defaults.Backup`: every domain at one revision, made piece by piece as the client
/// reads (``ReplyStream``).
extension RequestHandler {
    /// The replies to `Backup`: the store's domains as they were at one revision, captured at
    /// once (``Store/snapshotAll()``, shared with the store, not copied), each domain in
    /// replies of about ``ReplyStream/pieceBytes`` (a larger domain in several, each with some
    /// of its keys, sorted; its unreadable keys, with the reason, in its first), then a last
    /// reply with no domain. Each domain's values are taken from the snapshot only when its
    /// pieces are reached. The instance's own values only: not the system layer's, and not the
    /// internal domains (locks). Never blocks on I/O.
    func backupStream() -> ReplyStream {
        let snapshot = store.snapshotAll()
        var names = snapshot.domains.lazy.filter { !$0.isInternal }.makeIterator()
        var ended = false
        let runs = AnyIterator<ReplyStream.Run> {
            while let domain = names.next() {
                guard let domainSnapshot = snapshot.snapshot(of: domain) else { continue }
                let changes = domainSnapshot.values.map { Change(key: $0.key, value: $0.value) }.sorted {
                    $0.key < $1.key
                }
                return .init(domain: domain, changes: changes, unreadable: domainSnapshot.unreadable)
            }
            guard !ended else { return nil }
            ended = true
            return .init(domain: nil, changes: [])  // the last reply
        }
        let revision = snapshot.revision
        return ReplyStream(lazy: runs) { run, slice, _, _ in
            Self.backupReply(
                revision: revision, domain: run.domain, slice, unreadable: slice.startIndex == 0 ? run.unreadable : [:])
        }
    }

    /// One `Backup` reply: `changes` of `domain` as typed JSON (and `unreadable` keys with the
    /// reason), or with no domain the last reply.
    static func backupReply(revision: Int64, domain: Domain?, _ changes: ArraySlice<Change>, unreadable: [Key: String])
        -> VarlinkReply
    {
        guard let domain else {
            return VarlinkReply(members: ["revision": .integer(revision), "values": .object([:])])
        }
        let values = changes.reduce(into: [String: JSON]()) { $0[$1.key.name] = $1.value?.typedJSON }
        var members: JSONMembers = [
            "revision": .integer(revision), "domain": .string(domain.name), "values": .object(values),
        ]
        if !unreadable.isEmpty {
            members.pairs.append(
                ("unreadable", .object(unreadable.reduce(into: [:]) { $0[$1.key.name] = .string($1.value) })))
        }
        return VarlinkReply(members: members, continues: true)
    }
}
