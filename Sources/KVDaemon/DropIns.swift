import KVStorage
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

extension DropInContent {
    /// The content as ``KeptDropInsFile`` keeps it.
    var kept: KeptDropIn {
        KeptDropIn(
            values: values, locks: locks,
            audience: audience.map { DefaultsDocument.Audience(groups: $0.groups, users: $0.users) })
    }

    /// The content kept by ``KeptDropInsFile`` (its audience's ids looked up at the next read).
    init(_ kept: KeptDropIn) {
        self.init(values: kept.values, locks: kept.locks, audience: kept.audience.map(DropInAudience.init))
    }

    /// The content with its audience's names only (ids not yet looked up).
    var named: DropInContent {
        var copy = self
        if let audience { copy.audience = DropInAudience(groups: audience.groups, users: audience.users) }
        return copy
    }
}

/// Whom a drop-in file is for (its `"for"` member, or its `for` lines): the users named and
/// the members of the groups named. The ids are looked up at each read (``DropInSet/resolved(group:user:)``);
/// a name nobody has matches nobody.
struct DropInAudience: Equatable, Sendable {
    var groups: [String] = []
    var users: [String] = []
    var gids: Set<UInt32> = []
    var uids: Set<UInt32> = []

    init(groups: [String] = [], users: [String] = []) {
        self.groups = groups
        self.users = users
    }

    init(_ audience: DefaultsDocument.Audience) { self.init(groups: audience.groups, users: audience.users) }

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
    /// The dconf profile its mirror named (`DCONF_PROFILE`); nil: `user`.
    var dconfProfile: String? = nil
}

/// One file as ``DropInReader`` found it: its path, which folder, and its bytes or why not.
struct DropInFile: Equatable, Sendable {
    /// kvd's own `defaults.d` and `locks.d` files, and dconf's keyfiles and lock files
    /// (``DconfFiles``).
    enum Kind: Sendable, Equatable { case defaults, locks, dconfKeyfile, dconfLocks }
    var path: String
    var kind: Kind
    var bytes: Result<[UInt8], DropInReadError>
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
        var lockRanks: [Domain: [Key: Int]] = [:]
        for file in files {
            result.files.append(file.path)
            result.add(file.content, from: file.path) { domain, key in
                // dconf: a key locked in a database takes its value from that one or a later one.
                guard file.rank < 0, let locked = lockRanks[domain]?[key] else { return true }
                return file.rank <= locked
            }
            for (domain, keys) in file.content.locks where file.rank < 0 {
                for key in keys where lockRanks[domain]?[key] == nil {
                    lockRanks[domain, default: [:]][key] = file.rank
                }
            }
        }
        return result
    }

    private mutating func add(_ content: DropInContent, from path: String, taking: (Domain, Key) -> Bool) {
        for (domain, entries) in content.values {
            for (key, value) in entries where taking(domain, key) {
                values[domain, default: [:]][key] = value
                valueFiles[domain, default: [:]][key] = path
            }
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
            let document: DefaultsDocument
            do { document = try DefaultsDocument.parse(bytes) } catch {
                throw DropInReadError(description: error.description)
            }
            return DropInContent(
                values: document.values.filter { !$0.value.isEmpty },
                audience: document.audience.map(DropInAudience.init))
        case .locks:
            var audience: DropInAudience?
            let locks = try parseLocks(bytes, audience: &audience)
            return DropInContent(locks: locks, audience: audience)
        case .dconfKeyfile: return DropInContent(values: try DconfFiles.keyfile(bytes))
        case .dconfLocks: return DropInContent(locks: try DconfFiles.locks(bytes))
        }
    }

    /// One `DOMAIN KEY` a line (the key: the rest of the line, trimmed; `*` in it is a glob,
    /// `DOMAIN *` the whole domain); blank lines and lines starting with `#` are skipped, and a
    /// UTF-8 byte order mark at the start. A key holding a carriage return or ` #` (a comment
    /// at the end of the line) is an error. A line `for groups NAME...` or `for users NAME...`
    /// names whom the file is for (`audience`); a first word that is `for` in other letters
    /// (`For`, `FOR`) is a misspelt directive, an error, never a domain. An error names the
    /// line, never its text (see ``DefaultsDocument``).
    static func parseLocks(_ bytes: [UInt8], audience: inout DropInAudience?) throws(DropInReadError) -> [Domain:
        Set<Key>]
    {
        guard let text = String(validating: DefaultsDocument.withoutByteOrderMark(bytes), as: UTF8.self) else {
            throw DropInReadError(description: "not UTF-8 text")
        }
        var locks: [Domain: Set<Key>] = [:]
        for (index, rawLine) in text.split(
            omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        )
        .enumerated() {
            let line = rawLine.trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            let number = index + 1
            guard let space = line.firstIndex(where: { $0 == " " || $0 == "\t" }) else {
                throw DropInReadError(description: "line \(number): needs DOMAIN KEY (or DOMAIN *)")
            }
            let first = line[..<space]
            let rest = line[space...].trimmingWhitespace
            if first == "for" {
                try addAudience(rest, line: number, to: &audience)
                continue
            }
            if first.lowercased() == "for" {
                throw DropInReadError(
                    description: "line \(number): a misspelt directive: write for groups NAME... or for users NAME...")
            }
            guard let domain = try? Domain(validating: String(first)) else {
                throw DropInReadError(
                    description: "line \(number): not a valid domain name (A-Z a-z 0-9 . _ -, at most 255 bytes)")
            }
            guard let key = try? Key(validating: String(rest)) else {
                throw DropInReadError(description: "line \(number): not a valid key (too long, or holding NUL)")
            }
            try checkPlainKey(rest, line: number)
            locks[domain, default: []].insert(key)
        }
        return locks
    }

    /// Refuses a key that is surely a mistake: one holding a carriage return (a file with old
    /// Mac line ends is one line), ` #`/`\t#` (a comment at the end of a line: comments take
    /// a line of their own, or the lock would be on a key nobody uses), or a character that does
    /// not show (a control or format character, a space other than U+0020: a no-break space
    /// pasted from a web page would lock a key that only looks like the one meant).
    private static func checkPlainKey(_ key: Substring, line number: Int) throws(DropInReadError) {
        if key.contains("\r") {
            throw DropInReadError(description: "line \(number): a carriage return inside the line (end lines with LF)")
        }
        if key.contains(" #") || key.contains("\t#") {
            throw DropInReadError(
                description: "line \(number): a comment after the key (# starts a comment only at the start of a line)")
        }
        if let hidden = key.unicodeScalars.first(where: isInvisible) {
            let code = String(hidden.value, radix: 16, uppercase: true)
            throw DropInReadError(
                description:
                    "line \(number): the key holds an invisible character, U+\(String(repeating: "0", count: max(0, 4 - code.count)) + code) (it would lock another key than it shows)"
            )
        }
    }

    /// The words after `for` on line `number`: `groups NAME...` or `users NAME...`.
    private static func addAudience(_ words: Substring, line number: Int, to audience: inout DropInAudience?)
        throws(DropInReadError)
    {
        let words = words.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let kind = words.first, kind == "groups" || kind == "users", words.count > 1 else {
            throw DropInReadError(description: "line \(number): needs for groups NAME... or for users NAME...")
        }
        var found = audience ?? DropInAudience()
        if kind == "groups" { found.groups += words.dropFirst() } else { found.users += words.dropFirst() }
        audience = found
    }
}

/// Whether `scalar` does not show as itself: a control or format character, or a space, line
/// or paragraph separator other than the ASCII space.
func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.properties.generalCategory {
    case .control, .format, .lineSeparator, .paragraphSeparator: return true
    case .spaceSeparator: return scalar != " "
    default: return false
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
