import KVProtocol
import KVStorage
import KVSystem

/// Who is connected, and what the loop keeps per connection and per user: the open connections
/// (by descriptor and by id), the watchers among them, the replies still being made piece by
/// piece, the connections to settle at the end of the pass, the system instance's per-uid
/// connection counts, whom to shed when clients hold too much, and the spare
/// descriptor that lets kvd refuse a connection when it is out of descriptors.
///
/// The table keeps the books and the server acts on them (handles calls, sends, closes). A
/// connection is in the table from ``add(_:)`` to ``remove(_:)``, and its uid is counted for that
/// time only, so a connection refused or failed before ``add(_:)`` costs its user nothing. Every
/// system call goes through ``system``. Loop thread only.
final class ConnectionTable {
    /// What all clients hold, against ``Server/Limits/maxClientMemory``.
    let memory: ClientMemory
    /// The system instance's rules for its peers; nil in a user's kvd, where every peer is its user.
    let policy: DaemonOptions.SystemPolicy?
    private let system: any SystemCalls
    private let log: Logger
    /// Open connections by descriptor (what an event names).
    @exclusivity(unchecked) private(set) var connections: [Int32: ClientConnection] = [:]
    /// Open connections by id (what a finished commit or a turn names).
    @exclusivity(unchecked) private(set) var byID: [Int: ClientConnection] = [:]
    /// The connections streaming a `Watch` or `Mirror`, by id: a change looks at these only.
    @exclusivity(unchecked) private(set) var watchers: [Int: ClientConnection] = [:]
    /// Replies still being made piece by piece (``ReplyStream``: a watcher's first replies, a
    /// `Backup`), by connection id; dropped with their connection.
    @exclusivity(unchecked) private(set) var streams: [Int: ReplyStream] = [:]
    /// One buffer for every socket read (the loop reads one socket at a time).
    @exclusivity(unchecked) private var readBuffer: [UInt8]
    /// The id the next connection gets.
    private(set) var nextID = 0
    /// The system instance: open connections per peer uid.
    private(set) var perUID: [UInt32: Int] = [:]
    /// Connections handled this pass, to be settled at its end (replies sent together).
    @exclusivity(unchecked) private var unsettled: [ClientConnection] = []
    /// A descriptor kept open to be given up when the process runs out of descriptors, so an
    /// excess connection can be accepted and closed instead of spinning on `EMFILE`.
    private var spareFD: Int32 = -1
    private var refusedSinceLog = 0
    private var lastRefusalLog: ContinuousClock.Instant?

    init(
        memory: ClientMemory, policy: DaemonOptions.SystemPolicy?, readChunk: Int, system: any SystemCalls, log: Logger
    ) {
        self.memory = memory
        self.policy = policy
        self.system = system
        self.log = log
        self.readBuffer = [UInt8](repeating: 0, count: readChunk)
        spareFD = (try? system.openReadOnly("/dev/null")) ?? -1
    }

    deinit {
        for connection in connections.values { system.close(connection.fd) }
        if spareFD >= 0 { system.close(spareFD) }
    }

    // MARK: Joining and leaving

    /// The system instance: learns the new connection's peer from the kernel (`SO_PEERCRED`,
    /// `SO_PEERGROUPS`, as they were when it connected), fixes whether it may write (root, or
    /// a member of the admin group; anyone else's calls may be at most
    /// ``DaemonOptions/SystemPolicy/maxReaderMessageBytes``), and checks its uid's cap. Returns
    /// false when the connection is refused (the caller closes it). A user's kvd admits
    /// everyone: only its user can reach its socket. The uid is counted at ``add(_:)``.
    func admit(_ connection: ClientConnection, credentials: Result<PeerCredentials, Errno>) -> Bool {
        guard let policy else { return true }
        let peer: PeerCredentials
        do {
            peer = try credentials.get()
        } catch {
            noteRefusal("cannot tell who connected (getsockopt SO_PEERCRED: \(error))")
            return false
        }
        let open = perUID[peer.uid, default: 0]
        guard open < policy.maxConnectionsPerUID else {
            noteRefusal(
                "uid \(peer.uid) already holds \(open) connections, the most one user may (--max-connections-per-uid)")
            return false
        }
        connection.identify(
            uid: peer.uid, gids: Set(peer.groups + [peer.gid]),
            mayWrite: peer.uid == 0 || (system.groupID(named: policy.adminGroup).map(peer.isMember(of:)) ?? false),
            readerLimit: DaemonOptions.SystemPolicy.maxReaderMessageBytes)
        log.log(
            .debug,
            "client \(connection.id) is uid \(peer.uid) (pid \(peer.pid)), \(connection.mayWrite ? "may write" : "reads only")"
        )
        return true
    }

    /// Enters an admitted connection (counted against its uid); the next one gets a new id.
    func add(_ connection: ClientConnection) {
        connections[connection.fd] = connection
        byID[connection.id] = connection
        if let uid = connection.uid { perUID[uid, default: 0] += 1 }
        nextID = max(nextID, connection.id + 1)
    }

    /// Makes `connection` a watcher: it hears of changes from then on.
    func addWatcher(_ connection: ClientConnection) {
        watchers[connection.id] = connection
    }

    /// Forgets a closed connection: its entries, its uid's count, its stream (whose kept replies
    /// are given back to ``memory``).
    func remove(_ connection: ClientConnection) {
        if let uid = connection.uid, let open = perUID[uid] {
            perUID[uid] = open > 1 ? open - 1 : nil
        }
        connections[connection.fd] = nil
        byID[connection.id] = nil
        watchers[connection.id] = nil
        streams.removeValue(forKey: connection.id)?.drop(memory: memory)
    }

    /// Out of descriptors: accepts with the spare one and closes at once, so the client sees a
    /// closed connection instead of hanging, and the loop does not spin on a listener that
    /// stays readable.
    func refuseOne(from listener: Int32) {
        noteRefusal("out of file descriptors with \(connections.count) clients connected")
        guard spareFD >= 0 else { return }
        system.close(spareFD)
        if let fd = try? system.acceptWaiting(listener) { system.close(fd) }
        spareFD = (try? system.openReadOnly("/dev/null")) ?? -1
    }

    /// Logs a refused connection and why: at most every 10 s, with the count refused since.
    func noteRefusal(_ why: @autoclosure () -> String) {
        refusedSinceLog += 1
        guard lastRefusalLog.map({ ContinuousClock.now - $0 >= .seconds(10) }) ?? true else { return }
        log.warning("\(why()): refused \(refusedSinceLog) new connection(s)")
        refusedSinceLog = 0
        lastRefusalLog = .now
    }

    // MARK: Reading and streams

    /// Reads at most `room` bytes (and one read chunk) of what the socket of `connection` holds
    /// into its framer: the count read (0: the peer closed its side), nil when nothing is there
    /// now. Throws when reading fails.
    func readInput(_ connection: ClientConnection, upTo room: Int) throws(SystemError) -> Int? {
        let count = try readBuffer.withUnsafeMutableBytes { raw in
            Result { () throws(SystemError) in
                try system.readAvailable(
                    connection.fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<min(raw.count, room)]))
            }
        }.get()
        guard let count, count > 0 else { return count }
        readBuffer.withUnsafeBytes { connection.receive(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        return count
    }

    /// Makes `stream` the reply `connection` gets piece by piece.
    func startStream(_ stream: ReplyStream, for connection: ClientConnection) {
        streams[connection.id] = stream
    }

    /// Forgets the stream of connection `id`, made to its end (nothing kept is given back).
    func endStream(_ id: Int) {
        streams[id] = nil
    }

    /// Drops the stream of connection `id`, gone: its kept replies are given back to ``memory``.
    func dropStream(_ id: Int) {
        streams.removeValue(forKey: id)?.drop(memory: memory)
    }

    // MARK: Settling

    /// Queues `connection` to be settled at the end of the pass, once however often it is asked.
    func queueToSettle(_ connection: ClientConnection) {
        guard connection.queueToSettle() else { return }
        unsettled.append(connection)
    }

    /// Whether connections are queued to be settled.
    var hasUnsettled: Bool { !unsettled.isEmpty }

    /// The connections queued to be settled, each marked as no longer queued; empty when none.
    func takeUnsettled() -> [ClientConnection] {
        let batch = unsettled
        unsettled = []
        for connection in batch { connection.unqueueFromSettling() }
        return batch
    }

    // MARK: Shedding

    /// The connection to disconnect first when clients hold too much. A user's kvd: the one
    /// holding the most. The system instance: one of the uid whose non-admin connections
    /// together hold the most, its own largest that is not a `Mirror` if it has one, so one
    /// user's many connections never cost another user their `Mirror` (and with it their locks)
    /// nor an admin their call; an admin's connection only when the non-admins hold nothing.
    func sheddingCandidate() -> ClientConnection? {
        guard policy != nil else { return connections.values.max { $0.heldBytes < $1.heldBytes } }
        var held: [UInt32: Int] = [:]
        for connection in connections.values where !connection.mayWrite {
            if let uid = connection.uid { held[uid, default: 0] += connection.heldBytes }
        }
        guard let (uid, bytes) = held.max(by: { $0.value < $1.value }), bytes > 0 else {
            return connections.values.max { $0.heldBytes < $1.heldBytes }
        }
        return connections.values.filter { $0.uid == uid && !$0.mayWrite }.max {
            ($0.isMirror ? 0 : 1, $0.heldBytes) < ($1.isMirror ? 0 : 1, $1.heldBytes)
        }
    }
}
