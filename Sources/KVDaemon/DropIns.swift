import KVValues

/// The system instance's drop-in files, as one combination: `defaults.d/NN-name.json` (typed
/// JSON, `{DOMAIN: {KEY: VALUE}}`, each domain's object as `kvctl export` writes it) and
/// `locks.d/NN-name` (one `DOMAIN KEY` or `DOMAIN *` a line; a key holding `*` is a glob).
///
/// Pure: ``combine(_:keeping:)`` takes what ``DropInReader`` read and gives the combination,
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

/// What one drop-in file holds once parsed.
enum DropInContent: Equatable, Sendable {
    case defaults([Domain: [Key: Value]])
    case locks([Domain: Set<Key>])
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
    /// Combines `files` (each folder's in name order, as ``DropInReader`` gives them); a file
    /// that fails uses its content in `previous` (the last good parse, by path), if any.
    /// Returns the combination and every good parse, by path, for the next call's `previous`.
    static func combine(_ files: [DropInFile], keeping previous: [String: DropInContent] = [:]) -> (
        DropIns, parsed: [String: DropInContent]
    ) {
        var result = DropIns()
        var parsed: [String: DropInContent] = [:]
        for file in files {
            let content: DropInContent
            switch file.bytes.flatMap({ bytes in Result { () throws(DropInReadError) in try parse(bytes, file.kind) } })
            {
            case .success(let fresh):
                content = fresh
                result.files.append(file.path)
            case .failure(let error):
                guard let kept = previous[file.path] else {
                    result.problems.append(Problem(file: file.path, reason: error.description))
                    continue
                }
                content = kept
                result.problems.append(
                    Problem(file: file.path, reason: "\(error.description) (its last good content still applies)"))
            }
            parsed[file.path] = content
            result.add(content, from: file.path)
        }
        return (result, parsed)
    }

    private mutating func add(_ content: DropInContent, from path: String) {
        switch content {
        case .defaults(let domains):
            for (domain, entries) in domains {
                values[domain, default: [:]].merge(entries) { $1 }
                for key in entries.keys { valueFiles[domain, default: [:]][key] = path }
            }
        case .locks(let domains):
            for (domain, keys) in domains {
                locks[domain, default: []].formUnion(keys)
                for key in keys where lockFiles[domain]?[key] == nil { lockFiles[domain, default: [:]][key] = path }
            }
        }
    }

    /// Parses one file's bytes.
    static func parse(_ bytes: [UInt8], _ kind: DropInFile.Kind) throws(DropInReadError) -> DropInContent {
        switch kind {
        case .defaults: .defaults(try parseDefaults(bytes))
        case .locks: .locks(try parseLocks(bytes))
        }
    }

    /// `{DOMAIN: {KEY: typed value}}`; a domain's object may be `{"$dict": {...}}`, as `kvctl
    /// export` writes a domain whose keys start with `$`.
    static func parseDefaults(_ bytes: [UInt8]) throws(DropInReadError) -> [Domain: [Key: Value]] {
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
    /// `DOMAIN *` the whole domain); blank lines and lines starting with `#` are skipped.
    static func parseLocks(_ bytes: [UInt8]) throws(DropInReadError) -> [Domain: Set<Key>] {
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
