import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.Defaults.History` and the history changes: the store's kept changes, as a reply.
extension RequestHandler {
    /// `History` and `Blame` (answered here), `ForgetHistory` and `KeepHistory` (handed back to
    /// be made on the store's commit queue).
    func handleHistory(_ request: DefaultsRequest) -> Outcome {
        switch request {
        case .history(let domain, let key, let limit, let atRevision, let before):
            .reply(history(domain, key, limit: limit, atRevision: atRevision, beforeRevision: before))
        case .blame(let domain, let key):
            .reply(blame(domain, key))
        case .forgetHistory(let domain, let key):
            .historyChange(domain, .forget(domain, key))
        case .keepHistory(let domain, let key, let keep):
            .historyChange(domain, .keep(domain, key, keep))
        default:
            preconditionFailure("\(request.call.method) is not a history request")
        }
    }

    /// The reply to `History`: newest first, at most `limit` entries, those older than
    /// `beforeRevision` if given, and as many as one reply carries (``historyReply(_:oldestRevision:paged:)``);
    /// with `atRevision`, the entries that made the domain's (or key's) state then; `keepsNone`
    /// when the domain (or key) is marked to keep no history. The first
    /// History of a domain since kvd started waits for its history file to be read (bounded
    /// by retention); later ones are served from memory.
    func history(_ domain: Domain, _ key: Key?, limit: Int64?, atRevision: Int64?, beforeRevision: Int64?)
        -> VarlinkReply
    {
        do throws(HistoryError) {
            let exclusions = store.historyExclusions
            let keepsNone = key.map { exclusions.excludes(domain, $0) } ?? exclusions.excludes(domain)
            if let atRevision {
                let entries = try store.history(domain, at: atRevision, key: key)
                return Self.historyReply(
                    entries, oldestRevision: try store.history(domain, limit: 0).oldestRevision, paged: false,
                    keepsNone: keepsNone)
            }
            let page = try store.history(
                domain, key: key, limit: limit.map { Int(clamping: $0) }, before: beforeRevision)
            return Self.historyReply(
                page.entries, oldestRevision: page.oldestRevision, paged: true, keepsNone: keepsNone)
        } catch {
            return Self.historyFailure(error)
        }
    }

    /// The reply carrying `entries` (newest first), encoded once, measured as it is written.
    /// Entries that would take it past one message are left out, from a revision on (a
    /// commit's entries are never split): `nextBeforeRevision` then says where the next page
    /// begins. A reply that cannot be cut so (`paged` false: a state at a revision; or the
    /// newest commit's entries alone do not fit) is `TooLarge` instead.
    static func historyReply(_ entries: [HistoryEntry], oldestRevision: Int64, paged: Bool, keepsNone: Bool = false)
        -> VarlinkReply
    {
        var out = Array(#"{"entries":["#.utf8)
        var next: Int64?
        var group: (revision: Int64, start: Int)?  // the entries of one revision begin at start
        var newest = true  // in the newest revision's entries
        for (index, entry) in entries.enumerated() {
            if entry.revision != group?.revision {
                newest = group == nil
                group = (entry.revision, out.count)
            }
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(entry, into: &out)
            guard out.count > Limits.domainBytes else { continue }
            guard paged, !newest else {
                return .failure(DefaultsInterface.Error.tooLarge, ["limit": .integer(Int64(Limits.messageBytes))])
            }
            out.removeSubrange(group!.start...)
            next = entry.revision + 1
            break
        }
        out.append(contentsOf: #"],"oldestRevision":"#.utf8)
        JSONWriter.writeInteger(oldestRevision, into: &out)
        if let next {
            out.append(contentsOf: #","nextBeforeRevision":"#.utf8)
            JSONWriter.writeInteger(next, into: &out)
        }
        if keepsNone { out.append(contentsOf: #","keepsNone":true"#.utf8) }
        out.append(UInt8(ascii: "}"))
        return VarlinkReply(encodedParameters: out)
    }

    /// Appends the `HistoryEntry` object of one entry.
    static func write(_ entry: HistoryEntry, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"revision":"#.utf8)
        JSONWriter.writeInteger(entry.revision, into: &out)
        if let time = entry.time {
            out.append(contentsOf: #","time":"#.utf8)
            RFC3339.writeMilliseconds(time, into: &out)
        }
        out.append(contentsOf: #","key":"#.utf8)
        JSONWriter.writeString(entry.key.name, into: &out)
        if let value = entry.value {
            out.append(contentsOf: #","value":"#.utf8)
            JSONWriter().write(value.typedJSON, into: &out)
        }
        if let writer = entry.writer {
            if let uid = writer.uid {  // as before writers: the user who made it
                out.append(contentsOf: #","uid":"#.utf8)
                JSONWriter.writeInteger(Int64(uid), into: &out)
            }
            out.append(contentsOf: #","writer":"#.utf8)
            writer.appendObject(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func historyFailure(_ error: HistoryError) -> VarlinkReply {
        switch error {
        case .truncated(let domain, let oldest):
            .failure(
                DefaultsInterface.Error.historyTruncated,
                ["domain": .string(domain.name), "oldestRevision": .integer(oldest)])
        case .future:
            .failure(ServiceInterface.Error.invalidParameter, ["parameter": .string("atRevision")])
        case .off, .failure:
            .failure(DefaultsInterface.Error.storageFailure, ["reason": .string(error.description)])
        }
    }
}
