import KVSystem

/// dconf's admin files in the drop-in layer (docs/drop-in-rules.md, "dconf's files"): each
/// profile `DCONF/profile/NAME` names system databases (``DconfSelection`` says which profile a
/// user gets, `user` by default), and each database `NAME` is read from
/// its keyfiles `DCONF/db/NAME.d/*` and lock files `DCONF/db/NAME.d/locks/*` as `dconf update`
/// would compile them (no compiled database is read, and none is needed). Trusted as kvd's own
/// files are (``DropInTrust``: `DCONF`, every folder on the way and every file); the profile
/// refused, unreadable or misspelt is one failure at `DCONF`, which keeps the last good content
/// of every dconf file (and, while no profile was read good since start, the databases it may
/// mean are read beside it).
extension DropInReader {
    /// dconf's files (keyfiles, then locks, database by database: the `user` profile's in its
    /// order, then the other profiles' others) and every profile's databases; one failure at
    /// `root` when it, a folder above it or a profile may not be read. With `guessing` (no
    /// profile read good since kvd started), a profile with a typo does not stop the reading:
    /// the databases it may mean are read (``DconfFiles/ProfileGuess``) beside the failure.
    func dconfFiles(
        in root: String, _ trust: DropInTrust, guessing: Bool, budget: inout Budget, skipped: inout [String]
    )
        -> (files: [DropInFile], profiles: [String: [String]]?)
    {
        func failure(_ error: DropInReadError) -> ([DropInFile], [String: [String]]?) {
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
        let profiles: [String: [String]]
        switch readProfiles(in: root, trust, budget: &budget) {
        case .success(let read): profiles = read
        case .failure(let error):
            guard guessing, let guess = error.guess else {
                return failure(.init(description: error.description + ": nothing in \(root) is read"))
            }
            let names = guess.everyDatabase ? databaseNames(in: root) : guess.databases
            let note = "no profile read good yet, so every user gets the databases it may mean"
            let failed = failure(
                .init(
                    description:
                        "\(error.description): \(note): \(names.isEmpty ? "none" : names.joined(separator: ", "))")
            ).0
            return (failed + databaseFiles(names, in: root, trust, budget: &budget, skipped: &skipped), nil)
        }
        var databases = profiles[DconfSelection.defaultProfile] ?? []
        for name in profiles.keys.sorted() { databases += profiles[name]!.filter { !databases.contains($0) } }
        return (databaseFiles(databases, in: root, trust, budget: &budget, skipped: &skipped), profiles)
    }

    /// Every profile's databases, or the first failure (with what every profile that failed
    /// may mean, merged, in ``DropInReadError/guess``).
    private func readProfiles(in root: String, _ trust: DropInTrust, budget: inout Budget) -> Result<
        [String: [String]], DropInReadError
    > {
        var profiles: [String: [String]] = [:]
        var failure: DropInReadError?
        var guess = DconfFiles.ProfileGuess()
        // No profile: dconf's default one, the user's database alone.
        let names = ((try? fileSystem.contentsOfDirectory(root + "/profile")) ?? []).filter { name in
            !Self.isQuiet(name)
                && (try? system.status(root + "/profile/" + name, followingLinks: true))?.kind != .directory
        }
        for name in names.sorted() {
            let profile = root + "/profile/" + name
            switch readProfile(profile, trust, limit: min(Self.maxFileBytes, budget.locks)) {
            case .failure(let error):
                failure = failure ?? .init(description: "the profile \(profile): \(error)")
                guess.everyDatabase = guess.everyDatabase || (error.guess?.everyDatabase ?? true)
                for database in error.guess?.databases ?? [] { guess.add(database) }
            case .success(let databases):
                profiles[name] = databases
                for database in databases { guess.add(database) }
            }
        }
        guard var failure else { return .success(profiles) }
        failure.guess = guess
        return .failure(failure)
    }

    /// The keyfiles and lock files of the databases `names`, in that order.
    private func databaseFiles(
        _ names: [String], in root: String, _ trust: DropInTrust, budget: inout Budget, skipped: inout [String]
    ) -> [DropInFile] {
        var files: [DropInFile] = []
        for name in names {
            let folder = root + "/db/" + name + ".d"
            files += self.files(in: folder, .dconfKeyfile, trust, budget: &budget, skipped: &skipped)
            files += self.files(in: folder + "/locks", .dconfLocks, trust, budget: &budget, skipped: &skipped)
        }
        return files
    }

    /// The name of every database in `DCONF/db` (each `NAME.d` folder), in name order.
    private func databaseNames(in root: String) -> [String] {
        let names = (try? fileSystem.contentsOfDirectory(root + "/db")) ?? []
        return names.filter { $0.hasSuffix(".d") && DconfFiles.isDatabaseName(String($0.dropLast(2))) }
            .map { String($0.dropLast(2)) }.sorted()
    }

    private func readProfile(_ path: String, _ trust: DropInTrust, limit: Int) -> Result<[String], DropInReadError> {
        let folder = String(path[..<path.lastIndex(of: "/")!])
        if let reason = pathRefusal(folder, isFolder: true, trust) ?? fileRefusal(path, trust) {
            return .failure(.init(description: reason))
        }
        return readFile(path, limit: limit, trust, kind: .dconfLocks).flatMap { bytes in
            Result { () throws(DropInReadError) in try DconfFiles.profile(bytes) }
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
