/// Identifying a peer whose root is not kvd's: what kvd's own root is (``RootView``), how a
/// peer's is told from it (``PeerProcess/rootOf(_:_:ownRoot:_:)``), and the look into a peer's
/// own root for Flatpak's `/.flatpak-info` (``PeerProcess/RootLookup``), which kvd's loop leaves
/// to a thread.

/// What a process sees as `/`: its root's device and inode, and the mount of its namespace it is
/// reached through (a process in another mount namespace, where other files can be mounted on
/// what is there, reaches the same folder through a mount of its own).
public struct RootView: Sendable, Equatable {
    public var root: FileIdentity

    public init(root: FileIdentity) {
        self.root = root
    }

    /// This process's own.
    public static func own(_ system: any SystemCalls) throws(Errno) -> RootView {
        RootView(root: try system.fileIdentity("/", in: nil))
    }
}

extension PeerProcess {
    /// What a process's root is to kvd.
    enum Root: Equatable {
        /// kvd's own, seen through kvd's mounts: the process sees kvd's `/` and what is mounted
        /// there, where there is no Flatpak's file.
        case own
        /// Another, or kvd's seen through mounts of its own: a sandbox's, a container's, a
        /// `chroot`'s, where `/.flatpak-info` may be.
        case another
        /// Another user's process whose root kvd may not see, as it may not see its files: no
        /// Flatpak, as far as kvd can tell.
        case unseen
        /// Cannot be told: its folder is there but not its root (its leader exited), or kvd's
        /// own user's process kvd may not look into.
        case unknown

        /// A root seen as `root` (its device, inode and mount): kvd's own (`ownRoot`; nil:
        /// unknown, so another) only when reached through kvd's own mount too.
        init(_ root: FileIdentity, ownRoot: RootView?) {
            self = root.mount != 0 && root == ownRoot?.root ? .own : .another
        }
    }

    /// The root of the process whose `/proc` folder is `folder`, told by its device, inode and
    /// mount alone, so that no file system is asked (``SystemCalls/fileIdentity(_:in:)``): kvd's
    /// own root reached through another mount namespace's mounts (where a file can be bound on
    /// `/.flatpak-info`) is another. A process whose folder kvd cannot see at all (another
    /// user's, under `hidepid` or `ProtectProc`; or one that exited, which its pidfd tells) is
    /// unseen.
    static func rootOf(_ folder: String, _ credentials: PeerCredentials, ownRoot: RootView?, _ system: any SystemCalls)
        -> Root
    {
        do { return Root(try system.fileIdentity(folder + "/root", in: nil), ownRoot: ownRoot) } catch {
            if error == .noSuchFileOrDirectory, (try? system.fileIdentity(folder, in: nil)) == nil { return .unseen }
            return error == .permissionDenied && !isOwnUsers(folder, credentials, system) ? .unseen : .unknown
        }
    }

    /// The part of identifying a peer that looks into its root (``Identification/lookingInRoot(_:)``):
    /// what was read at accept, and the descriptors of its process and of its root as it was at
    /// accept (``openRoot(_:_:)``: a process that changes its root after it connected is looked
    /// into where it was), which ``finish(_:)`` or ``abandon(_:)`` closes
    /// (exactly one of them, once).
    public struct RootLookup: Sendable {
        /// What was read at accept: all but its root's `/.flatpak-info`.
        let found: PeerProcess
        /// Its `/proc` folder.
        let folder: String
        let pidfd: Int32
        /// Its root, opened at accept.
        let root: Int32
        /// The device its root is on (``SystemCalls/fileIdentity(_:in:)``).
        let rootDevice: UInt64

        /// Its credentials, as the kernel recorded them when it connected.
        public var credentials: PeerCredentials { found.credentials }

        /// The peer, with what its root's `/.flatpak-info` says (``sandboxFile(in:_:_:)``), looked
        /// for only in a root on a local file system (``rootIsLocal(_:device:_:)``: no FUSE
        /// daemon or network server asked, which could make the look wait without end, and kvd
        /// with it, unkillable). Closes the descriptors. Throws only when kvd has no descriptor
        /// left to open the file (`EMFILE`, `ENFILE`): nothing may be concluded.
        public func finish(_ system: any SystemCalls) throws(Errno) -> PeerProcess {
            let file: SandboxFile
            do {
                file =
                    try PeerProcess.rootIsLocal(folder, device: rootDevice, system)
                    ? sandboxFile(in: root, folder, found.credentials, system) : .unknown
            } catch {
                abandon(system)
                throw error
            }
            switch file {
            case .read(let bytes): return finish(sandboxFile: bytes, system)
            case .absent: return finish(sandboxFile: nil, system)
            case .unknown:
                abandon(system)
                return PeerProcess(credentials: found.credentials)
            }
        }

        /// The peer with `info` (nil: no Flatpak), confirmed if its process still runs. Closes
        /// the descriptors.
        func finish(sandboxFile info: [UInt8]?, _ system: any SystemCalls) -> PeerProcess {
            defer { abandon(system) }
            var peer = found
            peer.app = PeerProcess.flatpakApp(info) ?? found.app
            return PeerProcess.confirmed(peer, else: PeerProcess(credentials: found.credentials), pidfd, system)
        }

        /// Closes the descriptors: the lookup is given up, or done.
        public func abandon(_ system: any SystemCalls) {
            system.close(root)
            system.close(pidfd)
        }
    }

    /// The root of the process whose `/proc` folder is `folder`, opened (to find files in) and
    /// its device; nil when it cannot be (it is gone, kvd may not). Asks no file system but
    /// through `/proc`. Throws only `EMFILE`, `ENFILE`.
    static func openRoot(_ folder: String, _ system: any SystemCalls) throws(Errno) -> (fd: Int32, device: UInt64)? {
        let root: Int32
        do { root = try system.openDirectory(folder + "/root", in: nil) } catch {
            if error.isOutOfDescriptors { throw error }
            return nil
        }
        guard let identity = try? system.fileIdentity("", in: root) else {
            system.close(root)
            return nil
        }
        return (root, identity.device)
    }

    /// `found`, confirmed, if the process of `pidfd` still runs; else `unknown` (read after the
    /// process may have exited: only what the connection's own process said is kept).
    static func confirmed(_ found: PeerProcess, else unknown: PeerProcess, _ pidfd: Int32, _ system: any SystemCalls)
        -> PeerProcess
    {
        guard system.processIsRunning(pidfd) else { return unknown }
        var peer = found
        peer.isConfirmed = true
        return peer
    }

    /// What Flatpak's `/.flatpak-info` in a process's root says.
    enum SandboxFile: Equatable {
        /// Its first ``maxFileBytes``.
        case read([UInt8])
        /// There is none, or kvd may not look (another user's process, whose root it may not
        /// enter): no Flatpak, as far as kvd can tell.
        case absent
        /// What is there cannot be told: kvd's own user's process kvd may not look into, a
        /// `/.flatpak-info` that is not a regular file (a link, a FIFO, a device) or cannot be
        /// read, a root on a file system that is not local.
        case unknown
    }

    /// `/.flatpak-info` in `root`, the root of the process whose `/proc` folder is `folder`,
    /// never beyond it: a symbolic link is not followed, and a FIFO or a device is never opened
    /// (``SystemCalls/openRegularFile(_:in:)``). Waits as long as the root's file system does.
    /// Throws only `EMFILE` and `ENFILE`.
    static func sandboxFile(
        in root: Int32, _ folder: String, _ credentials: PeerCredentials, _ system: any SystemCalls
    ) throws(Errno) -> SandboxFile {
        let file: Int32?
        do { file = try system.openRegularFile(".flatpak-info", in: root) } catch {
            if error.isOutOfDescriptors { throw error }
            if error == .noSuchFileOrDirectory { return .absent }
            if error == .permissionDenied, !isOwnUsers(folder, credentials, system) { return .absent }
            return .unknown
        }
        guard let file else { return .unknown }
        defer { system.close(file) }
        return withUnsafeTemporaryAllocation(byteCount: maxFileBytes, alignment: 1) { buffer in
            (try? system.receive(file, into: buffer)).map { .read(Array(buffer[..<$0])) } ?? .unknown
        }
    }

    /// The file systems whose lookups no daemon or server answers (kvd may look into a root on
    /// one without waiting on anyone): a Flatpak sandbox's root is `tmpfs`, a snap's `squashfs`,
    /// a container's `overlay` or a disk's.
    static let localFileSystems: Set<String> = [
        "tmpfs", "ramfs", "overlay", "squashfs", "erofs", "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs",
        "bcachefs", "jfs", "nilfs2", "vfat", "exfat", "ntfs3", "iso9660", "udf",
    ]

    /// Whether the file system of the device `device` (a root's), as the process of the `/proc`
    /// folder `folder` has it mounted (its `mountinfo`), is one of ``localFileSystems``; false
    /// when it cannot be told.
    static func rootIsLocal(_ folder: String, device: UInt64, _ system: any SystemCalls) throws(Errno) -> Bool {
        guard let text = try Mountinfo.read(folder + "/mountinfo", system),
            let type = fileSystemType(ofDevice: device, inMountinfo: text)
        else { return false }
        return localFileSystems.contains(type)
    }
}
