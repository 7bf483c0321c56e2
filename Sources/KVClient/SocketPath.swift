import Glibc
import KVProtocol

/// Where kvd's socket lives, by the rule every kvd program shares (see CONTRACT.md):
/// `--socket PATH`, else `$KVD_SOCKET`, else `$XDG_RUNTIME_DIR/kvd.sock`, else
/// `/tmp/kvd-<uid>/kvd.sock`.
///
/// ```swift
/// let path = SocketPath.resolve(explicit: options.socket, environment: environment)
/// // "/run/user/1000/kvd.sock" in a systemd user session
/// ```
///
/// The rule itself is `KVProtocol.Paths.socket`, which the daemon uses too; this is the
/// client's name for it.
public enum SocketPath {
    /// The socket path for an explicit `--socket` value (or `nil`) and an environment.
    /// Empty values count as unset. Pure: touches no file.
    public static func resolve(explicit: String?, environment: [String: String], uid: UInt32 = getuid()) -> String {
        Paths.socket(explicit: explicit, environment: environment, uid: uid)
    }

    /// `/tmp/kvd-<uid>`: the socket's folder when there is no runtime directory.
    public static func fallbackFolder(uid: UInt32 = getuid()) -> String {
        Paths.fallbackSocketFolder(uid: uid)
    }

    /// Makes sure the fallback folder exists, is a real folder owned by `uid` and is private
    /// (mode 0700), creating it if missing. Does nothing for a path outside the fallback folder:
    /// those folders belong to the user or the service manager.
    ///
    /// The corresponding C calls are `mkdir` and `lstat`.
    public static func prepareFolder(for path: String, uid: UInt32 = getuid()) throws(ClientError) {
        let folder = fallbackFolder(uid: uid)
        guard path.hasPrefix(folder + "/") else { return }
        if mkdir(folder, 0o700) != 0, errno != EEXIST {
            throw .cannotConnect(path: path, reason: "cannot create the folder \(folder): \(errnoText())")
        }
        var info = stat()
        guard lstat(folder, &info) == 0 else {
            throw .cannotConnect(path: path, reason: "cannot inspect the folder \(folder): \(errnoText())")
        }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == uid, info.st_mode & 0o077 == 0 else {
            throw .cannotConnect(
                path: path,
                reason: "\(folder) must be a folder owned by uid \(uid) with mode 0700; remove it or set KVD_SOCKET")
        }
    }
}

/// The message of an `errno` value, like "No such file or directory".
func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
