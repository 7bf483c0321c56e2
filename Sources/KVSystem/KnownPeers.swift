/// What kvd learnt of the processes that connected to it, so that a process's next connection
/// does not read its `cgroup` and `.flatpak-info` again (``PeerProcess/identify(_:system:known:)``).
///
/// Keyed by the number the kernel gives a process for the boot and never to another
/// (``SystemCalls/processIdentity(_:)``: not its pid, which is reused), and taken only while the
/// process still runs the program it ran then: every way into a sandbox (Flatpak's `bwrap`, snap's
/// `snap-confine`, a launcher's app scope) ends in the `exec` of the app, which changes it. So an
/// entry never lends a process the reach of a program it no longer runs; a process that moves
/// itself into a sandbox without an `exec` runs the code it ran before, which reached as far.
/// Credentials are never kept: they are read from the kernel for every connection.
///
/// Bounded (``capacity``): when full, the oldest half is dropped. On the system instance every
/// user's processes share it, so one user that connects from many processes costs others only
/// the reads it saves.
public struct KnownPeers: Sendable {
    /// What a confirmed peer said, beyond its credentials.
    public struct Entry: Sendable, Equatable {
        /// `/proc/PID/exe`'s target (bounded) when it was read.
        public var program: String
        public var unit: String?
        public var app: AppIdentity?

        public init(program: String, unit: String?, app: AppIdentity?) {
            self.program = program
            self.unit = unit
            self.app = app
        }
    }

    /// The most processes kept.
    public static let capacity = 1024

    private var entries: [UInt64: (entry: Entry, order: Int)] = [:]
    private var nextOrder = 0

    public init() {}

    /// How many processes are known.
    public var count: Int { entries.count }

    /// What the process numbered `identity` said when it last connected, if it still runs
    /// `program` (the target of its `/proc/PID/exe` now); nil otherwise.
    public subscript(identity: UInt64, running program: String) -> Entry? {
        guard let known = entries[identity], known.entry.program == program else { return nil }
        return known.entry
    }

    /// Keeps what the process numbered `identity` said (replacing what it said before), dropping
    /// the older half of what is kept when it is full.
    public mutating func note(_ identity: UInt64, _ entry: Entry) {
        if entries[identity] == nil, entries.count >= Self.capacity { dropOlderHalf() }
        entries[identity] = (entry, nextOrder)
        nextOrder += 1
    }

    private mutating func dropOlderHalf() {
        let orders = entries.values.map(\.order).sorted()
        let cut = orders[orders.count / 2]
        entries = entries.filter { $0.value.order >= cut }
    }
}
