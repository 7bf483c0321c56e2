import KVProtocol
import KVStorage
import KVValues

/// `io.kvd.Defaults.Blame`: who set each current value, from history.
extension RequestHandler {
    /// The reply to `Blame`: for each key the domain holds now (only `key`, if given), sorted by
    /// name, the revision that set its value and, when history holds that change with its writer,
    /// when and who (``Writer``). A key whose change history does not hold (history off, the
    /// key or domain marked to keep none, a value older than history or than writer records,
    /// forgotten) has no `writer`: unknown. `keepsNone` as in `History`. TooLarge when the
    /// entries do not fit one reply (ask for one key). Blocks like `History` the first time a
    /// domain's history is read.
    func blame(_ domain: Domain, _ key: Key?) -> VarlinkReply {
        let snapshot = store.list(domain)
        var keys = snapshot.map { Array($0.revisions.keys) } ?? []
        if let key { keys = keys.filter { $0 == key } }
        guard !keys.isEmpty || key == nil, let snapshot else {
            return Self.notFound(domain, key)
        }
        let exclusions = store.historyExclusions
        let keepsNone = key.map { exclusions.excludes(domain, $0) } ?? exclusions.excludes(domain)
        var setters: [Key: HistoryEntry] = [:]
        if let entries = try? store.history(domain, at: store.revision, key: key) {
            for entry in entries where entry.revision == snapshot.revisions[entry.key] { setters[entry.key] = entry }
        }
        var out = Array(#"{"entries":["#.utf8)
        for (index, name) in keys.sorted().enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            Self.writeBlame(name, revision: snapshot.revisions[name] ?? 0, setter: setters[name], into: &out)
            guard out.count <= Limits.domainBytes else {
                return .failure(DefaultsInterface.Error.tooLarge, ["limit": .integer(Int64(Limits.messageBytes))])
            }
        }
        out.append(UInt8(ascii: "]"))
        if keepsNone { out.append(contentsOf: #","keepsNone":true"#.utf8) }
        out.append(UInt8(ascii: "}"))
        return VarlinkReply(encodedParameters: out)
    }

    /// Appends one `BlameEntry`: `{"key":K,"revision":R,"time":T,"writer":{...}}`, `time` and
    /// `writer` when history knows them.
    private static func writeBlame(_ key: Key, revision: Int64, setter: HistoryEntry?, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"key":"#.utf8)
        JSONWriter.writeString(key.name, into: &out)
        out.append(contentsOf: #","revision":"#.utf8)
        JSONWriter.writeInteger(revision, into: &out)
        if let time = setter?.time {
            out.append(contentsOf: #","time":"#.utf8)
            RFC3339.writeMilliseconds(time, into: &out)
        }
        if let writer = setter?.writer {
            out.append(contentsOf: #","writer":"#.utf8)
            writer.appendObject(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}
