import KVSystem

/// dconf's admin files in the drop-in layer (docs/drop-in-rules.md, "dconf's files"): the
/// profile `DCONF/profile/user` names the system databases, and each database `NAME` is read from
/// its keyfiles `DCONF/db/NAME.d/*` and lock files `DCONF/db/NAME.d/locks/*` as `dconf update`
/// would compile them (no compiled database is read, and none is needed). Trusted as kvd's own
/// files are (``DropInTrust``: `DCONF`, every folder on the way and every file); the profile
/// refused, unreadable or misspelt is one failure at `DCONF`, which keeps the last good content
/// of every dconf file.
extension DropInReader {
    var dconfProfile: String? { dconfDirectory.map { $0 + "/profile/user" } }

    /// dconf's files (keyfiles, then locks, database by database in the profile's order) and the
    /// profile's databases; one failure at `root` when it, a folder above it or its profile may
    /// not be read.
    func dconfFiles(in root: String, _ trust: DropInTrust, budget: inout Int, skipped: inout [String]) -> (
        files: [DropInFile], databases: [String]?
    ) {
        func failure(_ error: DropInReadError) -> ([DropInFile], [String]?) {
            ([DropInFile(path: root, kind: .dconfKeyfile, bytes: .failure(error))], nil)
        }
        if let reason = pathRefusal(root, isFolder: true, trust) {
            return failure(.init(description: "\(reason): nothing in \(root) is read"))
        }
        if case .failure(let error) = Result(catching: { () throws(Errno) in
            try system.status(root, followingLinks: true)
        }), error == .noSuchFileOrDirectory {
            return failure(.missingFolder)
        }
        let profile = root + "/profile/user"
        // No profile: dconf's default one, the user's database alone.
        guard (try? system.status(profile, followingLinks: false)) != nil else { return ([], []) }
        let databases: [String]
        switch readProfile(profile, trust, limit: min(Self.maxFileBytes, budget)) {
        case .failure(let error):
            return failure(.init(description: "the profile \(profile): \(error): nothing in \(root) is read"))
        case .success(let names): databases = names
        }
        var files: [DropInFile] = []
        for name in databases {
            let folder = root + "/db/" + name + ".d"
            files += self.files(in: folder, .dconfKeyfile, trust, budget: &budget, skipped: &skipped)
            files += self.files(in: folder + "/locks", .dconfLocks, trust, budget: &budget, skipped: &skipped)
        }
        return (files, databases)
    }

    private func readProfile(_ path: String, _ trust: DropInTrust, limit: Int) -> Result<[String], DropInReadError> {
        let folder = String(path.dropLast("/user".count))
        if let reason = pathRefusal(folder, isFolder: true, trust) ?? fileRefusal(path, trust) {
            return .failure(.init(description: reason))
        }
        return readFile(path, limit: limit, trust).flatMap { bytes in
            Result { () throws(DropInReadError) in try DconfFiles.profile(bytes) }
        }
    }

    /// The order of files in the combination (``DropInSet/read(_:keeping:rank:)``): dconf's
    /// beneath kvd's own, and of dconf's, each database beneath those named before it in the
    /// profile (`databases`), as dconf lets an earlier database win.
    func dconfRank(_ databases: [String]) -> (String) -> Int {
        guard let root = dconfDirectory else { return { _ in 0 } }
        let prefix = root + "/db/"
        return { path in
            guard path.hasPrefix(root + "/") || path == root else { return 0 }
            guard path.hasPrefix(prefix) else { return -1 - databases.count }
            let folder = path.dropFirst(prefix.count).prefix { $0 != "/" }
            guard folder.hasSuffix(".d"), let index = databases.firstIndex(of: String(folder.dropLast(2))) else {
                return -1 - databases.count
            }
            return -1 - index
        }
    }

    /// The folders a watch on dconf's files covers: `DCONF`, its `profile` and `db` folders, and
    /// every `db/NAME.d` and its `locks` (those that exist now).
    func dconfFolders() -> [String] {
        guard let root = dconfDirectory else { return [] }
        var folders = [root, root + "/profile", root + "/db"]
        let names = (try? fileSystem.contentsOfDirectory(root + "/db")) ?? []
        for name in names.sorted() where name.hasSuffix(".d") {
            folders += [root + "/db/" + name, root + "/db/" + name + "/locks"]
        }
        return folders
    }
}
