import KVConnection
import KVProtocol
import KVValues

/// How kvctl prints values. Plain output is for people and `$(...)`; `--json` is typed JSON.
enum Format {
    /// A value as `get` prints it, without the final newline: a string as itself, an integer as
    /// digits, a real always with a '.' or an exponent, a bool as `true`/`false`, a date as RFC
    /// 3339 UTC, data as lowercase hex, an array or dictionary as indented typed JSON.
    static func plain(_ value: Value) -> String {
        switch value {
        case .data(let data): Hex.encode(data)
        case .array, .dictionary: JSONWriter(pretty: true).string(value.typedJSON)
        case .string, .integer, .real, .bool, .date: value.description  // as Value prints them
        }
    }

    /// A value as typed JSON: one line, or indented with sorted keys.
    static func json(_ value: Value, pretty: Bool = false) -> String {
        JSONWriter(pretty: pretty, sortKeys: true).string(value.typedJSON)
    }

    /// A domain's values as one typed JSON object (wrapped in `$dict` if a key starts with `$`).
    static func domain(_ values: [Key: Value], pretty: Bool) -> String {
        json(.dictionary(Dictionary(uniqueKeysWithValues: values.map { ($0.key.name, $0.value) })), pretty: pretty)
    }

    /// The lines `watch` prints for one event: `KEY = VALUE`, with ` (system)` or ` (locked)`
    /// after a value that is not the user's own, `KEY removed`, or `KEY removed (locked)` for a
    /// key locked without a value; with `json`, objects with `revision`, `key`, `value`, and
    /// `source` and `systemRevision` when not the user's.
    static func watchLines(_ event: WatchEvent, json asJSON: Bool) -> [String] {
        event.changes.sorted { $0.key < $1.key }.map { change in
            let source = change.value == nil && event.sources[change.key] != .locked ? nil : event.sources[change.key]
            let writer = event.writer.map { "  by " + $0.summary } ?? ""
            if asJSON {
                var members: [String: JSON] = ["revision": .integer(event.revision), "key": .string(change.key.name)]
                if let writer = event.writer { members["writer"] = writer.json }
                if let value = change.value { members["value"] = value.typedJSON }
                if event.initial { members["initial"] = .bool(true) }
                if let source { members["source"] = .string(source.rawValue) }
                if let system = event.systemRevision { members["systemRevision"] = .integer(system) }
                return JSONWriter(sortKeys: true).string(.object(members))
            }
            guard let value = change.value else {
                return "\(change.key.name) removed" + (source.map { " (\($0.rawValue))" } ?? "") + writer
            }
            return "\(change.key.name) = \(json(value))" + (source.map { " (\($0.rawValue))" } ?? "") + writer
        }
    }

    /// What `source` prints: where the value of `key` comes from, one line saying what the user
    /// can do about it (`lift`: who can lift a lock and how, as the system instance says); with
    /// `json`, `{"domain", "key", "source", "value"}`.
    static func source(
        _ source: ValueSource, _ value: Value, domain: Domain, key: Key, json asJSON: Bool, lift: String? = nil
    ) -> String {
        if asJSON {
            let members: [String: JSON] = [
                "domain": .string(domain.name), "key": .string(key.name), "source": .string(source.rawValue),
                "value": value.typedJSON,
            ]
            return JSONWriter(sortKeys: true).string(.object(members))
        }
        let (shownDomain, shownKey) = (ClientError.shellWord(domain.name), ClientError.shellWord(key.name))
        switch source {
        case .user: return "user: your own value"
        case .system:
            return
                "system: the machine's default (your own value would override it: kvctl set \(shownDomain) \(shownKey) ...)"
        case .locked:
            let lift =
                lift
                ?? "root or a member of the system instance's admin group can lift it; kvctl --system source \(shownDomain) \(shownKey) says where it comes from"
            return "locked: set by the system administrator and locked (\(lift))"
        }
    }

    /// What `source` prints for a key locked with no value: `{"domain", "key", "source":
    /// "locked"}` with `json`.
    static func lockedWithoutValue(domain: Domain, key: Key, json asJSON: Bool, lift: String) -> String {
        if asJSON {
            let members: [String: JSON] = [
                "domain": .string(domain.name), "key": .string(key.name),
                "source": .string(ValueSource.locked.rawValue),
            ]
            return JSONWriter(sortKeys: true).string(.object(members))
        }
        return "locked: no value is set, and the system administrator locked it (\(lift))"
    }

    /// What `locks` prints: `DOMAIN KEY` a line (only `KEY` for `locks DOMAIN`), keys escaped as
    /// ``names(_:json:)`` does; with `json`, an array of `{"domain", "key"}`.
    static func locks(_ locks: [LockedKey], ofOneDomain: Bool, json asJSON: Bool) -> String {
        if asJSON {
            let items = locks.map { lock -> JSON in
                var item: [String: JSON] = ["domain": .string(lock.domain.name), "key": .string(lock.key.name)]
                if let file = lock.file { item["file"] = .string(file) }
                return .object(item)
            }
            return JSONWriter(sortKeys: true).string(.array(items)) + "\n"
        }
        return locks.map { lock in
            let line = (ofOneDomain ? "" : lock.domain.name + " ") + lock.key.name
            return escapedLine(line + (lock.file.map { " (file \($0))" } ?? "")) + "\n"
        }.joined()
    }

    /// What `status` prints: a few `label: value` lines a person reads, or with `json` the
    /// reply's members.
    static func status(_ status: SystemStatus, json asJSON: Bool) -> String {
        if asJSON { return JSONWriter(sortKeys: true).string(.object(status.json)) + "\n" }
        var lines = ["system instance: revision \(status.revision), \(status.domains) domain(s)"]
        lines += dropInLines(status.dropIns)
        guard let fleet = status.fleet else {
            return (lines + ["fleet: none (started without --etcd)"]).map(escapedLine).joined(separator: "\n") + "\n"
        }
        lines.append(
            "fleet: \(fleet.phase) (etcd prefix \(fleet.prefix), domains \(fleet.domains.joined(separator: " ")))")
        lines.append("  etcd members: \(fleet.endpoints.joined(separator: ", "))")
        if let member = fleet.memberInUse { lines.append("  member in use: \(member)") }
        lines.append("  etcd revision: \(fleet.appliedRevision) applied, \(fleet.seenRevision) seen (lag \(fleet.lag))")
        lines.append("  listed again after compaction: \(fleet.relists) time(s)")
        lines.append("  last error: \(fleet.lastError ?? "none")")
        lines.append("  left out: " + (fleet.problemCount == 0 ? "nothing" : "\(fleet.problemCount) etcd key(s)"))
        lines += fleet.problems.map { "    " + $0 }
        if fleet.problemCount > fleet.problems.count {
            lines.append("    (\(fleet.problemCount - fleet.problems.count) more not shown)")
        }
        // Every line holds text from etcd or the daemon (keys, messages): escaped, one line each.
        return lines.map(escapedLine).joined(separator: "\n") + "\n"
    }

    /// The drop-in part of `status` and `reload`: the folder, the files applied, and each file
    /// that could not be read with why.
    static func dropInLines(_ dropIns: DropInStatus?) -> [String] {
        guard let dropIns else { return [] }
        var lines = [
            "drop-in files: \(dropIns.files.count) applied from \(dropIns.directory), generation \(dropIns.generation)"
        ]
        lines += dropIns.files.map { "  " + $0 }
        if !dropIns.problems.isEmpty { lines.append("  problems: \(dropIns.problems.count)") }
        lines += dropIns.problems.map { "    \($0.file): \($0.reason)" }
        if !dropIns.skipped.isEmpty { lines.append("  skipped (names not read): \(dropIns.skipped.count)") }
        lines += dropIns.skipped.map { "    " + $0 }
        return lines
    }

    /// What `--system reload` prints.
    static func reload(_ revision: Int64, _ dropIns: DropInStatus?, json asJSON: Bool) -> String {
        if asJSON {
            var members: [String: JSON] = ["revision": .integer(revision)]
            if let dropIns { members["dropIns"] = dropIns.json }
            return JSONWriter(sortKeys: true).string(.object(members)) + "\n"
        }
        return (["reloaded at revision \(revision)"] + dropInLines(dropIns)).map(escapedLine).joined(separator: "\n")
            + "\n"
    }

    /// What `--system source DOMAIN KEY` prints: the layer of the system value (and its file),
    /// and of the lock.
    static func systemSource(_ source: SystemSource, domain: Domain, key: Key, json asJSON: Bool) -> String {
        if asJSON {
            var members: [String: JSON] = ["domain": .string(domain.name), "key": .string(key.name)]
            for (name, value) in [
                ("value", source.value), ("file", source.file), ("lock", source.lock), ("lockFile", source.lockFile),
            ] {
                if let value { members[name] = .string(value) }
            }
            return JSONWriter(sortKeys: true).string(.object(members)) + "\n"
        }
        let value: String
        switch (source.value, source.file) {
        case ("admin"?, let file?): value = "value: admin (kvctl --system or etcd), over drop-in file \(file)"
        case ("admin"?, nil): value = "value: admin (kvctl --system or etcd)"
        case (_, let file?): value = "value: drop-in file \(file)"
        default: value = "value: none"
        }
        let lock: String
        switch (source.lock, source.lockFile) {
        case ("admin"?, _): lock = "lock: admin (kvctl --system lock)"
        case (_, let file?): lock = "lock: drop-in file \(file)"
        default: lock = "lock: none"
        }
        return [value, lock].map(escapedLine).joined(separator: "\n") + "\n"
    }

    /// A list of names: one a line, or a JSON array (exact), or with `null` each name as it is
    /// followed by a NUL (exact: a name never holds a NUL). A line is never ambiguous: a
    /// backslash and control characters are written escaped (`\\`, `\n`, `\t`, `\r`, `\x1b`).
    static func names(_ names: [String], json asJSON: Bool, null: Bool = false) -> String {
        if null { return names.map { $0 + "\u{0}" }.joined() }
        if asJSON { return JSONWriter().string(.array(names.map(JSON.string))) + "\n" }
        return names.map { escapedLine($0) + "\n" }.joined()
    }

    /// `name` with a backslash and each control character escaped, so that it fits on one line
    /// (``Swift/String/escapedForOneLine``, shared with kvd's log).
    static func escapedLine(_ name: String) -> String { name.escapedForOneLine }
}
