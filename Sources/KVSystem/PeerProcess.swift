/// Who is on the other end of a connection: the process the kernel names when it connected, and
/// what the system says about it: what history records as a change's writer (KVDaemon's
/// `ClientConnection.writer`) and whether it runs in a sandboxed app (`ClientConnection.reach`),
/// once per connection, when kvd accepts it.
///
/// Everything but the credentials is read from `/proc/PID` after the connection was made, and
/// kept only if the process the connection's pidfd names is still running once it was read: a
/// process that exited meanwhile may have left its pid to another, whose program must not be
/// taken for its. Every text is bounded (``maxTextBytes``) and made of the bytes the system gave.
public struct PeerProcess: Sendable, Equatable {
    /// The kernel's credentials when it connected (`SO_PEERCRED`, `SO_PEERGROUPS`).
    public var credentials: PeerCredentials
    /// The program (`/proc/PID/exe`'s target), nil when unknown.
    public var program: String?
    /// The command name (`/proc/PID/comm`), nil when unknown.
    public var command: String?
    /// The systemd unit it runs in (the last `.service` or `.scope` of its cgroup), nil when none.
    public var unit: String?
    /// The application, where the system names one (``AppIdentity``), nil otherwise.
    public var app: AppIdentity?
    /// Whether what `/proc` says was read from the process that connected, still running once it
    /// was read; false when it could not be (the process exited, no pidfd): then ``program``,
    /// ``command``, ``unit`` and ``app`` are nil, and nobody can tell whether it ran in a sandbox.
    public var isConfirmed = false

    /// The most bytes kept of any text.
    public static let maxTextBytes = 256

    public init(
        credentials: PeerCredentials, program: String? = nil, command: String? = nil, unit: String? = nil,
        app: AppIdentity? = nil
    ) {
        self.credentials = credentials
        self.program = program
        self.command = command
        self.unit = unit
        self.app = app
    }
}

/// The application behind a process, as its sandbox or its launcher named it.
public struct AppIdentity: Sendable, Equatable {
    /// Who says so, and so how far it may be trusted.
    public enum Source: String, Sendable, Equatable {
        /// Flatpak: `[Application] name` of `/.flatpak-info` in the process's own root, which the
        /// sandbox's owner cannot change from inside. A sandbox.
        case flatpak
        /// Snap: the `snap.NAME.APP` unit of its cgroup. A sandbox.
        case snap
        /// A launcher's XDG app unit (`app-LAUNCHER-APPID-RANDOM.scope`, `app-APPID@RANDOM.service`):
        /// a label the app's own user chose, no sandbox.
        case appUnit
    }

    /// The application id: `org.gnome.TextEditor`, a snap's name.
    public var id: String
    public var source: Source

    /// Whether the process runs in a sandbox that confines it (Flatpak, snap).
    public var isSandboxed: Bool { source != .appUnit }

    public init(id: String, source: Source) {
        self.id = id
        self.source = source
    }
}

extension PeerProcess {
    /// The peer of the connected Unix socket `fd`: its credentials (which must be read), then
    /// what `/proc` says, each part nil where it cannot be read. Throws when kvd has no
    /// descriptor left to learn it (`EMFILE`, `ENFILE`: the caller refuses the connection, as
    /// one over its limit; a sandbox's file unopened for want of one is never read as no
    /// sandbox), or when the credentials cannot be read.
    public static func identify(_ fd: Int32, system: any SystemCalls) throws(Errno) -> PeerProcess {
        var peer = PeerProcess(credentials: try system.peerCredentials(fd))
        let pidfd: Int32
        do { pidfd = try system.peerProcessDescriptor(fd) } catch {
            if error.isOutOfDescriptors { throw error }
            return peer
        }
        defer { system.close(pidfd) }
        let folder = "/proc/\(peer.credentials.pid)"
        var found = peer
        found.program = (try? system.linkTarget(folder + "/exe")).flatMap { $0 }.map(bounded)
        found.command = read(folder + "/comm", system).map {
            bounded(String(decoding: $0, as: UTF8.self).trimmingSpaceAtEnd)
        }
        let cgroup = try readIfPresent(folder + "/cgroup", system)
        let info = try readIfPresent(folder + "/root/.flatpak-info", system)
        let unit = cgroup.flatMap { Self.unit(inCgroup: String(decoding: $0, as: UTF8.self)) }
        found.unit = unit.map(bounded)
        found.app = Self.flatpakApp(info) ?? unit.flatMap(Self.app(inUnit:))
        // Read after the process may have exited: only what the connection's own process said.
        if system.processIsRunning(pidfd) {
            peer = found
            peer.isConfirmed = true
        }
        return peer
    }

    /// About the first 4 KiB of the file at `path` (`comm` and `cgroup` take a few hundred
    /// bytes, `.flatpak-info` names its app in its first group; a connection's accept pays for
    /// the buffer), nil when it cannot be read.
    static func read(_ path: String, _ system: any SystemCalls) -> [UInt8]? {
        try? readIfPresent(path, system)
    }

    /// ``read(_:_:)``, but throws when kvd has no descriptor left to open it (`EMFILE`,
    /// `ENFILE`): then nothing may be concluded from its absence.
    static func readIfPresent(_ path: String, _ system: any SystemCalls) throws(Errno) -> [UInt8]? {
        let fd: Int32
        do { fd = try system.openReadOnly(path) } catch {
            if error.isOutOfDescriptors { throw error }
            return nil
        }
        defer { system.close(fd) }
        return try? system.readToEnd(fd, limit: 1 << 12)
    }

    static func bounded(_ text: String) -> String {
        var bytes = Array(text.utf8.prefix(maxTextBytes))
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    fileprivate var trimmingSpaceAtEnd: String {
        var text = Substring(self)
        while let last = text.last, last == "\n" || last == " " { text.removeLast() }
        return String(text)
    }
}
