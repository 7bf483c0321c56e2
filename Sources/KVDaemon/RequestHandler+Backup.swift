import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.Defaults.Backup`: every domain at one revision, one reply per domain.
extension RequestHandler {
    /// The replies to `Backup`: the store's domains as they were at one revision, captured at
    /// once (``Store/snapshotAll()``), each in one reply (a domain that one reply cannot carry
    /// — only a hand-made file makes one — in several, each with some of its keys), then a
    /// last reply with no domain. The instance's own values only: not the system layer's,
    /// and not the internal domains (locks). Never blocks on I/O; costs memory for every reply.
    func backupReplies() -> [VarlinkReply] {
        let snapshot = store.snapshotAll()
        var replies: [VarlinkReply] = []
        for (domain, domainSnapshot) in snapshot.domains where !domain.isInternal {
            for part in Self.backupParts(domainSnapshot) {
                var members: JSONMembers = ["revision": .integer(snapshot.revision), "domain": .string(domain.name), "values": .object(part.values)]
                if !part.unreadable.isEmpty { members.pairs.append(("unreadable", .object(part.unreadable))) }
                replies.append(VarlinkReply(members: members, continues: true))
            }
        }
        replies.append(VarlinkReply(members: ["revision": .integer(snapshot.revision), "values": .object([:])]))
        return replies
    }

    /// One domain's values (as typed JSON) and unreadable keys (with the reason), in parts that
    /// each fit one reply: the whole domain in one, unless its budget says it cannot fit; then
    /// each value is measured.
    static func backupParts(_ snapshot: DomainSnapshot) -> [(values: [String: JSON], unreadable: [String: JSON])] {
        let unreadable = snapshot.unreadable.reduce(into: [String: JSON]()) { $0[$1.key.name] = .string($1.value) }
        var reasons = 0  // at most 6 bytes a character escaped, and the punctuation
        for (key, reason) in snapshot.unreadable { reasons += (key.name.utf8.count + reason.utf8.count) * 6 + 8 }
        let limit = Limits.domainBytes - 2 * Limits.replyOverhead
        if snapshot.budgetBytes + reasons <= limit {
            return [(snapshot.values.reduce(into: [:]) { $0[$1.key.name] = $1.value.typedJSON }, unreadable)]
        }
        var parts: [(values: [String: JSON], unreadable: [String: JSON])] = [([:], unreadable)]
        var bytes = reasons
        let writer = JSONWriter()
        for (key, value) in snapshot.values.sorted(by: { $0.key < $1.key }) {
            let json = value.typedJSON
            let size = writer.bytes(json).count + key.name.utf8.count * 6 + Limits.replyEntryOverhead
            if bytes + size > limit, !parts[parts.count - 1].values.isEmpty {
                parts.append(([:], [:]))
                bytes = 0
            }
            parts[parts.count - 1].values[key.name] = json
            bytes += size
        }
        return parts
    }
}
