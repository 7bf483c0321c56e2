import KVFleet
import KVProtocol
import KVStorage
import KVSystem

/// The varlink server: one event-loop thread serving every client, reads from memory, writes
/// group-committed once per pass of the loop.
///
/// Reads are answered at once from memory. The writes a pass of the loop receives are queued
/// in the store and made durable together, with one sync, on the loop thread at the end of
/// the pass (as Redis does with `appendfsync always`: no thread hand-off; the sync is the only
/// time the loop blocks, and a compaction runs on the store's own thread). A write's reply is
/// sent once it is durable, and the client's later calls wait until then, so replies keep
/// call order. A slow or stuck client only ever delays itself: sockets are non-blocking,
/// and a client whose unread replies pass ``Limits/maxPendingOutput`` is not read from until it
/// catches up (a watcher that falls that far behind is disconnected). A client that pipelines
/// calls gets a turn of at most ``Limits/callsPerTurn`` calls or ``Limits/outputPerTurn`` bytes of
/// replies, then waits behind the others, so no pipeline holds up the loop; on the system
/// instance the turn is the uid's, shared by all its connections, so no user holds it up with
/// many connections either.
///
/// Every system call goes through the ``SystemCalls`` the server is given, so tests can run
/// this loop over socket pairs and inject `EINTR`, `EAGAIN`, `EMFILE`, `ECONNRESET` or short
/// writes. The loop's work is split by role: this file (the loop), `Server+Connections.swift`
/// (accepting, reading, writing, closing), `Server+Turns.swift` (fairness, settling, memory),
/// `Server+Calls.swift` (calls, commits, the watch fan-out), `Server+Lifecycle.swift` (idle
/// exit, shutdown, timers). Loop thread only, except ``Poller/wake()``.
///
/// Memory: a client's input is read only while it has room (see `inputRoom`): while its calls
/// cannot be handled (they wait for a commit or their turn, or follow a `Watch`), it holds at
/// most one read chunk of input; otherwise one message being received, up to the limit. What
/// all clients hold (input buffers, unsent replies; a watch reply is encoded once and shared by
/// the watchers that have yet to send it) is counted against ``Limits/maxClientMemory``; past
/// it, the clients holding the most are disconnected, each with a warning, and the rest served
/// (on the system instance: connections of the user who holds the most, never another user's
/// nor an admin's; see ``shedClients()``).
public final class Server {
    public struct Limits: Sendable {
        public var maxPendingOutput = 32 << 20
        /// The system instance: a reader's (a user who may not write) unread replies past which
        /// its calls wait, so a user pipelining calls it never reads holds little, and no shed
        /// and refill of large buffers stalls the others. A `Mirror` or `Watch` is held to
        /// ``maxPendingOutput`` as any watcher.
        public var readerPendingOutput = 1 << 20
        public var readChunk = 64 << 10
        /// Most bytes all clients together may hold (``ClientMemory``).
        public var maxClientMemory = 256 << 20
        /// Most calls of one client handled before the others get a turn.
        public var callsPerTurn = 64
        /// Most reply bytes produced for one client before the others get a turn.
        public var outputPerTurn = 256 << 10
        public var shutdownGrace: Duration = .seconds(10)
        public init() {}
    }

    let store: Store
    let handler: RequestHandler
    /// Replies to hot `Get` calls, kept while nothing they read changes.
    @exclusivity(unchecked) var getReplies = GetReplyCache()
    /// Replies to `List` calls of large domains, shared while nothing they read changes.
    var listReplies: ListReplyCache
    let role: DaemonOptions.Role
    /// A user's kvd: follows the system instance (nil: no system layer).
    var mirror: SystemMirror?
    /// The system instance with `--etcd`: makes changes to fleet domains in etcd.
    var fleetWriter: FleetWriter?
    /// The system instance: open connections per peer uid (see ``SystemPolicy``).
    var connectionsPerUID: [UInt32: Int] = [:]
    let system: any SystemCalls
    /// kvd's own socket or systemd's; replaced by a fresh one if a client comes at idle exit.
    var socket: ListeningSocket
    /// `socket.fds`, checked for every event.
    var listeners: [Int32]
    let log: Logger
    let idleExit: Duration?
    let limits: Limits
    let poller: Poller
    let memory: ClientMemory
    @exclusivity(unchecked) var connections: [Int32: ClientConnection] = [:]
    @exclusivity(unchecked) var connectionsByID: [Int: ClientConnection] = [:]
    /// The connections streaming a `Watch`, by id (a commit looks at these only).
    @exclusivity(unchecked) var watchers: [Int: ClientConnection] = [:]
    /// Watchers whose first replies (a `Mirror` snapshot, a large domain's current values) are
    /// still being made piece by piece, by connection id (see ``ReplyStream``).
    @exclusivity(unchecked) var streams: [Int: ReplyStream] = [:]
    var nextID = 0
    /// One buffer for every socket read (the loop reads one socket at a time).
    @exclusivity(unchecked) var readBuffer: [UInt8]
    /// Connections with calls left over after their turn, in the order they get the next one.
    @exclusivity(unchecked) var ready: [Int] = []
    /// The system instance: what each uid's connections handled this pass (a uid's turn).
    @exclusivity(unchecked) var turnsUsed: [UInt32: TurnUse] = [:]
    /// Connections handled this pass, to be settled at its end (replies sent together).
    @exclusivity(unchecked) var unsettled: [ClientConnection] = []
    /// Finished commits, in commit order: from this loop's own commits, or from the store's
    /// thread when it was busy compacting.
    let completions = CompletionQueue()
    @exclusivity(unchecked) var commitsInFlight = 0
    /// Writes were queued in the store this pass and await ``commitQueued()``.
    @exclusivity(unchecked) var commitsQueued = false
    @exclusivity(unchecked) var lastActivity = ContinuousClock.now
    @exclusivity(unchecked) var shutdownDeadline: ContinuousClock.Instant?
    /// A descriptor kept open to be given up when the process runs out of descriptors, so an
    /// excess connection can be accepted and closed instead of spinning on `EMFILE`.
    var spareFD: Int32 = -1
    var refusedSinceLog = 0
    var lastRefusalLog: ContinuousClock.Instant?
    let watchdog: Duration?
    @exclusivity(unchecked) var nextWatchdogPing = ContinuousClock.now
    /// Tests: called when the idle timeout has passed, before kvd looks at its backlog
    /// (`.deciding`), and when it found nobody there and returns (`.exiting`).
    var idleExitHook: ((IdleExitStep) -> Void)?

    enum IdleExitStep { case deciding, exiting }

    /// Calls handled and reply bytes produced in a turn so far.
    struct TurnUse {
        var calls = 0
        var output = 0
    }

    /// A server on `socket`, the listening socket (from systemd, or bound by ``Daemon``); the caller
    /// closes ``socket`` (which may be a fresh one by then) after ``run()``. Every system call of the
    /// loop goes through `system`. `systemLayerFile`: where a user's kvd keeps the last system layer
    /// it received (see ``SystemMirror``); nil: nowhere. Throws when the poller cannot be made or the
    /// listening socket cannot be watched.
    init(
        store: Store, socket: ListeningSocket, log: Logger, idleExit: Duration?, limits: Limits = .init(),
        system: any SystemCalls = LinuxSystem(), role: DaemonOptions.Role = .user(systemSocket: nil),
        fleet: FleetLayout? = nil,
        systemLayerFile: SystemLayerFile? = nil
    ) throws(SystemError) {
        self.store = store
        self.role = role
        if case .system = role {
            self.handler = RequestHandler(store: store, isSystem: true, fleet: fleet)
        } else {
            self.handler = RequestHandler(store: store)
        }
        self.system = system
        self.socket = socket
        self.listeners = socket.fds
        self.log = log
        self.idleExit = idleExit
        self.limits = limits
        self.poller = try Poller(system: system)
        self.memory = ClientMemory(budget: limits.maxClientMemory)
        self.listReplies = ListReplyCache(maxBytes: min(64 << 20, limits.maxClientMemory / 4))
        self.readBuffer = [UInt8](repeating: 0, count: limits.readChunk)
        self.watchdog = Systemd.watchdogInterval()
        try watchListeners()
        spareFD = (try? system.openReadOnly("/dev/null")) ?? -1
        if case .user(let systemSocket?) = role {
            let mirror = SystemMirror(
                path: systemSocket, system: system, log: log, file: systemLayerFile, wake: { [poller] in poller.wake() }
            )
            self.mirror = mirror
            mirror.start(waitingAtMost: .seconds(3))
            applySystemUpdates()
        }
    }

    func watchListeners() throws(SystemError) {
        for fd in listeners {
            try system.setNonBlocking(fd)
            try poller.watch(fd, readable: true, writable: false, adding: true)
        }
    }

    /// Serves until SIGTERM/SIGINT or the idle timeout, then finishes what is in flight.
    /// Blocks the calling thread; returns the reason it stopped.
    public func run() throws(SystemError) -> String {
        while true {
            if let reason = try runPass() { return reason }
        }
    }

    /// One pass of the loop: waits for events (at most `maxWait` milliseconds, -1: as long as
    /// the loop's timers allow), handles them, commits what they wrote, sends the replies.
    /// Returns the reason to stop, or `nil` to go on. Tests drive the loop pass by pass.
    func runPass(maxWait: Int32 = -1) throws(SystemError) -> String? {
        var timeout = ready.isEmpty && !commitsQueued ? nextTimeout() : 0
        if maxWait >= 0 { timeout = timeout < 0 ? maxWait : min(timeout, maxWait) }
        let events = try poller.wait(timeoutMilliseconds: timeout)
        if mirror != nil { applySystemUpdates() }
        turnsUsed.removeAll(keepingCapacity: true)
        serveReady()  // those that waited longest first
        for event in events { dispatch(event) }
        if !streams.isEmpty { refillStreams() }  // pieces of long replies, as clients read them
        settleAll()  // replies to reads go out before the sync, not after it
        commitQueued()
        deliverCompletions()
        settleAll()
        pingWatchdog()
        return stopReason()
    }

    private func dispatch(_ event: Poller.Event) {
        if event.fd == poller.wakeFD {
            poller.drainWake()
        } else if event.fd == poller.signalFD {
            if let signal = poller.takeTerminationSignal() { beginShutdown(signal: signal) }
        } else if listeners.contains(event.fd) {
            acceptAll(from: event.fd)
        } else if let connection = connections[event.fd] {
            if event.hangup { return hangUp(connection) }
            if event.writable { flush(connection) }
            if event.readable, connections[event.fd] != nil { read(connection) }
        }
    }

    deinit {
        mirror?.stop()
        for connection in connections.values { system.close(connection.fd) }
        if spareFD >= 0 { system.close(spareFD) }
    }
}
