import FoundationEssentials
import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.Defaults.History`: the store's kept changes, as a reply.
extension RequestHandler {
    /// The reply to `History`: newest first, at most `limit` entries and as many as one reply
    /// carries; with `atRevision`, the entries that made the domain's (or key's) state then.
    /// Reads the domain's history file: blocks the caller on that I/O (bounded by retention).
    func history(_ domain: Domain, _ key: Key?, limit: Int64?, atRevision: Int64?) -> VarlinkReply {
        do throws(HistoryError) {
            let page = try store.history(domain, key: key, limit: limit.map { Int(clamping: $0) })
            let entries = try atRevision.map { revision throws(HistoryError) in try store.history(domain, at: revision, key: key) } ?? page.entries
            return Self.historyReply(entries, oldestRevision: page.oldestRevision)
        } catch {
            return Self.historyFailure(error)
        }
    }

    /// The reply carrying `entries`, cut to what fits one message (the newest kept).
    static func historyReply(_ entries: [HistoryEntry], oldestRevision: Int64) -> VarlinkReply {
        var items: [JSON] = []
        var bytes = 0
        let writer = JSONWriter()
        for entry in entries {
            let item = json(entry)
            bytes += writer.bytes(item).count + 1
            guard bytes <= Limits.domainBytes else { break }
            items.append(item)
        }
        return VarlinkReply(parameters: ["entries": .array(items), "oldestRevision": .integer(oldestRevision)])
    }

    /// The `HistoryEntry` object of one entry.
    static func json(_ entry: HistoryEntry) -> JSON {
        var members: [String: JSON] = ["revision": .integer(entry.revision), "key": .string(entry.key.name)]
        if let time = entry.time { members["time"] = .string(RFC3339.format(Date(timeIntervalSince1970: Double(time) / 1000))) }
        if let value = entry.value { members["value"] = value.typedJSON }
        if let uid = entry.uid { members["uid"] = .integer(Int64(uid)) }
        return .object(members)
    }

    static func historyFailure(_ error: HistoryError) -> VarlinkReply {
        switch error {
        case .truncated(let domain, let oldest):
            .failure(DefaultsInterface.Error.historyTruncated, ["domain": .string(domain.name), "oldestRevision": .integer(oldest)])
        case .future:
            .failure(ServiceInterface.Error.invalidParameter, ["parameter": .string("atRevision")])
        case .off, .failure:
            .failure(DefaultsInterface.Error.storageFailure, ["reason": .string(error.description)])
        }
    }
}
