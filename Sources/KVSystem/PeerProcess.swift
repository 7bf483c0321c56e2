/// Who is on the other end of a connection: the process the kernel names when it connected, and
/// what the system says about it, read once, when kvd accepts the connection
/// (``identify(_:system:)``): what its confinement needs (whether it runs in a sandboxed
/// app: KVDaemon's `ClientConnection.reach`) and what history records of its changes (its
/// program: KVDaemon's `ClientConnection.writer()`).
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
    /// was read; false when it could not be (the process exited, no pidfd, or kvd's own user's
    /// process whose root kvd may not look into): then ``program``, ``command``, ``unit`` and
    /// ``app`` are nil, and nobody can tell whether it ran in a sandbox.
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
    /// The peer of the connected Unix socket `fd`: its credentials (which must be read), then its
    /// program (`/proc/PID/exe`, else `comm`), its cgroup's unit and its app (`/proc/PID/cgroup`,
    /// and Flatpak's `/.flatpak-info` in its root: ``sandboxFile(_:_:_:)``), each nil where it
    /// cannot be read, and all of them only if the process the connection's pidfd names still
    /// runs once they were read. A process whose root cannot be seen while its `/proc` folder can
    /// (its thread group's leader exited), or whose `/.flatpak-info` kvd may not open though it is
    /// kvd's own user's (it made itself not dumpable) or is not a regular file, is left
    /// unconfirmed: what decides its sandbox is unknown. Throws when kvd has no descriptor left to
    /// learn it (`EMFILE`, `ENFILE`: the caller refuses the connection, as one over its limit; a
    /// sandbox's file unopened for want of one is never read as no sandbox), or when the
    /// credentials cannot be read. Before Linux 6.5 the pidfd is of whichever process has the pid
    /// (`pidfd_open`).
    public static func identify(_ fd: Int32, system: any SystemCalls) throws(Errno) -> PeerProcess {
        let peer = PeerProcess(credentials: try system.peerCredentials(fd))
        guard let pidfd = try processDescriptor(fd, pid: peer.credentials.pid, system) else { return peer }
        defer { system.close(pidfd) }
        let folder = peer.folder
        var found = peer
        (found.program, found.command) = program(inFolder: folder, system)
        let cgroup = try readIfPresent(folder + "/cgroup", system)
        let info: [UInt8]?
        switch try sandboxFile(folder, peer.credentials, system) {
        case .read(let bytes): info = bytes
        case .absent: info = nil
        case .unknown: return peer
        }
        let unit = cgroup.flatMap { Self.unit(inCgroup: $0) }
        found.unit = unit.map(bounded)
        found.app = Self.flatpakApp(info) ?? unit.flatMap(Self.app(inUnit:))
        // Read after the process may have exited: only what the connection's own process said.
        guard system.processIsRunning(pidfd) else { return peer }
        found.isConfirmed = true
        return found
    }

    /// What Flatpak's `/.flatpak-info` in a process's root says.
    enum SandboxFile: Equatable {
        /// Its first ``maxFileBytes``.
        case read([UInt8])
        /// There is none, or kvd may not look (another user's process, whose `/proc` folder kvd
        /// cannot see or whose root it may not enter): no Flatpak, as far as kvd can tell.
        case absent
        /// What is there cannot be told: the process's root is gone while its folder is there (its
        /// leader exited), kvd's own user's process kvd may not look into, a `/.flatpak-info` that
        /// is not a regular file (a link, a FIFO, a device) or cannot be read.
        case unknown
    }

    /// `/.flatpak-info` of the process whose `/proc` folder is `folder`, found in its root
    /// (`folder/root`, entered once) and never beyond it: a symbolic link is not followed, and a
    /// FIFO or a device is never opened (``SystemCalls/openRegularFile(_:in:)``). Throws only
    /// `EMFILE` and `ENFILE`.
    static func sandboxFile(_ folder: String, _ credentials: PeerCredentials, _ system: any SystemCalls)
        throws(Errno) -> SandboxFile
    {
        let process: Int32
        do { process = try system.openDirectory(folder, in: nil) } catch {
            if error.isOutOfDescriptors { throw error }
            return .absent  // exited (its pidfd says so), or another user's kvd may not see
        }
        defer { system.close(process) }
        let root: Int32
        do { root = try system.openDirectory("root", in: process) } catch {
            if error.isOutOfDescriptors { throw error }
            if error == .permissionDenied, !(try isOwnUsers(folder, credentials, system)) { return .absent }
            return .unknown  // its folder is there but not its root: its leader exited
        }
        defer { system.close(root) }
        let file: Int32?
        do { file = try system.openRegularFile(".flatpak-info", in: root) } catch {
            if error.isOutOfDescriptors { throw error }
            if error == .noSuchFileOrDirectory { return .absent }
            if error == .permissionDenied, !(try isOwnUsers(folder, credentials, system)) { return .absent }
            return .unknown
        }
        guard let file else { return .unknown }
        defer { system.close(file) }
        return withUnsafeTemporaryAllocation(byteCount: maxFileBytes, alignment: 1) { buffer in
            (try? system.receive(file, into: buffer)).map { .read(Array(buffer[..<$0])) } ?? .unknown
        }
    }

    /// Whether the process of `folder` is one of kvd's own user's (`credentials`, and every uid of
    /// its `status`: real, effective, saved, file system), so that `EACCES` from its root means it
    /// made itself not dumpable; not so for a process of another user (root's, say) that
    /// connected from a thread that took kvd's user's uid, which kvd may not look into either. A
    /// `status` that cannot be read counts as kvd's own user's (its peer then stays unconfirmed).
    static func isOwnUsers(_ folder: String, _ credentials: PeerCredentials, _ system: any SystemCalls) throws(Errno)
        -> Bool
    {
        guard credentials.uid == system.userID else { return false }
        guard let status = try readIfPresent(folder + "/status", system) else { return true }
        return uids(inStatus: status).allSatisfy { $0 == system.userID }
    }

    /// `/proc/PID` of the peer's pid.
    var folder: String { "/proc/\(credentials.pid)" }

    /// A pidfd of the peer on `fd` whose pid is `pid`: of the connection's own process
    /// (`SO_PEERPIDFD`), or before Linux 6.5 of whichever has its pid now (`pidfd_open`, taken
    /// right after the credentials); nil when none can be had. Throws only `EMFILE`, `ENFILE`.
    static func processDescriptor(_ fd: Int32, pid: Int32, _ system: any SystemCalls) throws(Errno) -> Int32? {
        do { return try system.peerProcessDescriptor(fd) } catch {
            if error.isOutOfDescriptors { throw error }
            guard error == .protocolOptionUnknown else { return nil }
        }
        do { return try system.processDescriptor(pid) } catch {
            if error.isOutOfDescriptors { throw error }
            return nil
        }
    }

    /// The program of the process whose `/proc` folder is `folder`: the executable's path, else
    /// (unreadable: a process not dumpable, another user's) its command name; each nil when unknown.
    static func program(inFolder folder: String, _ system: any SystemCalls) -> (path: String?, command: String?) {
        if let path = (try? system.linkTarget(folder + "/exe")).flatMap({ $0 }) { return (bounded(path), nil) }
        let command = try? readOnce(folder + "/comm", system)
        return (nil, command.map { bounded(String(decoding: $0, as: UTF8.self).trimmingSpaceAtEnd) })
    }

    /// The most bytes read of a file of `/proc`: `comm` takes 16, `cgroup` a few hundred,
    /// `.flatpak-info` names its app in its first group.
    static let maxFileBytes = 4096

    /// The file at `path` (at most ``maxFileBytes``), nil when it cannot be read, but throws when
    /// kvd has no descriptor left to open it (`EMFILE`, `ENFILE`): then nothing may be concluded
    /// from its absence.
    static func readIfPresent(_ path: String, _ system: any SystemCalls) throws(Errno) -> [UInt8]? {
        do { return try readOnce(path, system) } catch {
            if error.isOutOfDescriptors { throw error }
            return nil
        }
    }

    /// The first ``maxFileBytes`` of the file at `path`, with one `read`: all of a `/proc` text
    /// that fits (the kernel makes it whole for each read from its start), the start of a
    /// longer file. Throws why it cannot be opened or read. C: `open`, `read`, `close`.
    static func readOnce(_ path: String, _ system: any SystemCalls) throws(Errno) -> [UInt8] {
        let fd = try system.openReadOnly(path)
        defer { system.close(fd) }
        return try withUnsafeTemporaryAllocation(byteCount: maxFileBytes, alignment: 1) { buffer in
            Result { () throws(SystemError) in Array(buffer[..<(try system.receive(fd, into: buffer))]) }
        }.mapError(\.errno).get()
    }

    static func bounded(_ text: String) -> String {
        guard text.utf8.count > maxTextBytes else { return text }
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
