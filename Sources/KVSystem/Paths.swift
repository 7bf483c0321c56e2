import Glibc

/// Where kvd's socket and state live, by the contract's rules. Pure functions of the
/// environment, so every program resolves the same paths and tests can pass their own.
public enum Paths {
    /// The socket: `explicit` (`--socket`), else `$KVD_SOCKET`, else `$XDG_RUNTIME_DIR/kvd.sock`,
    /// else `/tmp/kvd-<uid>/kvd.sock`. Empty variables count as unset.
    public static func socket(explicit: String?, environment: [String: String], uid: UInt32 = LinuxSystem().userID)
        -> String
    {
        if let explicit, !explicit.isEmpty { return explicit }
        if let path = environment["KVD_SOCKET"], !path.isEmpty { return path }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/kvd.sock" }
        return fallbackSocketFolder(uid: uid) + "/kvd.sock"
    }

    /// The system instance's socket: `explicit` (`--socket` of `kvd --system` and `kvctl
    /// --system`, `--system-socket` of a user's kvd), else `$KVD_SYSTEM_SOCKET`, else
    /// ``defaultSystemSocket``. Empty values count as unset.
    public static func systemSocket(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let path = environment["KVD_SYSTEM_SOCKET"], !path.isEmpty { return path }
        return defaultSystemSocket
    }

    public static let defaultSystemSocket = "/run/kvd/system.sock"

    /// The system instance's state folder: `explicit` (`--state-dir`), else `$STATE_DIRECTORY`
    /// (the first if several), else `/var/lib/kvd`.
    public static func systemStateDirectory(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        return systemdStateDirectory(environment) ?? "/var/lib/kvd"
    }

    /// `$STATE_DIRECTORY` (systemd's `StateDirectory=`): the first if several.
    private static func systemdStateDirectory(_ environment: [String: String]) -> String? {
        environment["STATE_DIRECTORY"]?.split(separator: ":").first.map(String.init)
    }

    /// `/tmp/kvd-<uid>`: the socket folder when there is no runtime directory (mode 0700).
    public static func fallbackSocketFolder(uid: UInt32 = LinuxSystem().userID) -> String {
        "/tmp/kvd-\(uid)"
    }

    /// The daemon's state folder: `explicit` (`--state-dir`), else `$KVD_STATE_DIR`, else
    /// `$STATE_DIRECTORY` (systemd's `StateDirectory=`; the first if several), else
    /// `$XDG_CONFIG_HOME/kvd`, else `~/.config/kvd` (`$HOME`, else the password database).
    public static func stateDirectory(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let path = environment["KVD_STATE_DIR"], !path.isEmpty { return path }
        if let path = systemdStateDirectory(environment) { return path }
        if let config = environment["XDG_CONFIG_HOME"], !config.isEmpty { return config + "/kvd" }
        return homeDirectory(environment: environment) + "/.config/kvd"
    }

    /// This process's environment, read from `environ`.
    public static func processEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return environment
    }

    static func homeDirectory(environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        let system = LinuxSystem()
        if let directory = system.homeDirectory(ofUser: system.userID) { return directory }
        return "/"
    }
}
