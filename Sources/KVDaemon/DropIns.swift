import KVValues

/// The system instance's drop-in files, as one combination: `defaults.d/NN-name.json` (typed
/// JSON, `{DOMAIN: {KEY: VALUE}}`, each domain's object as `kvctl export` writes it) and
/// `locks.d/NN-name` (one `DOMAIN KEY` or `DOMAIN *` a line; a key holding `*` is a glob). A
/// file may be for some users and groups only (``DropInAudience``): ``DropInSet`` holds every
/// file, and each peer's combination takes the files for everyone and those for it.
///
/// Pure: ``DropInSet/read(_:keeping:)`` takes what ``DropInReader`` read, and
/// ``DropInSet/combination(for:)`` gives one peer's combination,
/// with the file every value and lock came from. Files combine in name order (defaults and
/// locks apart), a later file's value winning; a file that cannot be read or parsed is named in
/// ``problems`` and keeps the content it had at the last good read (none if it never had one),
/// so one bad file never takes the others down, and a typo in a lock file never lifts its locks.
/// The combination is a layer of its own beneath what admins set through kvctl or etcd
/// (``DropInLayer``): neither overwrites the other.
struct DropIns: Equatable, Sendable {
    /// One domain's values from the files, each with the file it came from.
    var values: [Domain: [Key: Value]] = [:]
    var valueFiles: [Domain: [Key: String]] = [:]
    /// One domain's locked keys (a key holding `*` is a glob), each with its file.
    var locks: [Domain: Set<Key>] = [:]
    var lockFiles: [Domain: [Key: String]] = [:]
    /// The files applied, in the order they combined (paths).
    var files: [String] = []
    /// The files that could not be read or parsed, with why, in name order.
    var problems: [Problem] = []

    struct Problem: Equatable, Sendable {
        var file: String
        var reason: String
    }

    static let empty = DropIns()

    /// Whether the files hold no value and no lock.
    var isEmpty: Bool { values.isEmpty && locks.isEmpty }

    /// What users are given: the values and locks (not which file, nor the problems).
    func sameLayer(as other: DropIns) -> Bool { values == other.values && locks == other.locks }

    /// Every domain with a value or a lock from the files.
    var domains: Set<Domain> { Set(values.keys).union(locks.keys) }

    /// The file whose lock covers `key` of `domain` (the first in name order), if one does.
    func lockFile(_ domain: Domain, _ key: Key) -> String? {
        guard let locks = locks[domain] else { return nil }
        if locks.contains(key) { return lockFiles[domain]?[key] }
        for pattern in locks.sorted() where LockPattern.matches(pattern, key) { return lockFiles[domain]?[pattern] }
        return nil
    }
}

/// What one drop-in file holds once parsed: values (a `defaults.d` file) or locks (a
/// `locks.d` file), and whom it is for (nil: everyone).
struct DropInContent: Equatable, Sendable {
    var values: [Domain: [Key: Value]] = [:]
    var locks: [Domain: Set<Key>] = [:]
    var audience: DropInAudience?
}

/// Whom a drop-in file is for (its `"for"` member, or its `for` lines): the users named and
/// the members of the groups named. The ids are looked up at each read (``DropInSet/resolved(group:user:)``);
/// a name nobody has matches nobody.
struct DropInAudience: Equatable, Sendable {
    var groups: [String] = []
    var users: [String] = []
    var gids: Set<UInt32> = []
    var uids: Set<UInt32> = []

    /// Whether `peer` is one of the users or in one of the groups.
    func includes(_ peer: DropInPeer) -> Bool {
        uids.contains(peer.uid) || !gids.isDisjoint(with: peer.gids)
    }
}

/// Who a mirror belongs to, as the kernel said when it connected (`SO_PEERCRED`,
/// `SO_PEERGROUPS`): its uid and every group it is in.
struct DropInPeer: Hashable, Sendable {
    var uid: UInt32
    var gids: Set<UInt32>
}

/// One file as ``DropInReader`` found it: its path, which folder, and its bytes or why not.
struct DropInFile: Equatable, Sendable {
    enum Kind: Sendable, Equatable { case defaults, locks }
    var path: String
    var kind: Kind
    var bytes: Result<[UInt8], DropInReadError>
}

/// Why a drop-in file was not read, in one line.
struct DropInReadError: Error, Equatable, Sendable, CustomStringConvertible {
    var description: String
}

extension DropIns {
    /// Combines `files` (each folder's in name order, as ``DropInReader`` gives them) for
    /// everyone (files with a `for` left out); see ``DropInSet`` for the rest.
    static func combine(_ files: [DropInFile], keeping previous: [String: DropInContent] = [:]) -> (
        DropIns, parsed: [String: DropInContent]
    ) {
        let set = DropInSet.read(files, keeping: previous)
        return (set.combination(for: nil), set.parsed)
    }

    /// The combination of `files` (path and content, in order), later winning.
    static func merge(_ files: [DropInSet.File]) -> DropIns {
        var result = DropIns()
        for file in files {
            result.files.append(file.path)
            result.add(file.content, from: file.path)
        }
        return result
    }

    private mutating func add(_ content: DropInContent, from path: String) {
        for (domain, entries) in content.values {
            values[domain, default: [:]].merge(entries) { $1 }
            for key in entries.keys { valueFiles[domain, default: [:]][key] = path }
        }
        for (domain, keys) in content.locks {
            locks[domain, default: []].formUnion(keys)
            for key in keys where lockFiles[domain]?[key] == nil { lockFiles[domain, default: [:]][key] = path }
        }
    }

    /// Parses one file's bytes.
    static func parse(_ bytes: [UInt8], _ kind: DropInFile.Kind) throws(DropInReadError) -> DropInContent {
        switch kind {
        case .defaults:
            var audience: DropInAudience?
            let values = try parseDefaults(bytes, audience: &audience)
            return DropInContent(values: values, audience: audience)
        case .locks:
            var audience: DropInAudience?
            let locks = try parseLocks(bytes, audience: &audience)
            return DropInContent(locks: locks, audience: audience)
        }
    }

    /// The `"for"` member: `{"groups": [NAME, ...], "users": [NAME, ...]}`.
    static func parseAudience(_ json: JSON) throws(DropInReadError) -> DropInAudience {
        guard case .object(let members) = json, !members.isEmpty,
            members.keys.allSatisfy({ $0 == "groups" || $0 == "users" })
        else {
            throw DropInReadError(description: #""for" must be {"groups": [NAME, ...], "users": [NAME, ...]}"#)
        }
        func names(_ member: String) throws(DropInReadError) -> [String] {
            guard let value = members[member] else { return [] }
            guard case .array(let items) = value else {
                throw DropInReadError(description: #""for" "\#(member)" must be an array of names"#)
            }
            var names: [String] = []
            for item in items {
                guard case .string(let name) = item, !name.isEmpty else {
                    throw DropInReadError(description: #""for" "\#(member)" must be an array of names"#)
                }
                names.append(name)
            }
            return names
        }
        return DropInAudience(groups: try names("groups"), users: try names("users"))
    }

    /// `{DOMAIN: {KEY: typed value}}`; a domain's object may be `{"$dict": {...}}`, as `kvctl
    /// export` writes a domain whose keys start with `$`. The member `"for"` is not a domain:
    /// it names whom the file is for (`audience`).
    static func parseDefaults(_ bytes: [UInt8], audience: inout DropInAudience?) throws(DropInReadError) -> [Domain:
        [Key: Value]]
    {
        let json: JSON
        do {
            json = try JSONParser.parse(bytes, limits: JSONLimits(framingDepth: 3, maxBytes: Int.max))
        } catch {
            throw DropInReadError(description: "not JSON: \(error)")
        }
        guard case .object(let members) = json else {
            throw DropInReadError(description: "not a JSON object of DOMAIN: {KEY: VALUE}")
        }
        var domains: [Domain: [Key: Value]] = [:]
        for (name, member) in members.sorted(by: { $0.key < $1.key }) {
            if name == "for" {
                audience = try parseAudience(member)
                continue
            }
            let domain: Domain
            do { domain = try Domain(validating: name) } catch {
                throw DropInReadError(description: "\(error)")
            }
            guard case .object(var entries) = member else {
                throw DropInReadError(description: "domain \"\(name)\" must hold a JSON object of KEY: VALUE")
            }
            if entries.count == 1, case .object(let wrapped)? = entries["$dict"] { entries = wrapped }
            var values: [Key: Value] = [:]
            for (keyName, entry) in entries.sorted(by: { $0.key < $1.key }) {
                do {
                    let value = try Value(typedJSON: entry)
                    try value.validate()
                    values[try Key(validating: keyName)] = value
                } catch {
                    throw DropInReadError(description: "\(name) \"\(keyName)\": \(error)")
                }
            }
            if !values.isEmpty { domains[domain] = values }
        }
        return domains
    }

    /// One `DOMAIN KEY` a line (the key: the rest of the line, trimmed; `*` in it is a glob,
    /// `DOMAIN *` the whole domain); blank lines and lines starting with `#` are skipped. A line
    /// `for groups NAME...` or `for users NAME...` names whom the file is for (`audience`).
    static func parseLocks(_ bytes: [UInt8], audience: inout DropInAudience?) throws(DropInReadError) -> [Domain:
        Set<Key>]
    {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw DropInReadError(description: "not UTF-8 text")
        }
        var locks: [Domain: Set<Key>] = [:]
        for (index, rawLine) in text.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        .enumerated() {
            let line = rawLine.trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let space = line.firstIndex(where: { $0 == " " || $0 == "\t" }) else {
                throw DropInReadError(description: "line \(index + 1): needs DOMAIN KEY (or DOMAIN *)")
            }
            let key = line[space...].trimmingWhitespace
            if line[..<space] == "for" {
                let words = key.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                guard let kind = words.first, kind == "groups" || kind == "users", words.count > 1 else {
                    throw DropInReadError(
                        description: "line \(index + 1): needs for groups NAME... or for users NAME...")
                }
                var found = audience ?? DropInAudience()
                if kind == "groups" { found.groups += words.dropFirst() } else { found.users += words.dropFirst() }
                audience = found
                continue
            }
            do {
                locks[try Domain(validating: String(line[..<space])), default: []].insert(
                    try Key(validating: String(key)))
            } catch {
                throw DropInReadError(description: "line \(index + 1): \(error)")
            }
        }
        return locks
    }
}

extension Substring {
    fileprivate var trimmingWhitespace: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let start = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        let end = lastIndex(where: { !isSpace($0) })!
        return self[start...end]
    }
}

/// Locks by pattern: a locked key holding `*` locks every key it matches, `*` standing for any
/// run of characters (none too); `*` alone locks the whole domain. Any key matches itself.
enum LockPattern {
    /// Whether the lock `pattern` covers `key`.
    static func matches(_ pattern: Key, _ key: Key) -> Bool {
        if pattern == key { return true }
        let parts = pattern.name.split(separator: "*", omittingEmptySubsequences: false)
        guard parts.count > 1 else { return false }
        var rest = Substring(key.name)
        guard rest.hasPrefix(parts[0]) else { return false }
        rest = rest.dropFirst(parts[0].count)
        for part in parts.dropFirst().dropLast() {
            guard let range = rest.firstRange(of: part) else { return false }
            rest = rest[range.upperBound...]
        }
        let last = parts[parts.count - 1]
        return rest.count >= last.count && rest.hasSuffix(last)
    }

    static func isPattern(_ key: Key) -> Bool { key.name.contains("*") }
}

/// Every drop-in file read and parsed, in the order they combine, with the problems: the input
/// of each peer's combination. Pure.
struct DropInSet: Equatable, Sendable {
    struct File: Equatable, Sendable {
        var path: String
        var content: DropInContent
    }

    var files: [File] = []
    var problems: [DropIns.Problem] = []

    static let empty = DropInSet()

    /// Each file's content by path (for the next read's `keeping`).
    var parsed: [String: DropInContent] {
        Dictionary(files.map { ($0.path, $0.content) }, uniquingKeysWith: { $1 })
    }

    /// Parses `files`; a file that fails uses its content in `previous` (the last good parse,
    /// by path), if any, and is named in ``problems`` either way.
    static func read(_ files: [DropInFile], keeping previous: [String: DropInContent] = [:]) -> DropInSet {
        var set = DropInSet()
        for file in files {
            switch file.bytes.flatMap({ bytes in
                Result { () throws(DropInReadError) in try DropIns.parse(bytes, file.kind) }
            }) {
            case .success(let content):
                set.files.append(File(path: file.path, content: content))
            case .failure(let error):
                guard let kept = previous[file.path] else {
                    set.problems.append(.init(file: file.path, reason: error.description))
                    continue
                }
                set.files.append(File(path: file.path, content: kept))
                set.problems.append(
                    .init(file: file.path, reason: "\(error.description) (its last good content still applies)"))
            }
        }
        return set
    }

    /// Looks up the ids of every audience's names (`group`, `user`: name to id, nil if none).
    func resolved(group: (String) -> UInt32?, user: (String) -> UInt32?) -> DropInSet {
        var copy = self
        for index in copy.files.indices {
            guard var audience = copy.files[index].content.audience else { continue }
            audience.gids = Set(audience.groups.compactMap(group))
            audience.uids = Set(audience.users.compactMap(user))
            copy.files[index].content.audience = audience
        }
        return copy
    }

    /// Which files apply to `peer` (nil: only those for everyone), as one flag per file.
    func profile(of peer: DropInPeer?) -> [Bool] {
        files.map { file in file.content.audience.map { audience in peer.map(audience.includes) ?? false } ?? true }
    }

    /// The combination for `peer`: the files for everyone and those for it, in order.
    func combination(for peer: DropInPeer?) -> DropIns {
        combination(profile: profile(of: peer))
    }

    func combination(profile: [Bool]) -> DropIns {
        var combined = DropIns.merge(zip(files, profile).filter(\.1).map(\.0))
        combined.problems = problems
        return combined
    }
}
