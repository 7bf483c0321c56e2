import KVProtocol
import KVSystem
import KVValues

/// One client's state on the event loop thread (never touched from another thread).
///
/// Calls are handled one at a time in arrival order, so replies leave in call order: while a
/// write waits for its durable commit, later pipelined calls wait in ``framer``.
///
/// Memory: what the connection holds (its input buffer, its own unsent replies) is charged to
/// the server's ``ClientMemory`` by ``recharge()``; a large watch reply is a ``SharedReply``,
/// held once for every watcher that has yet to send it.
final class ClientConnection {
    let id: Int
    let fd: Int32
    /// The calls received and not yet handled (read through ``receive(_:)``, ``nextMessage()``,
    /// ``compactInput()``).
    @exclusivity(unchecked) private(set) var framer = MessageFramer()
    /// Reply bytes not yet accepted by the socket, from ``outputStart`` on; they go out after
    /// everything in ``queue``.
    @exclusivity(unchecked) private(set) var output: [UInt8] = []
    @exclusivity(unchecked) private var outputStart = 0
    /// Replies queued before ``output``: shared watch replies, and own bytes that were pending
    /// when one was queued. The first is sent from ``queueOffset`` on.
    @exclusivity(unchecked) private var queue: [Piece] = []
    @exclusivity(unchecked) private var queueOffset = 0
    /// Bytes in ``queue``, the sent part of the first piece included.
    @exclusivity(unchecked) private var queuedBytes = 0
    /// Capacity of the own pieces in ``queue``.
    @exclusivity(unchecked) private var queuedOwnCapacity = 0
    private let memory: ClientMemory
    private let system: any SystemCalls
    /// What ``recharge()`` last charged to ``memory``.
    @exclusivity(unchecked) private var charged = 0
    /// What the connection does with its calls now; changed only by the transitions below
    /// ("Phases"), each named for what moves it.
    @exclusivity(unchecked) private(set) var phase: Phase = .serving
    /// How much of the peer is still there.
    @exclusivity(unchecked) private(set) var peer: Peer = .connected
    /// Bookkeeping, not state: queued to be settled (flushed, closed or re-registered) at the
    /// end of the loop's pass (``ConnectionTable/queueToSettle(_:)``).
    @exclusivity(unchecked) private(set) var needsSettling = false
    /// Bookkeeping, not state: the interest registered with epoll, to skip needless `epoll_ctl`.
    @exclusivity(unchecked) private(set) var registered: (readable: Bool, writable: Bool) = (true, false)

    /// What a connection does with its calls. One value at a time, so no invalid mix (a watcher
    /// awaiting a commit, a closed connection waiting for its turn) can be written.
    enum Phase: Equatable {
        /// Handles its calls as they come.
        case serving
        /// Had calls left after its turn; handles them when the loop gives it the next one.
        case waitingForTurn
        /// A write of this client is being committed; later calls wait for its reply.
        case awaitingCommit
        /// Streams the changes of a `Watch`; handles no more calls.
        case watching(Watch)
        /// Sends the pieces of a long reply (`Backup`'s, see ``ReplyStream``) as the client
        /// reads them; handles its next calls after the last.
        case streaming
        /// Sends what it has, then closes (after a fatal protocol error); reads nothing more.
        case closingAfterFlush
        /// Closed by the server; a queued settle or turn skips it.
        case closed
    }

    /// What a `Watch` streams: the changes of `domain` (of `key` only, if given) after `since`;
    /// with no domain, a `Mirror` (the system instance): every commit of every domain; with a
    /// `prefix`, a `WatchAll`: the changes of every domain (not the internal ones) whose name
    /// starts with it.
    struct Watch: Equatable {
        var domain: Domain?
        var key: Key?
        var since: Int64
        /// A `WatchAll`'s domain prefix ("" for every domain); nil for a `Watch` or `Mirror`.
        var prefix: String? = nil
        /// A sandboxed connection's: what it may read (taken again when a grant changes); nil
        /// for a connection that reaches everything.
        var access: SandboxAccess? = nil

        /// A `Mirror`: neither a domain nor a prefix.
        var isMirror: Bool { domain == nil && prefix == nil }

        /// Whether the watch follows `domain`'s changes (a `Watch` of it, or a `WatchAll` over it)
        /// and may read it.
        func follows(_ domain: Domain) -> Bool {
            if let access, !access.mayRead(domain) { return false }
            if let prefix { return !domain.isInternal && domain.name.hasPrefix(prefix) }
            return self.domain == domain
        }

        /// False for a sandboxed `Watch` whose domain it may no longer read (a grant taken back).
        var followsItsDomain: Bool {
            guard let access, let domain else { return true }
            return access.mayRead(domain)
        }
    }

    /// How much of the peer is still there.
    enum Peer: Equatable {
        /// Both directions open.
        case connected
        /// The peer closed its sending side: no more calls will come; replies still go out.
        case doneSending
        /// Both directions are gone: replies are dropped, and the socket is no longer polled.
        case hungUp
    }

    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }

    /// Whether the connection streams a `Mirror` (a user's kvd following the system instance).
    var isMirror: Bool {
        if case .watching(let watch) = phase { return watch.isMirror }
        return false
    }

    /// Whether the connection handles its calls now (checked for every call).
    var isServing: Bool {
        if case .serving = phase { return true }
        return false
    }

    /// Nothing is left to send, and no call will come or is still to be answered: the server
    /// closes the connection. A watcher that closed its sending side is not finished: it still
    /// reads, until it hangs up.
    var isFinished: Bool {
        guard pendingOutput == 0 else { return false }
        switch phase {
        case .closingAfterFlush: return true
        case .serving: return peer != .connected
        case .watching, .streaming: return peer == .hungUp
        case .waitingForTurn, .awaitingCommit, .closed: return false
        }
    }

    private enum Piece {
        case own([UInt8])
        case shared(SharedReply)

        var bytes: [UInt8] {
            switch self {
            case .own(let bytes): bytes
            case .shared(let reply): reply.bytes
            }
        }
    }

    /// The peer's user id, from the kernel at accept (the system instance only).
    private(set) var uid: UInt32?
    /// The system instance: the peer's groups as the kernel said at accept (its gid included).
    private(set) var gids: Set<UInt32> = []
    /// The dconf profile a mirror asked for (its user's `DCONF_PROFILE`; nil: `user`).
    private(set) var dconfProfile: String?

    /// Records the dconf profile a mirror names (``DropInPeer/dconfProfile``).
    func chooseDconfProfile(_ profile: String?) { dconfProfile = profile }
    /// Whether the peer may change anything: fixed at accept, never looked up again.
    @exclusivity(unchecked) private(set) var mayWrite = true
    /// Who the peer is, as history records the changes it asks for (``writer()``).
    @exclusivity(unchecked) private var writerRecord: Writer?
    /// How far the peer reaches (a sandboxed app: ``SandboxAccess``), fixed at accept by
    /// ``identifyPeer(_:recordsWriter:confines:)``; until then, it reaches only the public domains.
    @exclusivity(unchecked) private(set) var reach: PeerReach = .sandboxed(
        app: nil, label: "a process not yet identified")
    /// How many calls of a sandboxed peer were refused (for the log's rate).
    @exclusivity(unchecked) private var refusals = 0

    /// Takes who the peer is, read at accept from the kernel and `/proc`
    /// (``PeerProcess/begin(_:system:ownRoot:cgroups:)``: the process that connected, never another that took
    /// its pid; nil when even its credentials could not be read): its ``reach``, kept for the
    /// connection's life, and, with `recordsWriter` (``DaemonOptions/recordsWriters``, off only
    /// for the benchmark's comparison), what ``writer()`` returns. Without `confines` (the
    /// benchmark's comparison too) it reaches everything.
    func identifyPeer(_ peer: PeerProcess?, recordsWriter: Bool, confines: Bool = true) {
        reach = confines ? PeerReach(peer) : .everything
        writerRecord = recordsWriter ? peer.map(Writer.init(peer:)) : nil
    }

    /// Who the peer is, as history records the changes it asks for, as read at accept, for the
    /// connection's life. Nil when its credentials could not be read, or writers are not recorded.
    func writer() -> Writer? { writerRecord }

    /// Counts one more refused call; returns how many were.
    func noteRefusal() -> Int {
        refusals += 1
        return refusals
    }

    init(id: Int, fd: Int32, memory: ClientMemory, system: any SystemCalls) {
        self.id = id
        self.fd = fd
        self.memory = memory
        self.system = system
    }

    /// The system instance: who the peer is, as the kernel said at accept, and whether it may
    /// write; a peer that may only read sends messages of at most `readerLimit` bytes.
    func identify(uid: UInt32, gids: Set<UInt32>, mayWrite: Bool, readerLimit: Int) {
        self.uid = uid
        self.gids = gids
        self.mayWrite = mayWrite
        if !mayWrite { framer = MessageFramer(limit: readerLimit) }
    }

    /// Appends bytes read from the socket to the calls waiting.
    func receive(_ bytes: UnsafeRawBufferPointer) { framer.append(bytes) }
    /// The next whole call received, nil when none is; throws when it is over the framer's limit.
    func nextMessage() throws(VarlinkError) -> ArraySlice<UInt8>? { try framer.next() }
    /// Lets go of the handled calls' bytes (and a large message's buffer).
    func compactInput() { framer.compact() }

    // MARK: Phases

    /// Its turn is used up with calls left: it waits for the next one (``Turns``).
    func waitForTurn() { phase = .waitingForTurn }
    /// The loop gives it its next turn.
    func takeTurn() { phase = .serving }
    /// A write of its is being committed: its later calls wait (``CommitPipeline/submit(_:for:oneway:)``).
    func awaitCommit() { phase = .awaitingCommit }
    /// The commit it awaited finished: it handles its calls again
    /// (``CommitPipeline/finish(_:of:)``).
    func commitFinished() {
        assert(phase == .awaitingCommit, "a commit finished for client \(id), which awaited none")
        phase = .serving
    }
    /// It streams `watch` from now on.
    func startWatching(_ watch: Watch) { phase = .watching(watch) }
    /// It sends the pieces of a long reply before its next calls.
    func startStreaming() { phase = .streaming }
    /// The long reply's last piece is made: it handles its next calls (a watcher goes on watching).
    func streamEnded() { if phase == .streaming { phase = .serving } }
    /// A fatal protocol error: it sends what it has, then closes.
    func closeAfterFlush() { phase = .closingAfterFlush }
    /// The server closed it.
    func markClosed() { phase = .closed }

    /// The peer closed its sending side.
    func peerDoneSending() { peer = .doneSending }
    /// Both directions are gone: unsent replies are dropped, and new ones are not queued.
    func peerHungUp() {
        peer = .hungUp
        dropOutput()
    }

    /// Marks it queued to be settled; false when it already is (or is closed).
    func queueToSettle() -> Bool {
        guard !isClosed, !needsSettling else { return false }
        needsSettling = true
        return true
    }
    /// Taken from the settle queue.
    func unqueueFromSettling() { needsSettling = false }
    /// Notes the epoll interest registered for it.
    func noteRegistered(_ interest: (readable: Bool, writable: Bool)) { registered = interest }

    /// Reply bytes not yet accepted by the socket.
    var pendingOutput: Int { queuedBytes - queueOffset + output.count - outputStart }

    func send(_ reply: VarlinkReply) {
        guard peer != .hungUp else { return }
        reply.encode(into: &output)
    }

    /// Queues a reply that `write` appends (whole message, NUL included).
    func send(writing write: (inout [UInt8]) -> Void) {
        guard peer != .hungUp else { return }
        write(&output)
    }

    /// Queues a reply encoded once for several watchers: a small one is copied into the
    /// output, a large one is held by reference (charged to ``memory`` while anyone holds it).
    func send(shared reply: SharedReply) {
        guard peer != .hungUp else { return }
        guard reply.bytes.count >= SharedReply.minimumShared else { return output.append(contentsOf: reply.bytes) }
        if outputStart < output.count {
            let own = Array(output[outputStart...])
            queue.append(.own(own))
            queuedBytes += own.count
            queuedOwnCapacity += own.capacity
        }
        output.removeAll(keepingCapacity: output.capacity <= 1 << 16)
        outputStart = 0
        reply.hold(memory)
        queue.append(.shared(reply))
        queuedBytes += reply.bytes.count
    }

    /// Forgets unsent replies (nobody is left to read them).
    func dropOutput() {
        while !queue.isEmpty { popPiece() }
        output = []
        outputStart = 0
    }

    /// Charges what the connection holds now to ``memory`` (its input buffer, its own unsent
    /// replies; shared replies are charged once, by themselves).
    func recharge() {
        let now = framer.retainedByteCount + output.capacity + queuedOwnCapacity
        memory.add(now - charged)
        charged = now
    }

    /// Gives back everything the connection holds (it is being closed).
    func releaseMemory() {
        dropOutput()
        memory.add(-charged)
        charged = 0
    }

    /// Bytes that closing this connection would let go of at most: its input buffer and every
    /// unsent reply, shared ones counted in full.
    var heldBytes: Int { framer.retainedByteCount + output.capacity + queuedOwnCapacity + queuedSharedBytes }

    /// "16.0 MiB: 16.0 MiB of input (an unfinished message), 0 B of unsent replies".
    var memoryDescription: String {
        let input = framer.retainedByteCount
        let unfinished = framer.pendingByteCount > 0 ? " (an unfinished message or queued calls)" : ""
        return "\(ClientMemory.text(heldBytes)): \(ClientMemory.text(input)) of input\(unfinished), "
            + "\(ClientMemory.text(pendingOutput)) of unsent replies"
    }

    private var queuedSharedBytes: Int {
        queue.reduce(0) { sum, piece in
            if case .shared(let reply) = piece { return sum + reply.bytes.count }
            return sum
        }
    }

    /// Writes as much pending output as the socket takes. Throws when the peer is gone.
    func flush() throws(SystemError) {
        while let first = queue.first {
            let bytes = first.bytes
            queueOffset += try send(bytes, from: queueOffset)
            guard queueOffset == bytes.count else { return }
            popPiece()
        }
        outputStart += try send(output, from: outputStart)
        if outputStart == output.count {
            output.removeAll(keepingCapacity: output.capacity <= 1 << 16)
            outputStart = 0
        } else if outputStart > 1 << 20 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
    }

    /// Sends `bytes` from `start` on until the socket is full; returns the count sent.
    private func send(_ bytes: [UInt8], from start: Int) throws(SystemError) -> Int {
        var sent = 0
        while start + sent < bytes.count {
            let offset = start + sent
            let written = try bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in
                    try system.sendAvailable(fd, UnsafeRawBufferPointer(rebasing: raw[offset...]))
                }
            }.get()
            if written == 0 { break }
            sent += written
        }
        return sent
    }

    /// Removes the first queued piece, sent or dropped.
    private func popPiece() {
        let first = queue.removeFirst()
        queuedBytes -= first.bytes.count
        queueOffset = 0
        switch first {
        case .own(let bytes): queuedOwnCapacity -= bytes.capacity
        case .shared(let reply): reply.release(memory)
        }
    }
}
