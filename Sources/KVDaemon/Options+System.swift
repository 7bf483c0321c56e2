import KVValues

extension DaemonOptions {
    /// Who may change the system instance, and how many connections one user may hold.
    public struct SystemPolicy: Sendable, Equatable {
        /// Members of this group (and root) may write; others only read.
        public var adminGroup = "kvd-admin"
        /// Most connections one uid may have open; more are closed at once (root's too, counted
        /// apart from everyone else's).
        public var maxConnectionsPerUID = 64
        /// Largest call a connection that may not write sends (its reads are small; its writes
        /// are refused anyway): a longer one gets `TooLarge` with this limit and the connection
        /// closes, before any of it is parsed, so no reader stalls the loop with a huge message.
        public static let maxReaderMessageBytes = 64 << 10
        /// The fleet (`--etcd`): etcd's client URLs; empty: no fleet.
        public var etcdEndpoints: [String] = []
        /// The domains mirrored from etcd (`--fleet-domain`, shell globs).
        public var fleetDomains: [String] = []
        /// Where kvd's keys live in etcd (`--etcd-prefix`).
        public var etcdPrefix = "kvd/"
        /// A root-only file with etcd's user name and password (`--etcd-auth-file`).
        public var etcdAuthFile: String?
        /// The certificate authorities of etcd's https certificates (`--etcd-ca-file`, PEM).
        public var etcdCAFile: String?
        /// etcd's progress notification interval (`--etcd-progress-interval`): a watch silent
        /// for 2.25 times as long counts as broken.
        public var etcdProgressInterval: Duration = .seconds(5)
        /// The folder holding the drop-in files, `defaults.d/` and `locks.d/` (`--config-dir`,
        /// default `$KVD_CONFIG_DIR`, else ``defaultConfigDirectory``).
        public var configDirectory = Self.defaultConfigDirectory
        public static let defaultConfigDirectory = "/etc/kvd"
        /// dconf's folder (`--dconf-dir`, default `$KVD_DCONF_DIR`, else `/etc/dconf`): its
        /// profile's system databases' keyfiles and locks are read with the drop-in files;
        /// nil (`--dconf-dir ''`): not read.
        public var dconfDirectory: String? = "/etc/dconf"
        public init() {}
    }
}

extension DaemonOptions.SystemPolicy {
    /// Takes the system instance's option `flag` (reading its value with `value`); false when
    /// `flag` is not one of them. Throws a one-line message for a bad value.
    mutating func take(_ flag: String, value: () throws(UsageError) -> String) throws(UsageError) -> Bool {
        switch flag {
        case "--admin-group":
            adminGroup = try value()
            guard !adminGroup.isEmpty else { throw UsageError("--admin-group needs a group name, not an empty value") }
        case "--max-connections-per-uid":
            let text = try value()
            guard let count = Int(text), count >= 1, count <= 1 << 20 else {
                throw UsageError("--max-connections-per-uid needs a whole number from 1 to 1048576, not \"\(text)\"")
            }
            maxConnectionsPerUID = count
        case "--config-dir":
            configDirectory = try DaemonOptions.path(try value(), for: flag, naming: "DIR")
        case "--dconf-dir":
            let folder = try value()
            dconfDirectory = folder.isEmpty ? nil : try DaemonOptions.path(folder, for: flag, naming: "DIR")
        default: return try takeFleet(flag, value: value)
        }
        return true
    }

    /// The fleet's flags (`--etcd` and the options that go with it); false for any other flag.
    private mutating func takeFleet(_ flag: String, value: () throws(UsageError) -> String) throws(UsageError) -> Bool {
        switch flag {
        case "--etcd":
            let urls = try value().split(separator: ",").map(String.init)
            guard !urls.isEmpty, urls.allSatisfy({ $0.hasPrefix("http://") || $0.hasPrefix("https://") }) else {
                throw UsageError(
                    "--etcd needs etcd's client URLs, such as http://127.0.0.1:2379 (several: comma-separated)")
            }
            etcdEndpoints += urls
        case "--fleet-domain":
            let pattern = try value()
            guard !pattern.isEmpty else {
                throw UsageError("--fleet-domain needs a domain or a pattern such as 'com.corp.*'")
            }
            fleetDomains.append(pattern)
        case "--etcd-prefix":
            etcdPrefix = try value()
            guard !etcdPrefix.isEmpty else { throw UsageError("--etcd-prefix needs a prefix such as kvd/") }
        case "--etcd-auth-file":
            etcdAuthFile = try DaemonOptions.path(try value(), for: flag, naming: "FILE")
        case "--etcd-ca-file":
            etcdCAFile = try DaemonOptions.path(try value(), for: flag, naming: "FILE")
        case "--etcd-progress-interval":
            let text = try value()
            guard let seconds = Double(text), seconds >= 0.1, seconds <= 3600 else {
                throw UsageError(
                    "--etcd-progress-interval needs etcd's progress interval in seconds (0.1 to 3600), not \"\(text)\"")
            }
            etcdProgressInterval = .milliseconds(Int64(seconds * 1000))
        default: return false
        }
        return true
    }
}
