import KVProtocol
import KVSystem
import KVValues

/// The daemon's settings, from its command line and environment.
public struct DaemonOptions: Sendable, Equatable {
    /// Socket to bind when systemd passes none.
    public var socketPath: String
    public var stateDirectory: String
    /// Exit after this long with no client and nothing pending; `nil` never.
    public var idleExit: Duration?
    public var verbose: Bool
    /// Most bytes all clients together may hold in kvd (``Server/Limits/maxClientMemory``).
    public var maxClientMemory = Server.Limits().maxClientMemory
    public var role: Role = .user(systemSocket: nil)
    /// A user's kvd: its `DCONF_PROFILE` (nil when unset or empty), which of dconf's profiles
    /// the system instance gives it (docs/drop-in-rules.md, "dconf's files").
    public var dconfProfile: String?
    /// History keeps at least each key's last this many values (`--history-keep`).
    public var historyKeep = 20
    /// History keeps every value of the last this many days (`--history-days`); 0 and a
    /// ``historyKeep`` of 0 turn history off.
    public var historyDays = 30
    /// Whether history records each change's writer (``ClientConnection/writer``) and each
    /// connection's process is identified at accept (what it may reach depends on it). Off only
    /// for `make bench`'s comparison of kvd with and without knowing its peers
    /// (`KVD_BENCH_NO_WRITERS=1`: credentials alone, no writer, no sandbox confined); not an
    /// option for users.
    public var recordsWriters = true
    /// The domains every sandboxed app (Flatpak, snap) may read besides its own and
    /// `NSGlobalDomain` (`--sandbox-readable`; docs/sandboxes.md).
    public var sandboxReadable = SandboxDefaults.readable

    /// Whether this is the system instance.
    public var isSystem: Bool {
        if case .system = role { return true }
        return false
    }

    /// Which kvd this is.
    public enum Role: Sendable, Equatable {
        /// A user's kvd, serving the layers combined with the system instance's at
        /// `systemSocket` (`nil`: no system layer, `--no-system-layer`).
        case user(systemSocket: String?)
        /// The system instance (`--system`).
        case system(SystemPolicy)
    }

    public static let usage = """
        usage: kvd [--socket PATH] [--state-dir DIR] [--system-socket PATH | --no-system-layer]
                   [--idle-exit SECONDS] [--max-client-memory SIZE] [--history-keep N] [--history-days D]
                   [--sandbox-readable PATTERN[,PATTERN...]] [--verbose]
               kvd --system [--socket PATH] [--state-dir DIR] [--config-dir DIR] [--admin-group NAME]
                   [--max-connections-per-uid N] [--idle-exit SECONDS] [--max-client-memory SIZE]
                   [--history-keep N] [--history-days D] [--verbose]
                   [--etcd URL[,URL...] --fleet-domain PATTERN... [--etcd-prefix P] [--etcd-auth-file FILE] [--etcd-ca-file FILE]
                    [--etcd-progress-interval SECONDS]]

        The kvd settings daemon: serves domain/key values over varlink on a Unix socket and keeps
        them durably as JSON files in its state folder. systemd normally starts it on demand
        (kvd.socket); it can also be started by hand, and kvctl starts it when nothing listens.
        A user's kvd serves the machine's system defaults and locks (from the system instance,
        kvd --system) combined with the user's own values.

        options:
          --socket PATH         socket to listen on when not socket-activated
                                (default: $KVD_SOCKET, else $XDG_RUNTIME_DIR/kvd.sock,
                                else /tmp/kvd-UID/kvd.sock, whose folder must be kvd's
                                user's with mode 0700)
          --state-dir DIR       state folder (default: $KVD_STATE_DIR, else $STATE_DIRECTORY,
                                else $XDG_CONFIG_HOME/kvd, else ~/.config/kvd; it must
                                be kvd's user's and not writable by others)
          --system-socket PATH  the system instance to follow (default: $KVD_SYSTEM_SOCKET,
                                else /run/kvd/system.sock); when nothing listens there,
                                there is no system layer until something does
          --no-system-layer     serve the user's values only: no system defaults, no locks
          --idle-exit SECONDS   exit after this many idle seconds with no client (default 30;
                                0 = never, at most 1000000000; the system instance's default
                                is never)
          --max-client-memory SIZE
                                most memory all clients together may hold in kvd: unsent
                                replies and unfinished messages (default 256M; bytes, or with
                                K, M or G; 1M to 1024G). Past it, the clients holding the most
                                are disconnected and logged (on the system instance, those of
                                the user holding the most). Keep it above 16M, the largest
                                message.
          --history-keep N      history keeps at least each key's last N values (default 20;
                                0 to 1000000)
          --history-days D      history keeps every value of the last D days (default 30;
                                0 to 1000000);
                                --history-keep 0 --history-days 0 turns history off (and
                                removes the history files at start)
          --sandbox-readable PATTERN[,PATTERN...]
                                the domains every sandboxed app (Flatpak, snap) may read
                                besides its own and NSGlobalDomain: domain names, or a
                                name's start then '*'; repeat for more; '' for none
                                (default org.gnome.desktop.interface,org.gnome.desktop.a11y*,
                                org.gnome.desktop.wm.preferences,org.gnome.desktop.sound,
                                org.gnome.desktop.privacy)
          --verbose             log every connection and commit

        the system instance (--system):
          --system              serve every user of the machine: defaults and locks; socket
                                default $KVD_SYSTEM_SOCKET, else /run/kvd/system.sock; state
                                folder default $STATE_DIRECTORY, else /var/lib/kvd
          --config-dir DIR      the drop-in files: DIR/defaults.d/NAME.json (typed JSON,
                                {DOMAIN: {KEY: VALUE}}) and DIR/locks.d/NAME (DOMAIN KEY or
                                DOMAIN * a line; a file may be "for" some groups or
                                users only), combined in name order beneath what admins
                                set; read again on SIGHUP, kvctl --system reload and a change
                                in the folders (default $KVD_CONFIG_DIR, else /etc/kvd)
          --dconf-dir DIR       dconf's folder: the system databases of DIR/profile/user,
                                their keyfiles DIR/db/NAME.d/* and locks DIR/db/NAME.d/locks/*,
                                read with the drop-in files, beneath them (default
                                $KVD_DCONF_DIR, else /etc/dconf; '' for none)
          --admin-group NAME    besides root, the members of this group may change values and
                                locks (default kvd-admin); everyone may read
          --max-connections-per-uid N
                                most connections one user may hold open (default 64;
                                1 to 1048576)
          --etcd URL[,URL...]   mirror fleet domains from this etcd cluster (its client URLs,
                                http:// or https://; several for fail-over)
          --fleet-domain PATTERN
                                a domain (shell glob, such as 'com.corp.*') to mirror from etcd;
                                repeat for more; needs --etcd
          --etcd-prefix P       where kvd's keys live in etcd (default kvd/): P values/DOMAIN/KEY
                                holds a value's typed JSON, P locks/DOMAIN/KEY locks the key
          --etcd-auth-file FILE etcd user name and password (two lines), in a file only its
                                owner may read
          --etcd-ca-file FILE   the certificate authorities (PEM) that sign etcd's https
                                certificates, as etcdctl's --cacert (default: the system's)
          --etcd-progress-interval SECONDS
                                etcd's --experimental-watch-progress-notify-interval (default 5;
                                0.1 to 3600):
                                a watch silent for 2.25 times as long counts as broken
          -h, --help            show this help
          --version             show the version
        """

    public static let version = KVDVersion.current

    /// The longest `--idle-exit` (about 31 years): any longer is a mistake, and its milliseconds
    /// must fit the event loop's timers.
    static let maxIdleExitSeconds: Double = 1_000_000_000
    /// The largest `--max-client-memory`: 1 TiB.
    static let maxClientMemoryBytes = 1 << 40

    /// What the command line asks for.
    public enum Parsed: Equatable, Sendable {
        case run(DaemonOptions)
        case help
        case version
    }

    /// `value` of the path option `flag`: an empty one (a script's unset variable) is a usage
    /// error, never the default path with the user's real data.
    static func path(_ value: String, for flag: String, naming name: String) throws(UsageError) -> String {
        guard !value.isEmpty else {
            throw UsageError("\(flag) needs a \(name), not an empty value (is a variable unset?)")
        }
        return value
    }

    /// Parses `arguments` (without the program name). Throws a one-line message on bad usage;
    /// an empty `--socket` or `--state-dir` is one (empty environment variables count as unset).
    public static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Parsed {
        var flags = Flags()
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            var argument = argument
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                rest.insert(String(argument[argument.index(after: equals)...]), at: rest.startIndex)
                argument = String(argument[..<equals])
            }
            switch argument {
            case "-h", "--help": return .help
            case "--version": return .version
            default: try flags.take(argument, from: &rest)
            }
        }
        try flags.check()
        return .run(flags.options(environment: environment))
    }

    /// What the command line said, before the paths are settled from the environment.
    struct Flags {
        var socket: String?
        var state: String?
        var idle: Duration? = .seconds(30)
        var idleSet = false
        var verbose = false
        var clientMemory = Server.Limits().maxClientMemory
        var system = false
        var systemSocket: String?
        var noSystemLayer = false
        var policy = SystemPolicy()
        /// The flags given that only a user's kvd, or only the system instance, takes.
        var userOnly: [String] = []
        var systemOnly: [String] = []
        var history: [String: Int] = [:]
        /// `--sandbox-readable`'s patterns, nil when not given.
        var sandboxReadable: [DomainPattern]?

        /// Takes `flag` and, when it has one, its value from the front of `rest`.
        mutating func take(_ flag: String, from rest: inout ArraySlice<String>) throws(UsageError) {
            func value() throws(UsageError) -> String {
                guard let next = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
                return next
            }
            switch flag {
            case "--socket": socket = try path(try value(), for: flag, naming: "PATH")
            case "--state-dir": state = try path(try value(), for: flag, naming: "DIR")
            case "--verbose", "-v": verbose = true
            case "--system": system = true
            case "--system-socket":
                systemSocket = try path(try value(), for: flag, naming: "PATH")
                userOnly.append(flag)
            case "--no-system-layer":
                noSystemLayer = true
                userOnly.append(flag)
            case "--idle-exit":
                idleSet = true
                idle = try idleExit(try value())
            case "--max-client-memory": clientMemory = try byteCount(try value(), for: flag)
            case "--sandbox-readable":
                sandboxReadable = (sandboxReadable ?? []) + (try patterns(try value(), for: flag))
            case "--history-keep", "--history-days":
                let text = try value()
                guard let number = Int(text), number >= 0, number <= 1_000_000 else {
                    throw UsageError("\(flag) needs a whole number from 0 to 1000000, not \"\(text)\"")
                }
                history[flag] = number
            default:
                guard try policy.take(flag, value: value) else { throw UsageError("unknown argument \"\(flag)\"") }
                systemOnly.append(flag)
            }
        }

        /// The rules between flags: each for its instance, no two that exclude each other.
        func check() throws(UsageError) {
            if system, let flag = userOnly.first {
                throw UsageError("\(flag) is for a user's kvd, not the system instance (--system)")
            }
            if !system, let flag = systemOnly.first {
                throw UsageError("\(flag) is for the system instance: add --system")
            }
            if noSystemLayer, systemSocket != nil {
                throw UsageError("--system-socket and --no-system-layer exclude each other")
            }
            if policy.etcdEndpoints.isEmpty != policy.fleetDomains.isEmpty {
                throw UsageError(
                    policy.etcdEndpoints.isEmpty
                        ? "--fleet-domain needs --etcd URL" : "--etcd needs at least one --fleet-domain PATTERN")
            }
        }

        /// The options, with the paths not given taken from `environment` (see ``Paths``).
        func options(environment: [String: String]) -> DaemonOptions {
            var policy = policy
            if system, !systemOnly.contains("--config-dir"), let folder = environment["KVD_CONFIG_DIR"], !folder.isEmpty
            {
                policy.configDirectory = folder
            }
            if system, !systemOnly.contains("--dconf-dir"), let folder = environment["KVD_DCONF_DIR"] {
                policy.dconfDirectory = folder.isEmpty ? nil : folder
            }
            var options =
                system
                ? DaemonOptions(
                    socketPath: Paths.systemSocket(explicit: socket, environment: environment),
                    stateDirectory: Paths.systemStateDirectory(explicit: state, environment: environment),
                    idleExit: idleSet ? idle : nil, verbose: verbose, maxClientMemory: clientMemory,
                    role: .system(policy))
                : DaemonOptions(
                    socketPath: Paths.socket(explicit: socket, environment: environment),
                    stateDirectory: Paths.stateDirectory(explicit: state, environment: environment),
                    idleExit: idle, verbose: verbose, maxClientMemory: clientMemory,
                    role: .user(
                        systemSocket: noSystemLayer
                            ? nil : Paths.systemSocket(explicit: systemSocket, environment: environment)))
            if !system, let profile = environment["DCONF_PROFILE"], !profile.isEmpty { options.dconfProfile = profile }
            options.historyKeep = history["--history-keep"] ?? options.historyKeep
            options.historyDays = history["--history-days"] ?? options.historyDays
            options.recordsWriters = environment["KVD_BENCH_NO_WRITERS"] != "1"
            options.sandboxReadable = sandboxReadable ?? options.sandboxReadable
            return options
        }
    }

    /// `--idle-exit`'s seconds, from 0 (never: `nil`) to ``maxIdleExitSeconds``, rounded up to
    /// the millisecond.
    static func idleExit(_ text: String) throws(UsageError) -> Duration? {
        guard let seconds = Double(text), seconds >= 0, seconds <= maxIdleExitSeconds else {
            throw UsageError(
                "--idle-exit needs a number of seconds from 0 (never) to \(Int(maxIdleExitSeconds)), not \"\(text)\"")
        }
        return seconds == 0 ? nil : .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }

    /// `--sandbox-readable`'s comma-separated ``DomainPattern``s (none for '').
    static func patterns(_ text: String, for flag: String) throws(UsageError) -> [DomainPattern] {
        var patterns: [DomainPattern] = []
        for part in text.split(separator: ",") {
            do { patterns.append(try DomainPattern(validating: String(part))) } catch {
                throw UsageError("\(flag): \(error)")
            }
        }
        return patterns
    }

    /// `1048576`, `512K`, `256M`, `1G` (binary units) as bytes, from 1 MiB to 1 TiB.
    static func byteCount(_ text: String, for flag: String) throws(UsageError) -> Int {
        let units: [Character: Int] = ["K": 10, "M": 20, "G": 30]
        let shift = text.last.flatMap { units[Character($0.uppercased())] }
        let digits = shift == nil ? Substring(text) : text.dropLast()
        guard let number = Int(digits), number >= 0, number <= maxClientMemoryBytes >> (shift ?? 0),
            number << (shift ?? 0) >= 1 << 20
        else {
            throw UsageError(
                "\(flag) needs a size from 1M to 1024G, in bytes or with K, M or G (such as 256M), not \"\(text)\"")
        }
        return number << (shift ?? 0)
    }
}
