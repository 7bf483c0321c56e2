import Glibc
import KVStorage
import KVSystem

/// Reads the drop-in folders of a system instance, `DIR/defaults.d` and `DIR/locks.d` (`DIR`:
/// `--config-dir`, default `$KVD_CONFIG_DIR`, else `/etc/kvd`), through the ``FileSystem`` seam.
/// The rules are stated once, for admins, in `docs/drop-in-rules.md`; in short:
///
/// - Names: in `locks.d`, `NAME`; in `defaults.d`, `NAME.json`; NAME made of `A-Z a-z 0-9 _ -`
///   only, and neither of digits only nor of capital letters only. Every other name is
///   skipped: hidden names, editor backups and package-manager leftovers (``isQuiet(_:)``)
///   silently, the rest listed as skipped in status.
///   Each folder's files are taken in name order (byte order).
/// - Trust (``DropInTrust``): `DIR`, both folders, every file (a link: what it leads to,
///   checked on the opened descriptor) and every folder that decides what they name (those on
///   the way, and on the way to what each symbolic link leads to: ``DropInPath``) must belong
///   to root, kvd's user or a member of the admin group, be writable by no one else than the
///   owner, root's group and the admin group, and carry no access control list; every link on
///   the way must belong to one of those owners. A folder refused is not read at all, `DIR` or one above it refused
///   means nothing is: one problem says why, and ``DropInSet`` keeps the last good content of
///   what it holds (of a refused file, its own).
/// - Bounds: at most ``maxFiles`` files a folder, ``maxFileBytes`` a file and ``maxTotalBytes``
///   for the files of values and as much for the lock files and profiles (``Budget``: values
///   never crowd out a lock); a file past a bound is a problem, not read. Anything but a regular file is a
///   problem. A missing folder (`DIR` or one of the two) keeps the last good content of what
///   it held (``DropInReadError/missingFolder``; no problem when it held nothing).
///
/// Blocks on the reads (local files, bounded); called on the loop thread at start and reload.
struct DropInReader {
    static let maxFileBytes = 4 << 20
    static let maxTotalBytes = 32 << 20
    static let maxFiles = 1000
    /// The most skipped names listed (in status).
    static let maxSkipped = 100
    /// The bytes the files of values may hold together, and the lock files (tests lower it).
    var totalBytes = Self.maxTotalBytes

    /// What is left of the bytes the files may hold: the files of values (`defaults.d`, dconf's
    /// keyfiles) and those that lock or choose the databases (`locks.d`, dconf's lock files and
    /// profiles) apart, so that no amount of values leaves a lock file unread.
    struct Budget {
        var values: Int
        var locks: Int

        /// What is left for files of `kind`.
        subscript(kind: DropInFile.Kind) -> Int {
            get { kind == .locks || kind == .dconfLocks ? locks : values }
            set { if kind == .locks || kind == .dconfLocks { locks = newValue } else { values = newValue } }
        }
    }

    let directory: String
    let fileSystem: any FileSystem
    let system: any SystemCalls
    /// The group whose members administer the instance (`--admin-group`): it may write.
    var adminGroup = "kvd-admin"

    var defaultsFolder: String { directory + "/defaults.d" }
    var locksFolder: String { directory + "/locks.d" }

    /// dconf's folder (`--dconf-dir`, default `/etc/dconf`): its profile, databases and locks
    /// are read too (``DconfFiles``, `DropInReader+Dconf.swift`); nil: not read.
    var dconfDirectory: String?

    /// What one read found: the files to combine, the names skipped (not the quiet ones), and
    /// the system databases of each of dconf's profiles in its order (nil when they could not
    /// be read).
    struct Found: Equatable, Sendable {
        var files: [DropInFile] = []
        var skipped: [String] = []
        var profiles: [String: [String]]?
    }

    /// Every file to combine: `defaults.d`'s, then `locks.d`'s, each in name order, then
    /// dconf's; or, when `DIR` (or dconf's folder) or a folder above it may not be trusted, one
    /// failure at that folder. `guessingDatabases`: no dconf profile was read good since kvd
    /// started, so a profile's typo reads the databases it may mean (``dconfFiles(in:_:guessing:budget:skipped:)``).
    func read(guessingDatabases: Bool = false) -> Found {
        let admins = system.groupID(named: adminGroup)
        var trust = DropInTrust(owners: [0, system.userID], adminGroupID: admins, adminGroup: adminGroup)
        if let admins { trust.isAdmin = { [system] in system.groups(ofUser: $0).contains(admins) } }
        var budget = Budget(values: totalBytes, locks: totalBytes)
        var found = Found()
        found.files = ownFiles(trust, budget: &budget, skipped: &found.skipped)
        if let dconfDirectory {
            let dconf = dconfFiles(
                in: dconfDirectory, trust, guessing: guessingDatabases, budget: &budget, skipped: &found.skipped)
            found.files += dconf.files
            found.profiles = dconf.profiles
        }
        return found
    }

    /// The files of `DIR`'s two folders.
    private func ownFiles(_ trust: DropInTrust, budget: inout Budget, skipped: inout [String]) -> [DropInFile] {
        if let (path, reason) = configRefusal(trust) {
            return [DropInFile(path: path, kind: .defaults, bytes: .failure(.init(description: reason)))]
        }
        if case .failure(let error) = Result(catching: { () throws(Errno) in
            try system.status(directory, followingLinks: true)
        }),
            error == .noSuchFileOrDirectory
        {
            return [DropInFile(path: directory, kind: .defaults, bytes: .failure(.missingFolder))]
        }
        return files(in: defaultsFolder, .defaults, trust, budget: &budget, skipped: &skipped)
            + files(in: locksFolder, .locks, trust, budget: &budget, skipped: &skipped)
    }

    /// Why `DIR` may not be trusted, with the words of ``pathRefusal(_:isFolder:_:)``; nil when
    /// it may, or when it is missing (then there is nothing to read).
    private func configRefusal(_ trust: DropInTrust) -> (String, String)? {
        pathRefusal(directory, isFolder: true, trust).map { (directory, "\($0): nothing in \(directory) is read") }
    }

    /// Why `path` may not be trusted, or nil: a folder that decides what it names (every folder
    /// on the way to it and to what each link on the way leads to: ``DropInPath``) that
    /// ``DropInTrust`` refuses (one others may write is accepted only when sticky, and not as
    /// the folder `path` itself names when `isFolder`), or that, as the file or folder it names,
    /// carries an access control list (which may grant what the mode does not show); or a
    /// symbolic link on the way whose owner is not trusted. Nil too when a folder on the way is
    /// missing.
    func pathRefusal(_ path: String, isFolder: Bool, _ trust: DropInTrust) -> String? {
        let walk: DropInPath.Walk
        do { walk = try DropInPath(system: system).walk(path) } catch {
            return "more than \(DropInPath.maxLinks) symbolic links on the way to it"
        }
        for link in walk.links {
            guard let status = try? system.status(link, followingLinks: false) else { return nil }
            let subject = link == path ? "it (a symbolic link)" : "the symbolic link \(link) on the way to it"
            if let reason = trust.ownerRefusal(of: status, subject: subject) { return reason }
        }
        var folders = walk.folders
        if isFolder, !folders.contains(walk.resolved) { folders.append(walk.resolved) }
        for folder in folders + (isFolder ? [] : [walk.resolved]) {
            let named = folder == walk.resolved
            let subject =
                named
                ? (walk.resolved == path ? "it" : "\(walk.resolved), where it leads,")
                : "the folder \(folder) on the way to it"
            if system.hasAccessControlList(folder) { return Self.listRefusal(subject) }
            guard !named || isFolder else { continue }  // a file is judged on its opened descriptor
            guard let status = try? system.status(folder, followingLinks: false) else { return nil }
            if let reason = trust.refusal(of: status, subject: subject, stickyAllowed: !named) { return reason }
        }
        return nil
    }

    /// Why the file at `path`, in a folder ``pathRefusal(_:isFolder:_:)`` trusted, may not be
    /// trusted, or nil: a plain file (not a link) is decided by that folder, so only its own
    /// access control list is asked; a link is walked as any path.
    func fileRefusal(_ path: String, _ trust: DropInTrust) -> String? {
        guard let status = try? system.status(path, followingLinks: false), status.kind != .symbolicLink else {
            return pathRefusal(path, isFolder: false, trust)
        }
        return system.hasAccessControlList(path) ? Self.listRefusal("it") : nil
    }

    private static func listRefusal(_ subject: String) -> String {
        "\(subject) has an access control list (getfacl shows it), which may let others write it"
    }

    func files(
        in folder: String, _ kind: DropInFile.Kind, _ trust: DropInTrust, budget: inout Budget, skipped: inout [String]
    ) -> [DropInFile] {
        if let reason = pathRefusal(folder, isFolder: true, trust) {
            return [DropInFile(path: folder, kind: kind, bytes: .failure(.init(description: "\(reason): not read")))]
        }
        let names: [String]
        do { names = try fileSystem.contentsOfDirectory(folder) } catch {
            if error.code == ENOENT { return [DropInFile(path: folder, kind: kind, bytes: .failure(.missingFolder))] }
            return [DropInFile(path: folder, kind: kind, bytes: .failure(.init(description: "\(error)")))]
        }
        let sorted = names.sorted { Array($0.utf8).lexicographicallyPrecedes($1.utf8) }
        let wanted = sorted.filter { Self.isRead($0, kind) }
        for name in sorted
        where !Self.isRead(name, kind) && !Self.isQuietlySkipped(name, kind)
            && !(kind == .dconfKeyfile && name == "locks") && skipped.count < Self.maxSkipped
        {
            skipped.append(folder + "/" + name)
        }
        var found: [DropInFile] = []
        for (index, name) in wanted.enumerated() {
            let path = folder + "/" + name
            guard index < Self.maxFiles else {
                found.append(
                    DropInFile(
                        path: path, kind: kind,
                        bytes: .failure(.init(description: "more than \(Self.maxFiles) files in \(folder): not read"))))
                continue
            }
            if let reason = fileRefusal(path, trust) {
                found.append(
                    DropInFile(path: path, kind: kind, bytes: .failure(.init(description: "\(reason): not read"))))
                continue
            }
            let bytes = readFile(path, limit: min(Self.maxFileBytes, budget[kind]), trust, kind: kind)
            if case .success(let content) = bytes { budget[kind] -= content.count }
            found.append(DropInFile(path: path, kind: kind, bytes: bytes))
        }
        return found
    }

    /// Whether a file named `name` is read: `NAME` in `locks.d`, `NAME.json` in `defaults.d`,
    /// NAME of `A-Z a-z 0-9 _ -` only, not of digits only (vim probes a folder with `4913`) and
    /// not of capital letters only (`README`, `NOTES`: a document about the folder). In dconf's
    /// folders, every name `dconf update` reads (digits only too) but hidden ones, a database's
    /// `locks` folder, and editors' and package managers' leftovers (``isLeftover(_:)``): dconf
    /// applies those, kvd skips them and names each in status, so that a backup never overrides
    /// the admin's edit nor keeps a lock the admin removed (docs/drop-in-rules.md).
    static func isRead(_ name: String, _ kind: DropInFile.Kind) -> Bool {
        if kind == .dconfKeyfile || kind == .dconfLocks {
            return !name.hasPrefix(".") && !(kind == .dconfKeyfile && name == "locks") && !isLeftover(name)
        }
        var stem = Substring(name)
        if kind == .defaults {
            guard name.hasSuffix(".json") else { return false }
            stem = stem.dropLast(5)
        }
        let allowed = { (byte: UInt8) in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: "-")
        }
        return !stem.isEmpty && stem.utf8.allSatisfy(allowed)
            && !stem.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
            && !stem.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }

    /// Whether a name not read is skipped without a word in status, as dconf and run-parts skip
    /// it: hidden (starting with `.`), an editor's (ending in `~`, `.swp`, `.swo`, `.swx`,
    /// `#name#`, vim's digits-only probe), a backup or a package manager's (`.bak`, `.orig`,
    /// `.rej`, `.tmp`, `.rpmnew`, `.rpmsave`, holding `.dpkg-` or `.ucf-`).
    static func isQuiet(_ name: String) -> Bool {
        if name.hasPrefix(".") || isLeftover(name) { return true }
        return name.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
    }

    /// Whether `name` is an editor's or a package manager's leftover: ending in `~`, `.swp`,
    /// `.swo`, `.swx`, `#name#`, `.bak`, `.orig`, `.rej`, `.tmp`, `.rpmnew`, `.rpmsave`, or
    /// holding `.dpkg-` or `.ucf-`.
    static func isLeftover(_ name: String) -> Bool {
        if name.hasSuffix("~") || (name.hasPrefix("#") && name.hasSuffix("#")) { return true }
        let suffixes = [".swp", ".swo", ".swx", ".bak", ".orig", ".rej", ".tmp", ".rpmnew", ".rpmsave"]
        return suffixes.contains(where: name.hasSuffix) || name.contains(".dpkg-") || name.contains(".ucf-")
    }

    /// Whether a name not read goes unnamed in status: a quiet one (``isQuiet(_:)``) in kvd's
    /// own folders; in dconf's, only a hidden one (a leftover there is named, since dconf
    /// would apply it and the admin may expect it to count).
    static func isQuietlySkipped(_ name: String, _ kind: DropInFile.Kind) -> Bool {
        kind == .dconfKeyfile || kind == .dconfLocks ? name.hasPrefix(".") : isQuiet(name)
    }

    /// The bytes of the regular file at `path` (following a link), at most `limit` of them, if
    /// ``DropInTrust`` trusts it: checked on the opened descriptor, so what is judged is what is
    /// read. C: `open(O_NOFOLLOW|O_NONBLOCK)` (again without `O_NOFOLLOW` for a link), `fstat`,
    /// `read`.
    func readFile(_ path: String, limit: Int, _ trust: DropInTrust, kind: DropInFile.Kind) -> Result<
        [UInt8], DropInReadError
    > {
        let descriptor: FileDescriptor
        var linked = false
        do {
            do { descriptor = try fileSystem.open(path, [.nonBlocking, .noFollow], permissions: 0) } catch
                where error.code == ELOOP
            {
                linked = true
                descriptor = try fileSystem.open(path, [.nonBlocking], permissions: 0)
            }
        } catch  where error.code == ELOOP {
            return .failure(.init(description: "cannot open it: a loop of symbolic links"))
        } catch {
            return .failure(.init(description: "cannot open it: \(error)"))
        }
        defer { fileSystem.close(descriptor) }
        do {
            let status = try fileSystem.status(descriptor)
            guard status.kind == .regular else { return .failure(.init(description: "not a regular file")) }
            if let reason = trust.refusal(of: status, subject: linked ? "the file it links to" : "it") {
                return .failure(.init(description: reason + ": not read"))
            }
            guard status.size <= limit else { return .failure(tooLarge(status.size, limit, kind)) }
            var content: [UInt8] = []
            while true {
                let chunk = try fileSystem.read(descriptor, upTo: 1 << 20)
                if chunk.isEmpty { return .success(content) }
                content += chunk
                guard content.count <= limit else { return .failure(tooLarge(Int64(content.count), limit, kind)) }
            }
        } catch {
            return .failure(.init(description: "cannot read it: \(error)"))
        }
    }

    private func tooLarge(_ size: Int64, _ limit: Int, _ kind: DropInFile.Kind) -> DropInReadError {
        let files = kind == .locks || kind == .dconfLocks ? "lock files and profiles" : "files of values"
        return limit < Self.maxFileBytes
            ? DropInReadError(
                description: "the drop-in \(files) together pass \(totalBytes >> 20) MiB: not read (\(size) bytes)"
            )
            : DropInReadError(
                description: "\(size) bytes, more than a drop-in file may hold (\(Self.maxFileBytes >> 20) MiB)")
    }
}
