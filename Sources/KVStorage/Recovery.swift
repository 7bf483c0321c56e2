import Glibc
import KVSystem
import KVValues

/// The committed state found in a state folder.
struct RecoveredState {
    var domains: [Domain: DomainState] = [:]
    var revision: Int64 = 0
    /// The log's commits, per domain, for history (kept only when history is on).
    var recent: [Domain: [RecentCommit]] = [:]
    /// The log's base revision: every change at or below it is in the domain files.
    var logBase: Int64 = 0
}

/// Opening a state folder: create it, lock it, load the domain files, replay the log.
/// Runs once, on the thread that creates the ``Store``; blocks on I/O.
struct Recovery {
    let wal: WriteAheadLog
    let files: StateFiles
    var folder: StateFolder { wal.folder }
    var fileSystem: any FileSystem { folder.fileSystem }
    var directory: String { folder.directory }

    /// Prepares and locks the folder and returns its committed state.
    func run() throws(StorageError) -> RecoveredState {
        try prepareDirectory()
        try lock()
        try prepareHistory()
        var state = RecoveredState()
        var loaded: [Domain: (file: String, replayedThrough: Int64)] = [:]
        for (name, entry) in try domainFiles() {
            guard let domain = try load(name, entry) else { continue }
            keep(domain, from: name, into: &state, loaded: &loaded)
        }
        let fileRevisions = state.domains.mapValues(\.revision)
        let damaged = try recoverLog(into: &state, replayedThrough: loaded.mapValues(\.replayedThrough))
        files.history.noteStart(files: fileRevisions, logBase: state.logBase)
        if damaged { compactAfterDamage(state) }
        try syncFolders()
        return state
    }

    /// Makes the folder's entries, and its own entry in its parent, durable before the first
    /// commit: an earlier run may have failed between a rename or mkdir and the sync after it
    /// (a log renamed into place whose folder sync failed would otherwise take acknowledged
    /// commits into a name a crash can undo).
    private func syncFolders() throws(StorageError) {
        do {
            try fileSystem.syncDirectory(directory)
        } catch {
            throw .failure("cannot sync the state folder \(directory): \(error)")
        }
        do {
            try fileSystem.syncDirectory(Self.parent(of: directory))
        } catch  where error.code == EACCES || error.code == EPERM {
            // A parent we may not open is one we did not create the folder in.
        } catch {
            throw .failure("cannot sync the folder holding the state folder \(directory): \(error)")
        }
    }

    /// Creates the folder if missing and refuses one that is not the user's alone: owned by
    /// another user, or writable by group or others (who could plant links or files in it).
    private func prepareDirectory() throws(StorageError) {
        do {
            try makeDirectories(directory)
        } catch {
            throw .invalidStateDirectory("cannot create the state folder \(directory): \(error)")
        }
        let status: FileStatus
        do {
            let descriptor = try fileSystem.open(directory, [.directory], permissions: 0)
            defer { fileSystem.close(descriptor) }
            status = try fileSystem.status(descriptor)
        } catch {
            throw .invalidStateDirectory("cannot use the state folder \(directory): \(error)")
        }
        if let refusal = Self.refusal(of: status, at: directory, user: fileSystem.effectiveUserID) {
            throw .invalidStateDirectory(refusal)
        }
    }

    /// Why a state folder with `status` must not be used by `user`, or `nil` if it may
    /// (``OwnershipRule``: the user's own, writable by nobody else; it was opened as a folder).
    static func refusal(of status: FileStatus, at directory: String, user: UInt32) -> String? {
        switch OwnershipRule(kind: nil, owners: [user], forbiddenPermissions: 0o022).violation(of: status) {
        case nil, .kind:
            return nil
        case .owner(let owner):
            return
                "the state folder \(directory) belongs to uid \(owner), not to uid \(user) that kvd runs as, so kvd will not "
                + "keep settings there; use a folder of your own (--state-dir DIR), or have it given to uid \(user) (chown)"
        case .permissions(let mode):
            return
                "the state folder \(directory) has mode 0\(String(mode, radix: 8)), so other users can write to it "
                + "and plant files kvd would write through; if nothing in it is foreign, run `chmod go-w \(directory)` and start kvd again"
        }
    }

    /// Creates `path` and any missing parents (like `mkdir -p`), each with mode 0700, and
    /// syncs the folder holding each one created: until then a crash may lose the new folder
    /// with everything committed into it.
    private func makeDirectories(_ path: String) throws(SystemError) {
        do {
            try fileSystem.makeDirectory(path, permissions: 0o700)
        } catch  where error.code == EEXIST {
            return
        } catch  where error.code == ENOENT {
            guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { throw error }
            try makeDirectories(String(path[..<slash]))
            try fileSystem.makeDirectory(path, permissions: 0o700)
        }
        try fileSystem.syncDirectory(Self.parent(of: path))
    }

    /// The folder holding `path`: `/` for `/x`, `.` for `x`.
    static func parent(of path: String) -> String {
        var path = Substring(path)
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Takes the lock, retrying for up to half a second while it is held: a store closed a moment
    /// ago can still hold it through a child process that another thread is starting (the lock
    /// descriptor is close-on-exec, but shared until the child's `exec`), and a kvd that is just
    /// exiting releases it soon. A live kvd holds it far longer, and is reported.
    private func lockRetryingBriefly(_ descriptor: FileDescriptor) throws(SystemError) {
        var attempt = 0
        while true {
            do {
                return try fileSystem.lockExclusively(descriptor)
            } catch  where error.code == EWOULDBLOCK && attempt < 50 {
                attempt += 1
                fileSystem.sleep(microseconds: 10_000)
            }
        }
    }

    private func lock() throws(StorageError) {
        let lockPath = folder.path(StorageFormat.lockFileName)
        do {
            let descriptor = try fileSystem.open(lockPath, [.write, .create, .noFollow], permissions: 0o600)
            wal.holdLock(descriptor)
            try lockRetryingBriefly(descriptor)
        } catch {
            wal.releaseAll()
            if error.code == EWOULDBLOCK {
                throw .locked("another kvd is already using state folder \(directory) (lock file \(lockPath) is held)")
            }
            throw .invalidStateDirectory("cannot lock the state folder \(directory) with \(lockPath): \(error)")
        }
    }

    /// The domain files in the folder, sorted; removes leftover temporary files on the way.
    private func domainFiles() throws(StorageError) -> [(String, StorageFormat.Entry)] {
        let names: [String]
        do { names = try fileSystem.contentsOfDirectory(directory) } catch {
            throw .invalidStateDirectory("cannot list the state folder \(directory): \(error)")
        }
        var found: [(String, StorageFormat.Entry)] = []
        for name in names.sorted() {
            if name.hasPrefix("."), name.hasSuffix(".tmp") {
                try? fileSystem.unlink(folder.path(name))
            } else if let entry = StorageFormat.entry(forFileName: name) {
                found.append((name, entry))
            }
        }
        return found
    }

    /// Adds a loaded domain file to `state`. A domain read from two files (its own and an older
    /// kvd's name for it, after a crash between writing one and removing the other) keeps the
    /// newer; a file under another name than the domain's own is removed at the next compaction.
    private func keep(
        _ file: LoadedDomain, from name: String, into state: inout RecoveredState,
        loaded: inout [Domain: (file: String, replayedThrough: Int64)]
    ) {
        let domain = file.domain
        let own = StorageFormat.fileName(for: domain)
        state.revision = max(state.revision, file.state.revision)
        if let earlier = loaded[domain] {
            let newer =
                file.replayedThrough > earlier.replayedThrough
                || (file.replayedThrough == earlier.replayedThrough && name == own)
            folder.log(
                .warning,
                "domain \(domain) is in two files, \(earlier.file) and \(name); the newer (\(newer ? name : earlier.file)) is read, the other will be removed"
            )
            files.noteStale(domain, file: name == own ? earlier.file : name)
            wal.markDirty(domain)
            guard newer else { return }
        } else if name != own {
            files.noteStale(domain, file: name)
            wal.markDirty(domain)
        }
        loaded[domain] = (name, file.replayedThrough)
        state.domains[domain] = file.state.isEmpty ? nil : file.state
    }

    /// Reads one domain file. One that cannot be read — not a regular file, over the size
    /// limit, or unreadable as a whole — is renamed aside and logged, and its domain starts
    /// empty; nil then.
    private func load(_ name: String, _ entry: StorageFormat.Entry) throws(StorageError) -> LoadedDomain? {
        guard let bytes = try readDomainFile(name) else { return nil }
        var known: Domain?
        if case .domainFile(let domain) = entry { known = domain }
        guard let loaded = try decodeDomainFile(bytes, name, known: known) else { return nil }
        try note(loaded, read: bytes, from: name)
        return loaded
    }

    /// The bytes of domain file `name`; nil when there is none, or when it is not a regular
    /// file or is over the size limit (then it is set aside, ``setAside(_:reason:)``). A failed
    /// read is a failure of recovery.
    private func readDomainFile(_ name: String) throws(StorageError) -> [UInt8]? {
        let path = folder.path(name)
        do {
            return try fileSystem.readRegularFile(path, limit: Int64(StorageFormat.maxDomainFileBytes))
        } catch {
            switch error {
            case .notRegular(let kind): try setAside(name, reason: "it is \(kind), not a regular file")
            case .tooLarge(let size):
                try setAside(
                    name,
                    reason:
                        "it holds \(size) bytes, more than the \(StorageFormat.maxDomainFileBytes) a domain file may")
            case .system(let error): throw .failure("cannot read the domain file \(path): \(error)")
            }
            return nil
        }
    }

    /// The domain `bytes` (read from file `name`) hold: of domain `known` when the file's name
    /// says which, else the one its `"domain"` member names, which must be the one whose file
    /// is `name`. Nil when the file cannot be decoded or names another domain: then it is set
    /// aside (``setAside(_:reason:)``).
    private func decodeDomainFile(_ bytes: [UInt8], _ name: String, known: Domain?) throws(StorageError)
        -> LoadedDomain?
    {
        do throws(DomainFileError) {
            let loaded = try DomainFile.decode(bytes, domain: known)
            guard known != nil || StorageFormat.fileName(for: loaded.domain) == name else {
                throw DomainFileError(
                    reason:
                        "its \"domain\" member names \(loaded.domain), whose file is \(StorageFormat.fileName(for: loaded.domain))"
                )
            }
            return loaded
        } catch {
            try setAside(name, reason: error.reason)
            return nil
        }
    }

    /// What recovery tells of a decoded domain file `name`: its decoder's warnings and a domain
    /// larger than one reply carries are logged; a file its next rewrite cannot keep whole
    /// (``LoadedDomain/copyReason``) is copied aside (``keepCopy(of:name:reason:)``) and its
    /// domain marked dirty, so that it is rewritten, and copied, once.
    private func note(_ loaded: LoadedDomain, read bytes: [UInt8], from name: String) throws(StorageError) {
        let path = folder.path(name)
        for warning in loaded.warnings { folder.log(.warning, "domain file \(path): \(warning)") }
        if let reason = loaded.copyReason {
            try keepCopy(of: bytes, name: name, reason: reason)
            wal.markDirty(loaded.domain)  // rewritten at the next compaction, so copied once
        }
        if loaded.state.budgetBytes > Limits.domainBytes {
            folder.log(
                .warning,
                "domain \(loaded.domain) in \(path) takes \(loaded.state.budgetBytes) bytes as typed JSON, more than one reply carries (\(Limits.domainBytes)): its keys are served one by one, List of the whole domain fails, and writes that grow it are refused"
            )
        }
    }

    /// Renames an unreadable file `name` aside and logs it.
    private func setAside(_ name: String, reason: String) throws(StorageError) {
        let path = folder.path(name)
        let which =
            StorageFormat.entry(forFileName: name).flatMap { entry -> String? in
                if case .domainFile(let domain) = entry { return "domain \(domain)" }
                return nil
            } ?? "the domain it holds"
        do {
            let backup = try folder.moveAside(name)
            folder.log(
                .error,
                "domain file \(path) is unreadable (\(reason)); moved it to \(folder.path(backup)); \(which) starts empty"
            )
        } catch {
            throw .failure("domain file \(path) is unreadable (\(reason)) and could not be moved aside: \(error)")
        }
    }

    /// Copies a domain file that is read, but that its next rewrite cannot keep whole.
    private func keepCopy(of bytes: [UInt8], name: String, reason: String) throws(StorageError) {
        let path = folder.path(name)
        do {
            let backup = try folder.backUp(bytes, of: name)
            folder.log(.warning, "domain file \(path): \(reason); copied it to \(folder.path(backup)) first")
        } catch {
            throw .failure("domain file \(path): \(reason), and it could not be copied aside: \(error)")
        }
    }
}
