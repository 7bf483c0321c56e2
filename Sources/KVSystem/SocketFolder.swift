/// The check every kvd program (kvd, kvctl, KVClient and what is built on it) makes before it
/// trusts the folder of the socket: the one place where that rule lives.
///
/// The last-resort socket folder, `/tmp/kvd-<uid>`, sits in a folder every local user can write,
/// so another user can make it first and listen there: a client would send them its settings,
/// and a kvd started there would serve from their folder. The folder is trusted only if it is
/// a real folder (not a link), owned by the user, with no permission bits for group or others.
/// Other folders are not checked: `$XDG_RUNTIME_DIR` is the service manager's, private to the
/// user, and a path given with `--socket` or `$KVD_SOCKET` is the choice of whoever gave it.
public enum SocketFolder {
    /// Makes sure the folder of `socketPath` may be trusted. When `socketPath` lies in `fallback`
    /// (default `/tmp/kvd-<uid>`), creates `fallback` with mode 0700 if it is missing, then
    /// requires it to be a folder, not a link, owned by `owner` (default: the effective user),
    /// with mode 0700 or narrower. A socket elsewhere is left alone.
    ///
    /// Blocks for one `mkdir` and one `lstat`; thread-safe. Throws ``SocketFolderError``, whose
    /// one-line description says what to do. The corresponding C calls are `mkdir` and `lstat`
    /// (through `system`).
    public static func prepare(
        forSocket socketPath: String, fallback: String = Paths.fallbackSocketFolder(), owner: UInt32? = nil,
        system: any SystemCalls = LinuxSystem()
    ) throws(SocketFolderError) {
        guard socketPath.hasPrefix(fallback + "/") else { return }
        do {
            try system.makeDirectory(fallback, permissions: 0o700)
        } catch  where error.errno != .fileExists {
            throw SocketFolderError(folder: fallback, problem: .unusable("cannot be created: \(error.errno)"))
        } catch {}
        let status: FileStatus
        do { status = try system.status(fallback, followingLinks: false) } catch {
            throw SocketFolderError(folder: fallback, problem: .unusable("cannot be inspected: \(error)"))
        }
        let owner = owner ?? system.effectiveUserID
        if let problem = SocketFolderError.Problem(status, owner: owner) {
            throw SocketFolderError(folder: fallback, problem: problem)
        }
    }
}

/// A socket folder a kvd program will not use, and why.
public struct SocketFolderError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the folder.
    public enum Problem: Sendable, Equatable {
        /// It is a symbolic link or something else that is not a folder.
        case notAFolder(kind: String)
        /// It belongs to another user.
        case owner(actual: UInt32, expected: UInt32)
        /// Group or others have permissions on it (the mode given).
        case mode(UInt32)
        /// It could not be created or inspected (the system's reason).
        case unusable(String)

        /// The problem of a folder with `status`, or `nil` if it may be trusted by `owner`
        /// (``OwnershipRule``: a folder of `owner`'s, nothing for group or others).
        init?(_ status: FileStatus, owner: UInt32) {
            let rule = OwnershipRule(kind: .directory, owners: [owner], forbiddenPermissions: 0o077)
            switch rule.violation(of: status) {
            case nil: return nil
            case .kind(let kind): self = .notAFolder(kind: kind == .symbolicLink ? "a symbolic link" : "not a folder")
            case .owner(let actual): self = .owner(actual: actual, expected: owner)
            case .permissions(let mode): self = .mode(mode)
            }
        }
    }

    public var folder: String
    public var problem: Problem

    public init(folder: String, problem: Problem) {
        self.folder = folder
        self.problem = problem
    }

    /// One line: what is wrong, why it matters, what to do.
    public var description: String {
        let elsewhere = "or set XDG_RUNTIME_DIR or KVD_SOCKET to a folder of your own"
        switch problem {
        case .notAFolder(let kind):
            return
                "the socket folder \(folder) is \(kind), so kvd programs will not use it; remove it (rm \(folder)) \(elsewhere)"
        case .owner(let actual, let expected):
            return
                "the socket folder \(folder) belongs to uid \(actual), not to you (uid \(expected)), so kvd programs will not use it: "
                + "another user could read and answer your settings there; have it removed (rm -r \(folder), as root or its owner) \(elsewhere)"
        case .mode(let mode):
            return
                "the socket folder \(folder) has mode 0\(String(mode, radix: 8)), so other users could put their own socket there and kvd "
                + "programs will not use it; remove it (rm -r \(folder)) so that it is made again with mode 0700, \(elsewhere)"
        case .unusable(let reason):
            return "the socket folder \(folder) \(reason); \(elsewhere)"
        }
    }
}
