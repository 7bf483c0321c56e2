/// What each cgroup's path says (its unit and app: ``PeerProcess/unit(inCgroup:)-([UInt8])``,
/// ``PeerProcess/app(inUnit:)``), kept by the cgroup's id, so that identifying a process costs
/// the id of its cgroup now (from its pidfd: ``SystemCalls/processCgroupID(_:)``) instead of its
/// `/proc/PID/cgroup`, which the kernel writes out hierarchy by hierarchy for every read.
///
/// A process moved to another cgroup has that cgroup's id from then on, so it is named by its new
/// unit. A path is kept for an id only once checked to be that id's: the unified hierarchy's
/// folder at that path, as kvd sees it, has that id as its inode (a process that moved between
/// the id and the read of its path is not kept). A cgroup renamed by who may write its parent
/// (its own user, in a subtree systemd delegated) keeps its old name here until evicted: its
/// unit and app are labels its own user chose anyway, and a sandbox is never told by them alone
/// (a sandboxed app's root is not kvd's). At most ``capacity`` ids are kept (past it, all are
/// dropped). Without the unified hierarchy mounted where kvd can see it, or before Linux 6.13
/// (no id from a pidfd), nothing is kept and each process's `cgroup` is read.
public struct CgroupNames: Sendable {
    /// A cgroup's unit (the last `.service` or `.scope` of its path) and the app its unit names.
    public struct Named: Sendable, Equatable {
        public var unit: String?
        public var app: AppIdentity?
    }

    /// Where the unified hierarchy is mounted, its root at that folder; nil: ids are not checked,
    /// so nothing is kept.
    let hierarchy: String?
    private(set) var names: [UInt64: Named] = [:]

    /// The most ids kept.
    public static let capacity = 1024

    /// Names kept for the unified hierarchy mounted at `hierarchy` (``unifiedHierarchy(_:)``).
    public init(hierarchy: String?) {
        self.hierarchy = hierarchy
    }

    /// The name kept for the cgroup `id`.
    func named(_ id: UInt64) -> Named? { names[id] }

    /// Keeps `named`, read from the cgroup path `path` (of a `/proc/PID/cgroup` text), for `id`
    /// if the hierarchy's folder at `path` is `id`'s.
    mutating func keep(_ named: Named, path: ArraySlice<UInt8>, id: UInt64, _ system: any SystemCalls) {
        guard let hierarchy, path.first == UInt8(ascii: "/") else { return }
        let folder = hierarchy + String(decoding: path, as: UTF8.self)
        guard (try? system.fileIdentity(folder, in: nil))?.inode == id else { return }
        if names.count >= Self.capacity { names.removeAll(keepingCapacity: true) }
        names[id] = named
    }

    /// Where the unified (v2) cgroup hierarchy is mounted with its root at the mount point, from
    /// a `/proc/self/mountinfo` text; nil when it is not, or its mount point is escaped.
    public static func unifiedHierarchy(_ mountinfo: [UInt8]) -> String? {
        let mount = Mountinfo.mounts(mountinfo).first {
            $0.type.elementsEqual("cgroup2".utf8) && $0.root.elementsEqual("/".utf8)
                && !$0.point.contains(UInt8(ascii: "\\"))
        }
        return mount.map { String(decoding: $0.point, as: UTF8.self) }.map { $0 == "/" ? "" : $0 }
    }

    /// Names kept for the unified hierarchy as `/proc/self/mountinfo` places it (``unifiedHierarchy(_:)``).
    public init(system: any SystemCalls) {
        let mountinfo = try? Mountinfo.read("/proc/self/mountinfo", system)
        self.init(hierarchy: mountinfo.flatMap { $0 }.flatMap(Self.unifiedHierarchy))
    }
}
