import KVValues

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
    /// The names in the folders not read, as paths: in kvd's folders, neither hidden nor an
    /// editor's or a package manager's leftovers (``DropInReader/isQuiet(_:)``); in dconf's,
    /// every one not hidden (a leftover there is named: ``DropInReader/isQuietlySkipped(_:_:)``).
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
    /// it not read now, each in its place in path order. A dconf lock file's error carries the
    /// locks it surely means (``DropInReadError/partial``): they apply with its last good content.
    /// `rank` orders the files before their paths do (lowest first, so the highest wins: dconf's
    /// databases beneath kvd's own files, each in its place in the profile).
    static func read(
        _ files: [DropInFile], keeping previous: [String: DropInContent] = [:], rank: (String) -> Int = { _ in 0 }
    ) -> DropInSet {
        var set = DropInSet()
        let named = Set(files.map(\.path))
        for file in files {
            switch file.bytes.flatMap({ bytes in
                Result { () throws(DropInReadError) in try DropIns.parse(bytes, file.kind) }
            }) {
            case .success(let content):
                set.files.append(File(path: file.path, content: content))
            case .failure(let error):
                let folder = file.path.hasSuffix("/") ? file.path : file.path + "/"
                let kept = previous.filter {
                    $0.key == file.path || ($0.key.hasPrefix(folder) && !named.contains($0.key))
                }
                if error.onlyIfKept, kept.isEmpty, error.partial == nil { continue }
                set.keep(kept, of: file.path, with: error)
            }
        }
        for index in set.files.indices { set.files[index].rank = rank(set.files[index].path) }
        set.files.sort { left, right in
            left.rank != right.rank ? left.rank < right.rank : left.path.utf8.lexicographicallyPrecedes(right.path.utf8)
        }
        return set
    }

    /// Applies the last good content `kept` of what failed at `path` (with what its `error` says
    /// it surely means), and names the problem.
    private mutating func keep(_ kept: [String: DropInContent], of path: String, with error: DropInReadError) {
        var kept = kept
        var note = Self.keptNote(kept, path)
        if let partial = error.partial {
            let locks = partial.locks.values.reduce(0) { $0 + $1.count }
            note =
                kept[path] == nil
                ? " (never read good: the \(locks) lock(s) its lines surely name apply)"
                : " (its last good content still applies, with the \(locks) lock(s) its lines surely name)"
            var merged = kept[path] ?? DropInContent()
            merged.locks.merge(partial.locks) { $0.union($1) }
            kept[path] = merged
        }
        files += kept.sorted { $0.key < $1.key }.map { File(path: $0.key, content: $0.value) }
        problems.append(.init(file: path, reason: error.description + note))
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
            // No profile read good since start (it is bad, and kvd restarted): every file kept applies.
            if let dconf, let database = dconf.database(of: file.path) {
                return dconf.profiles.isEmpty || databases.contains(database)
            }
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
