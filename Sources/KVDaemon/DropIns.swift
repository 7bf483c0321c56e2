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
private func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
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

/// Every drop-in file read and parsed, in the order they combine, with the problems: the input
/// of each peer's combination. Pure.
struct DropInSet: Equatable, Sendable {
    struct File: Equatable, Sendable {
        var path: String
        var content: DropInContent
        /// Its place in the order (``read(_:keeping:rank:)``): below 0 for dconf's files.
        var rank = 0
    }

    var files: [File] = []
    var problems: [DropIns.Problem] = []
    /// The names in the folders not read, neither hidden nor an editor's or a package
    /// manager's leftovers (``DropInReader/isQuiet(_:)``), as paths.
    var skipped: [String] = []
    /// dconf's profiles: which of dconf's files each peer gets, in which order (nil: none read).
    var dconf: DconfSelection?

    static let empty = DropInSet()

    /// Each file's content by path (for the next read's `keeping`).
    var parsed: [String: DropInContent] {
        Dictionary(files.map { ($0.path, $0.content) }, uniquingKeysWith: { $1 })
    }

    /// Parses `files`; a file that fails uses its content in `previous` (the last good parse,
    /// by path), if any, and is named in ``problems`` either way. A failure at a folder (one
    /// refused whole, or the config folder) keeps the last good content of every file under
    /// it, each in its place in path order.
    /// `rank` orders the files before their paths do (lowest first, so the highest wins: dconf's
    /// databases beneath kvd's own files, each in its place in the profile).
    static func read(
        _ files: [DropInFile], keeping previous: [String: DropInContent] = [:], rank: (String) -> Int = { _ in 0 }
    ) -> DropInSet {
        var set = DropInSet()
        for file in files {
            switch file.bytes.flatMap({ bytes in
                Result { () throws(DropInReadError) in try DropIns.parse(bytes, file.kind) }
            }) {
            case .success(let content):
                set.files.append(File(path: file.path, content: content))
            case .failure(let error):
                let folder = file.path.hasSuffix("/") ? file.path : file.path + "/"
                let kept = previous.filter { $0.key == file.path || $0.key.hasPrefix(folder) }
                if error.onlyIfKept, kept.isEmpty { continue }
                set.files += kept.sorted { $0.key < $1.key }.map { File(path: $0.key, content: $0.value) }
                set.problems.append(.init(file: file.path, reason: error.description + Self.keptNote(kept, file.path)))
            }
        }
        for index in set.files.indices { set.files[index].rank = rank(set.files[index].path) }
        set.files.sort { left, right in
            left.rank != right.rank ? left.rank < right.rank : left.path.utf8.lexicographicallyPrecedes(right.path.utf8)
        }
        return set
    }

    private static func keptNote(_ kept: [String: DropInContent], _ path: String) -> String {
        if kept.isEmpty { return "" }
        if kept.count == 1, kept[path] != nil { return " (its last good content still applies)" }
        return " (the last good content of the \(kept.count) file(s) in it still applies)"
    }

    /// Looks up the ids of every audience's names (`group`, `user`: name to id, nil if none);
    /// a name nobody has is a problem of its file (the file still applies to the names found).
    func resolved(group: (String) -> UInt32?, user: (String) -> UInt32?) -> DropInSet {
        var copy = self
        for index in copy.files.indices {
            guard var audience = copy.files[index].content.audience else { continue }
            let gids = audience.groups.map { ($0, group($0)) }
            let uids = audience.users.map { ($0, user($0)) }
            audience.gids = Set(gids.compactMap(\.1))
            audience.uids = Set(uids.compactMap(\.1))
            copy.files[index].content.audience = audience
            let unknown =
                gids.filter { $0.1 == nil }.map { "no group \($0.0)" }
                + uids.filter { $0.1 == nil }.map { "no user \($0.0)" }
            guard !unknown.isEmpty else { continue }
            copy.problems.append(
                .init(
                    file: copy.files[index].path,
                    reason:
                        "\"for\" names \(unknown.joined(separator: ", ")) on this machine: the file reaches nobody by that name"
                ))
        }
        copy.problems.sort { $0.file.utf8.lexicographicallyPrecedes($1.file.utf8) }
        return copy
    }

    /// Which files apply to `peer` (nil: only those for everyone), as one flag per file.
    /// A dconf file applies to peers whose profile names its database; the flags end with
    /// the peer's profile's (``DconfSelection/flags(for:)``).
    func profile(of peer: DropInPeer?) -> [Bool] {
        let name = dconf?.profileName(for: peer)
        let databases = name.flatMap { dconf?.profiles[$0] } ?? []
        return files.map { file in
            if let database = dconf?.database(of: file.path) { return databases.contains(database) }
            return file.content.audience.map { audience in peer.map(audience.includes) ?? false } ?? true
        } + (dconf?.flags(for: name) ?? [])
    }

    /// The combination for `peer`: the files for everyone and those for it, in order.
    func combination(for peer: DropInPeer?) -> DropIns {
        combination(profile: profile(of: peer))
    }

    func combination(profile: [Bool]) -> DropIns {
        var chosen = zip(files, profile).filter(\.1).map(\.0)
        if let dconf, let name = dconf.profileName(in: profile.dropFirst(files.count)),
            name != DconfSelection.defaultProfile
        {
            for index in chosen.indices { chosen[index].rank = dconf.rank(chosen[index].path, profile: name) }
            chosen.sort {
                $0.rank != $1.rank ? $0.rank < $1.rank : $0.path.utf8.lexicographicallyPrecedes($1.path.utf8)
            }
        }
        var combined = DropIns.merge(chosen)
        combined.problems = problems
        return combined
    }
}
