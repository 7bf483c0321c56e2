import FoundationEssentials
import Glibc
import KVConnection
import KVProtocol
import KVSystem
import KVValues

extension Invocation {
    /// `history DOMAIN [KEY] [--limit N] [--json]`, `history --forget|--keep-none|--keep
    /// DOMAIN [KEY]` and `restore DOMAIN [KEY] --revision N` (flags anywhere after the command).
    static func parseHistoryCommand(_ name: String, _ reader: inout ArgumentReader) throws(UsageError) -> Command {
        let flags = try HistoryFlags(name, reader.remaining())
        var positional = ArgumentReader(flags.words)
        let domain = try positional.domain()
        let key = try positional.optionalKey()
        try positional.end()
        if let change = flags.change {
            guard flags.limit == nil, !flags.json else { throw UsageError("\(change) takes no --limit or --json") }
            return change == "--forget"
                ? .forgetHistory(domain, key) : .keepHistory(domain, key, keep: change == "--keep")
        }
        guard name == "restore" else { return .history(domain, key, limit: flags.limit, json: flags.json) }
        guard let revision = flags.revision else {
            throw UsageError(
                "restore needs --revision N: the revision to go back to (see: kvctl history \(domain.name))")
        }
        return .restore(domain, key, revision: revision)
    }
}

/// The flags of `history` or `restore` (`name`), which may come anywhere after the command, and
/// the words between them.
struct HistoryFlags {
    var words: [String] = []
    var limit: Int?
    var revision: Int64?
    var json = false
    /// `--forget`, `--keep-none` or `--keep`.
    var change: String?

    init(_ name: String, _ arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        while let word = rest.popFirst() {
            switch word {
            case "--forget", "--keep-none", "--keep":
                guard name == "history" else { throw UsageError("unknown option \(word) for \(name)") }
                guard change == nil || change == word else {
                    throw UsageError("history takes one of --forget, --keep-none and --keep")
                }
                change = word
            case "--limit" where name == "history":
                guard let text = rest.popFirst(), let number = Int(text), number > 0 else {
                    throw UsageError("--limit needs a whole number above 0")
                }
                limit = number
            case "--json" where name == "history": json = true
            case "--revision" where name == "restore":
                guard let text = rest.popFirst(), let number = Int64(text), number >= 0 else {
                    throw UsageError("--revision needs a revision number (see: kvctl history DOMAIN)")
                }
                revision = number
            default:
                guard !word.hasPrefix("--") else { throw UsageError("unknown option \(word) for \(name)") }
                words.append(word)
            }
        }
    }
}

extension Runner {
    /// `history`: a table for people (local time, revision, key, value, and the user on the
    /// system instance), or with --json an array of the `HistoryEntry` objects.
    func printHistory(_ domain: Domain, _ key: Key?, limit: Int?, json: Bool, on connection: Connection) throws {
        let result = Result { () throws(ClientError) in try connection.history(domain, key: key, limit: limit) }
        if case .failure(.permissionDenied) = result {
            throw Failure(
                "permission denied: only root and members of group kvd-admin may read the system instance's history (others read its current values: kvctl --system get)"
            )
        }
        let listing = try result.get()
        if json || options.json {
            console.out(HistoryTable.json(listing.entries) + "\n")
        } else if listing.entries.isEmpty {
            console.err(
                "kvctl: no history of \(domain.name)\(key.map { " \(ClientError.shellWord($0.name))" } ?? "") is kept\n"
            )
        } else {
            console.out(HistoryTable.table(listing.entries, users: options.system))
        }
        if listing.keepsNone, !(json || options.json) {
            let name = domain.name + (key.map { " " + ClientError.shellWord($0.name) } ?? "")
            console.err(
                "kvctl: \(name) is marked to keep no history (to keep it again: kvctl history --keep \(name))\n")
        }
    }

    /// `blame`: for each current key, who set its value (from history): a table for people
    /// (key, revision, local time, writer; `unknown` where history does not say), or with
    /// --json an array of the `BlameEntry` objects.
    func printBlame(_ domain: Domain, _ key: Key?, on connection: Connection) throws {
        let result = Result { () throws(ClientError) in try connection.blame(domain, key: key) }
        if case .failure(.permissionDenied) = result {
            throw Failure(
                "permission denied: only root and members of group kvd-admin may read who changed the system instance's values"
            )
        }
        let entries = try result.get()
        if options.json {
            console.out(HistoryTable.blameJSON(entries) + "\n")
            return
        }
        var rows = [["KEY", "REVISION", "TIME", "WRITER"]]
        for entry in entries {
            rows.append([
                Format.escapedLine(entry.key.name), String(entry.revision),
                entry.time.map(HistoryTable.localTime) ?? "-", entry.writer?.summary ?? "unknown",
            ])
        }
        console.out(HistoryTable.columns(rows))
    }

    /// `restore DOMAIN KEY --revision N`: the key's value then, written as a new change (or
    /// the key removed, if it had none). `restore DOMAIN --revision N`: the whole domain as it
    /// was then, in one Apply conditional on the domain not changing since kvctl read it.
    func restore(_ domain: Domain, _ key: Key?, revision: Int64, on connection: Connection) throws -> Int64? {
        let then = try connection.history(domain, at: revision, key: key)
        if let key {
            if let value = then.first?.value {
                // The user's own value, not a system default equal to it: that one is restored
                // as the user's own, so a later change of the default does not replace it.
                if let now = try? connection.getWithSource(domain, key), now.source == .user, now.value == value {
                    console.err(
                        "kvctl: \(domain.name) \(ClientError.shellWord(key.name)) is as it was after revision \(revision); nothing to restore\n"
                    )
                    return nil
                }
                return try connection.set(domain, key, value)
            }
            return try Self.optional { () throws(ClientError) in try connection.delete(domain, key) }
        }
        let wanted = Dictionary(uniqueKeysWithValues: then.compactMap { entry in entry.value.map { (entry.key, $0) } })
        let change: OwnLayerChange
        do {
            change = try makeOwnLayer(
                domain, hold: wanted, onlyChanged: true, retry: false, from: "revision \(revision)", on: connection)
        } catch ClientError.revisionMismatch {
            throw Failure(
                "\(domain.name) changed while kvctl restored it; nothing was restored: check it (kvctl history \(domain.name)) and run the restore again"
            )
        }
        if !change.locked.isEmpty {
            throw Failure(
                "restored \(domain.name) as it was after revision \(revision) but \(Self.lockedNote(change.locked, of: domain))"
            )
        }
        if change.revision == nil {
            console.err("kvctl: \(domain.name) is as it was after revision \(revision); nothing to restore\n")
        }
        return change.revision
    }

    /// The message for a `HistoryTruncated` error, or nil for any other.
    static func historyMessage(for error: ClientError, in command: Command) -> String? {
        guard case .historyTruncated(_, let oldest) = error else { return nil }
        guard case .restore(let domain, _, let revision) = command else {
            return "kvd keeps history from revision \(oldest) on"
        }
        return
            "revision \(revision) is older than the history kvd keeps of \(domain.name): the oldest revision it can restore is \(oldest) (see: kvctl history \(domain.name))"
    }
}

/// How `history` prints.
enum HistoryTable {
    /// `[{"revision": N, "time": T, "key": K, "value": V, "uid": U}, ...]`, newest first.
    static func json(_ entries: [HistoryRecord]) -> String {
        let items = entries.map { entry -> JSON in
            var members: [String: JSON] = ["revision": .integer(entry.revision), "key": .string(entry.key.name)]
            if let time = entry.time { members["time"] = .string(RFC3339.format(time)) }
            if let value = entry.value { members["value"] = value.typedJSON }
            if let uid = entry.uid { members["uid"] = .integer(Int64(uid)) }
            if let writer = entry.writer { members["writer"] = writer.json }
            return .object(members)
        }
        return JSONWriter(sortKeys: true).string(.array(items))
    }

    /// `[{"key": K, "revision": N, "time": T, "writer": {...}}, ...]`, by key.
    static func blameJSON(_ entries: [BlameRecord]) -> String {
        let items = entries.map { entry -> JSON in
            var members: [String: JSON] = ["revision": .integer(entry.revision), "key": .string(entry.key.name)]
            if let time = entry.time { members["time"] = .string(RFC3339.format(time)) }
            if let writer = entry.writer { members["writer"] = writer.json }
            return .object(members)
        }
        return JSONWriter(sortKeys: true).string(.array(items))
    }

    /// Columns TIME (local), REVISION, KEY, VALUE (compact typed JSON; "(removed)"), WRITER
    /// (``Writer/summary``; `unknown`) and USER (the system instance).
    static func table(_ entries: [HistoryRecord], users: Bool) -> String {
        var rows = [["TIME", "REVISION", "KEY", "VALUE", "WRITER"] + (users ? ["USER"] : [])]
        for entry in entries {
            let time = entry.time.map(localTime) ?? "(before history)"
            let value = entry.value.map { Format.json($0) } ?? "(removed)"
            let row = [time, String(entry.revision), Format.escapedLine(entry.key.name), value]
            rows.append(row + [entry.writer?.summary ?? "unknown"] + (users ? [entry.uid.map(userName) ?? "-"] : []))
        }
        return columns(rows)
    }

    /// `rows` as aligned columns (two spaces apart; the last column not padded).
    static func columns(_ rows: [[String]]) -> String {
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        let lines = rows.map { row -> String in
            var cells: [String] = []
            for (column, cell) in row.enumerated() {
                cells.append(column == row.count - 1 ? cell : cell.padding(to: widths[column]))
            }
            return cells.joined(separator: "  ")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `2026-11-30 17:04:05` in the local time zone.
    static func localTime(_ date: Date) -> String {
        let parts = Files.system.localTime(Int64(date.timeIntervalSince1970.rounded(.down)))
        func two(_ number: Int) -> String { number < 10 ? "0\(number)" : "\(number)" }
        return
            "\(parts.year)-\(two(parts.month))-\(two(parts.day)) \(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))"
    }

    /// The user name of `uid`, or the number when it has none.
    static func userName(_ uid: UInt32) -> String {
        Files.system.userName(ofUser: uid) ?? String(uid)
    }
}
