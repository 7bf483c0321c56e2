/// Who is on the other end of a connection: the process the kernel names when it connected, and
/// what the system says about it, read once, when kvd accepts the connection
/// (``begin(_:system:ownRoot:cgroups:)``, and for a process in a root of its own, off kvd's loop,
/// ``RootLookup/finish(_:)``): what its confinement needs (whether it runs in a sandboxed
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
    /// What kvd knows of a connection's peer once it accepted it (``begin(_:system:ownRoot:cgroups:)``).
    public enum Identification: Sendable {
        /// All there is to know.
        case identified(PeerProcess)
        /// All but whether it runs in a Flatpak sandbox: its root is not kvd's, and what lies
        /// there is read by ``RootLookup/finish(_:)``, which waits as long as the file system of
        /// that root does (a local one, but which may wait on another: possibly forever).
        case lookingInRoot(RootLookup)

        /// Its credentials, as the kernel recorded them when it connected.
        public var credentials: PeerCredentials {
            switch self {
            case .identified(let peer): peer.credentials
            case .lookingInRoot(let lookup): lookup.credentials
            }
        }
    }

    /// The peer of the connected Unix socket `fd`, as far as kvd can tell without waiting on
    /// anything but `/proc`: its credentials (which must be read), then, from its `/proc`
    /// folder, its program (`exe`, else `comm`), whether its root is kvd's own (`ownRoot`,
    /// reached through the same mount; nil: unknown, as if not), and its cgroup's unit and app
    /// (``cgroupNamed(_:_:_:_:)``, through `cgroups`). A process in kvd's own root runs in no Flatpak sandbox and is
    /// identified now; a process in a root of its own (Flatpak's, a container's, a `chroot`) is
    /// identified but for the `/.flatpak-info` there (``Identification/lookingInRoot(_:)``). All of
    /// it is kept only if the process the connection's pidfd names still runs once it was read. A
    /// process whose root cannot be seen while its `/proc` folder can (its thread group's leader
    /// exited), or kvd's own user's process whose root kvd may not see (it made itself not
    /// dumpable), is left unconfirmed: what decides its sandbox is unknown. Throws when kvd has no
    /// descriptor left to learn it (`EMFILE`, `ENFILE`: the caller refuses the connection, as one
    /// over its limit), or when the credentials cannot be read. Before Linux 6.5 the pidfd is of
    /// whichever process has the pid (`pidfd_open`).
    public static func begin(
        _ fd: Int32, system: any SystemCalls, ownRoot: RootView?, cgroups: inout CgroupNames
    ) throws(Errno) -> Identification {
        var spent: [Int32] = []
        defer { for pidfd in spent { system.close(pidfd) } }
        return try begin(fd, system: system, ownRoot: ownRoot, cgroups: &cgroups, spent: &spent)
    }

    /// ``begin(_:system:ownRoot:cgroups:)``, leaving the pidfd it no longer needs once it
    /// identified the peer to the caller, in `spent`, to close when it likes (kvd's loop: once
    /// the pass's replies are out, so that no reply waits for it).
    public static func begin(
        _ fd: Int32, system: any SystemCalls, ownRoot: RootView?, cgroups: inout CgroupNames, spent: inout [Int32]
    ) throws(Errno) -> Identification {
        let peer = PeerProcess(credentials: try system.peerCredentials(fd))
        guard let pidfd = try processDescriptor(fd, pid: peer.credentials.pid, system) else {
            return .identified(peer)
        }
        var found = peer
        let (root, named): (Root, CgroupNames.Named?)
        do { (root, named) = try read(into: &found, pidfd, ownRoot, &cgroups, system) } catch {
            system.close(pidfd)
            throw error
        }
        guard let named else {  // it exited, or its sandbox cannot be told
            spent.append(pidfd)
            return .identified(peer)
        }
        (found.unit, found.app) = (named.unit, named.app)
        guard root == .another else {
            spent.append(pidfd)
            found.isConfirmed = true  // it ran once all of it was read
            return .identified(found)
        }
        let folder = peer.folder
        let opened: (fd: Int32, device: UInt64)?
        do { opened = try openRoot(folder, system) } catch {
            system.close(pidfd)
            throw error
        }
        guard let opened else {  // gone since: what it is cannot be told
            system.close(pidfd)
            return .identified(peer)
        }
        return .lookingInRoot(
            RootLookup(found: found, folder: folder, pidfd: pidfd, root: opened.fd, rootDevice: opened.device))
    }

    /// What `/proc` says of the process of `pidfd` whose credentials `peer` holds: its program
    /// into `peer`, what its root is, and its cgroup's unit and app (nil: it exited, or its root
    /// is unknown), in one call (``SystemCalls/peerProcessFacts(pid:pidfd:)``), else (something
    /// could not be read) one by one, to learn what. Throws only `EMFILE`, `ENFILE`.
    private static func read(
        into peer: inout PeerProcess, _ pidfd: Int32, _ ownRoot: RootView?, _ cgroups: inout CgroupNames,
        _ system: any SystemCalls
    ) throws(Errno) -> (Root, CgroupNames.Named?) {
        if let facts = system.peerProcessFacts(pid: peer.credentials.pid, pidfd: pidfd) {
            peer.program = bounded(facts.program)
            return (
                Root(facts.root, ownRoot: ownRoot),
                try cgroupNamed(facts.cgroupID, peer.folder, pidfd, &cgroups, system)
            )
        }
        (peer.program, peer.command) = program(inFolder: peer.folder, system)
        let root = rootOf(peer.folder, peer.credentials, ownRoot: ownRoot, system)
        return (root, root == .unknown ? nil : try cgroupNamed(peer.folder, pidfd, &cgroups, system))
    }

    /// ``begin(_:system:ownRoot:cgroups:)``, then in a root of the peer's own
    /// ``RootLookup/finish(_:)`` at once: blocks as long as that root's file system does. No
    /// cgroup's name is kept. For tests and tools, never kvd's loop.
    public static func identify(_ fd: Int32, system: any SystemCalls, ownRoot: RootView? = nil) throws(Errno)
        -> PeerProcess
    {
        var cgroups = CgroupNames(hierarchy: nil)
        return try identify(fd, system: system, ownRoot: ownRoot, cgroups: &cgroups)
    }

    /// ``identify(_:system:ownRoot:)`` keeping the names of the cgroups it sees in `cgroups`.
    public static func identify(
        _ fd: Int32, system: any SystemCalls, ownRoot: RootView? = nil, cgroups: inout CgroupNames
    ) throws(Errno) -> PeerProcess {
        switch try begin(fd, system: system, ownRoot: ownRoot, cgroups: &cgroups) {
        case .identified(let peer): return peer
        case .lookingInRoot(let lookup): return try lookup.finish(system)
        }
    }

    /// The unit and app of the cgroup the process of `pidfd` (whose `/proc` folder is
    /// `folder`) is in, nil once it exited: asked last, so that a name means everything read
    /// of its folder before was its own. The cgroup's id from the pidfd says both
    /// (``cgroupNamed(_:_:_:_:_:)-(UInt64?,_,_,_,_)``); before Linux 6.13 there is none. Throws
    /// only `EMFILE`, `ENFILE`.
    static func cgroupNamed(_ folder: String, _ pidfd: Int32, _ cgroups: inout CgroupNames, _ system: any SystemCalls)
        throws(Errno) -> CgroupNames.Named?
    {
        var id: UInt64?
        do { id = try system.processCgroupID(pidfd) } catch {
            if error == .noSuchProcess { return nil }
            id = nil  // before Linux 6.13
        }
        return try cgroupNamed(id, folder, pidfd, &cgroups, system)
    }

    /// The unit and app of the cgroup `id` (nil: unknown) that the process of `pidfd` (whose
    /// `/proc` folder is `folder`) was in when it was last seen running, nil once it exited. Its
    /// name is kept in `cgroups` (``CgroupNames``); otherwise (a cgroup not seen yet, or no id)
    /// its `cgroup` is read, then the pidfd asked whether it still runs. Throws only `EMFILE`,
    /// `ENFILE`.
    static func cgroupNamed(
        _ id: UInt64?, _ folder: @autoclosure () -> String, _ pidfd: Int32, _ cgroups: inout CgroupNames,
        _ system: any SystemCalls
    ) throws(Errno) -> CgroupNames.Named? {
        if let id, let named = cgroups.named(id) { return named }
        let path = try readIfPresent(folder() + "/cgroup", system).flatMap { cgroupPath($0[...]) }
        let unit = path.flatMap(Self.unit(inPath:))
        let named = CgroupNames.Named(unit: unit.map(bounded), app: unit.flatMap(Self.app(inUnit:)))
        if let id, let path { cgroups.keep(named, path: path, id: id, system) }
        return system.processIsRunning(pidfd) ? named : nil
    }

    /// Whether the process of the `/proc` folder `folder` is one of kvd's own user's
    /// (`credentials`, and every uid of its `status`: real, effective, saved, file system), so
    /// that `EACCES` from its root means it made itself not dumpable; not so for a process of
    /// another user (root's, say) that connected from a thread that took kvd's user's uid, which
    /// kvd may not look into either. A `status` that cannot be read (for want of a descriptor,
    /// too) counts as kvd's own user's (its peer then stays unconfirmed).
    static func isOwnUsers(_ folder: String, _ credentials: PeerCredentials, _ system: any SystemCalls) -> Bool {
        guard credentials.uid == system.userID else { return false }
        guard let status = try? readOnce(folder + "/status", system) else { return true }
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
