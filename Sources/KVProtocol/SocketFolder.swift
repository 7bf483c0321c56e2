import Glibc

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
    /// one-line description says what to do. The corresponding C calls are `mkdir` and `lstat`.
    public static func prepare(
        forSocket socketPath: String, fallback: String = Paths.fallbackSocketFolder(), owner: UInt32 = geteuid()
    ) throws(SocketFolderError) {
        guard socketPath.hasPrefix(fallback + "/") else { return }
        if mkdir(fallback, 0o700) != 0, errno != EEXIST {
            throw SocketFolderError(
                folder: fallback, problem: .unusable("cannot be created: \(String(cString: strerror(errno)))"))
        }
        var info = stat()
        guard lstat(fallback, &info) == 0 else {
            throw SocketFolderError(
                folder: fallback, problem: .unusable("cannot be inspected: \(String(cString: strerror(errno)))"))
        }
        if let problem = SocketFolderError.Problem(info, owner: owner) {
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

        /// The problem of a folder with status `info`, or `nil` if it may be trusted by `owner`.
        init?(_ info: stat, owner: UInt32) {
            let type = info.st_mode & S_IFMT
            if type != S_IFDIR {
                self = .notAFolder(kind: type == S_IFLNK ? "a symbolic link" : "not a folder")
            } else if info.st_uid != owner {
                self = .owner(actual: info.st_uid, expected: owner)
            } else if info.st_mode & 0o077 != 0 {
                self = .mode(UInt32(info.st_mode & 0o7777))
            } else {
                return nil
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
