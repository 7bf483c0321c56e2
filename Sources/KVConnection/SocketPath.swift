import Glibc
import KVProtocol
import KVSystem

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

    /// The system instance's socket (`kvd --system`): `explicit` (`--socket`), else
    /// `$KVD_SYSTEM_SOCKET`, else `/run/kvd/system.sock`. Empty values count as unset. Pure.
    public static func resolveSystem(explicit: String?, environment: [String: String]) -> String {
        Paths.systemSocket(explicit: explicit, environment: environment)
    }

    /// `/tmp/kvd-<uid>`: the socket's folder when there is no runtime directory.
    public static func fallbackFolder(uid: UInt32 = getuid()) -> String {
        Paths.fallbackSocketFolder(uid: uid)
    }

    /// Makes sure the folder of the socket at `path` may be trusted, by the rule every kvd
    /// program shares (`SocketFolder.prepare(forSocket:fallback:owner:)`): the fallback folder
    /// (`/tmp/kvd-<uid>`) is created with mode 0700 if missing and must be a folder owned by the
    /// user with mode 0700; a path elsewhere is left alone. Blocks for a `mkdir` and an `lstat`.
    ///
    /// Throws ``ClientError/unsafeSocketFolder(_:)`` saying what to do.
    public static func prepareFolder(for path: String, uid: UInt32 = getuid()) throws(ClientError) {
        do {
            try SocketFolder.prepare(forSocket: path, fallback: fallbackFolder(uid: uid))
        } catch {
            throw .unsafeSocketFolder(error)
        }
    }
}
