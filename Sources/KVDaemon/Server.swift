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
/// writes. The loop's state is in parts that own it, each with its contract: the
/// ``ConnectionTable`` (who is connected: watchers, streams, per-uid counts, whom to shed, the
/// spare descriptor), the ``Turns`` (whose turn it is: the fairness rule and its books), the
/// ``CommitPipeline`` (writes in flight and their completions, a connection's commit phase),
/// the ``WatchFanOut`` (what watchers hear, as the layers combine), the ``SystemFollower`` (the
/// system layer and the mirror thread; in the ``RequestHandler``), ``KeptReplies`` and the
/// ``Lifecycle`` (timers, listeners, when to stop). The server composes them, its work split by role: this
/// file (the loop), `Server+Connections.swift` (accepting, reading, writing, closing),
/// `Server+Turns.swift` (fairness, settling, memory), `Server+Calls.swift` (calls, commits,
/// telling watchers), `Server+Streams.swift` (replies made piece by piece),
/// `Server+Lifecycle.swift` (idle exit, shutdown). Loop thread only, except ``Poller/wake()``.
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
        /// What a `WatchAll(current: true)` starts with: a domain's values only while it takes
        /// at most this many bytes (as ``DomainBudget`` counts them; else named, withheld)...
        public var currentDomainBytes = 256 << 10
        /// ...and while all sent take at most this many (``CurrentStateStream``).
        public var currentTotalBytes = 4 << 20
        public var shutdownGrace: Duration = .seconds(10)
        /// Whether history records the writer of a connection's changes
        /// (``DaemonOptions/recordsWriters``; off only for the benchmark's comparison).
        public var identifiesWriters = true
        /// Whether each connection's process is identified at accept beyond its credentials
        /// (pidfd, `/proc`: its program and app) and a sandboxed one confined. Off only for the
        /// benchmark's comparison (``DaemonOptions/recordsWriters`` off): then every connection
        /// reaches everything, as before kvd knew its peers.
        public var identifiesPeers = true
        /// How long a connection whose peer has a root of its own waits for the look into it
        /// (``RootLookups``) before its peer is taken as unidentified (confined).
        public var rootLookupPatience: Duration = .seconds(3)
        /// The domains every sandboxed app may read (``DaemonOptions/sandboxReadable``).
        public var sandboxReadable = SandboxDefaults.readable
        public init() {}
    }

    let store: Store
    let handler: RequestHandler
    let system: any SystemCalls
    let log: Logger
    let limits: Limits
    let poller: Poller
    /// kvd's own socket or systemd's; replaced by a fresh one if a client comes at idle exit
    /// (``Lifecycle/socket``).
    var socket: ListeningSocket { lifecycle.socket }
    /// Who is connected, and what the loop keeps per connection and per user.
    let table: ConnectionTable
    /// Whose turn it is: each uid's (or connection's) calls and reply bytes this pass.
    let turns: Turns
    /// The writes on their way and the replies waiting for them.
    let commits: CommitPipeline
    /// What watchers hear, and how the layers combine in it; follows the system instance.
    let fanOut: WatchFanOut
    /// Replies to hot `Get`s and large `List`s, kept while nothing they read changes.
    let replies: KeptReplies
    /// The loop's timers and listening descriptors: when it waits, wakes and stops.
    let lifecycle: Lifecycle
    /// The connections whose peer's root is not kvd's, waiting while a thread looks there.
    let rootLookups: RootLookups
    /// Who each accepted connection's peer is, as far as the loop may wait to learn it.
    let peers: PeerIdentifier

    enum IdleExitStep { case deciding, exiting }

    /// Tests: called when the idle timeout has passed (``Lifecycle/idleExitHook``).
    var idleExitHook: ((IdleExitStep) -> Void)? {
        get { lifecycle.idleExitHook }
        set { lifecycle.onIdleExit(newValue) }
    }

    /// What all clients hold (``ConnectionTable/memory``).
    var memory: ClientMemory { table.memory }

    /// The system instance with `--etcd`: the fleet is up, and `writer` makes changes to fleet
    /// domains in etcd from now on (``CommitPipeline/fleetWriter``).
    func fleetIsUp(_ writer: FleetWriter) {
        commits.fleetIsUp(writer)
    }

    /// A server on `socket`, the listening socket (from systemd, or bound by ``Daemon``); the caller
    /// closes ``socket`` (which may be a fresh one by then) after ``run()``. Every system call of the
    /// loop goes through `system`. `systemLayerFile`: where a user's kvd keeps the last system layer
    /// it received (see ``SystemMirror``); nil: nowhere. `systemUpdates` (tests): what the loop
    /// follows instead of a ``SystemMirror``. Throws when the poller cannot be made or the
    /// listening socket cannot be watched.
    init(
        store: Store, socket: ListeningSocket, log: Logger, idleExit: Duration?, limits: Limits = .init(),
        system: any SystemCalls = LinuxSystem(), role: DaemonOptions.Role = .user(systemSocket: nil),
        fleet: FleetLayout? = nil,
        systemLayerFile: SystemLayerFile? = nil, systemUpdates: (any SystemUpdateSource)? = nil,
        dconfProfile: String? = nil
    ) throws(SystemError) {
        self.store = store
        self.system = system
        self.log = log
        self.limits = limits
        let poller = try Poller(system: system)
        self.poller = poller
        var mirror = systemUpdates
        if mirror == nil, case .user(let systemSocket?) = role {
            mirror = SystemMirror(
                path: systemSocket, system: system, log: log, file: systemLayerFile, dconfProfile: dconfProfile,
                wake: { [poller] in poller.wake() })
        }
        let follower = SystemFollower(mirror: mirror)
        if case .system = role {
            self.handler = RequestHandler(store: store, follower: follower, isSystem: true, fleet: fleet)
        } else {
            self.handler = RequestHandler(store: store, follower: follower)
        }
        self.commits = CommitPipeline(store: store, poller: poller)
        var policy: DaemonOptions.SystemPolicy?
        if case .system(let given) = role { policy = given }
        self.table = ConnectionTable(
            memory: ClientMemory(budget: limits.maxClientMemory), policy: policy, readChunk: limits.readChunk,
            system: system, log: log)
        self.turns = Turns(callsPerTurn: limits.callsPerTurn, outputPerTurn: limits.outputPerTurn)
        self.replies = KeptReplies(maxListBytes: min(64 << 20, limits.maxClientMemory / 4))
        self.lifecycle = Lifecycle(idleExit: idleExit, watchdog: Systemd.watchdogInterval(), socket: socket)
        self.fanOut = WatchFanOut(handler: handler)
        self.rootLookups = RootLookups(system: system, patience: limits.rootLookupPatience) { [poller] in poller.wake()
        }
        self.peers = PeerIdentifier(system: system)
        try watchListeners()
        if follower.followsSystem {
            follower.start(waitingAtMost: .seconds(3))
            applySystemUpdates()
        }
    }

    func watchListeners() throws(SystemError) {
        for fd in lifecycle.listeners {
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
        var timeout = !turns.hasReady && commits.queued == 0 ? nextTimeout() : 0
        if maxWait >= 0 { timeout = timeout < 0 ? maxWait : min(timeout, maxWait) }
        let events = try poller.wait(timeoutMilliseconds: timeout)
        // The wake-up is cleared before the mirror's updates are taken, never after: an update
        // queued in between is taken now or wakes the next pass (cleared after the take, its
        // wake-up would be lost and the update wait for some other event; SystemWakeTests).
        if events.contains(where: { $0.fd == poller.wakeFD }) { poller.drainWake() }
        if handler.follower.followsSystem { applySystemUpdates() }
        if !rootLookups.isEmpty { admitLookedUp() }
        turns.beginPass()
        serveReady()  // those that waited longest first
        for event in events { dispatch(event) }
        reloadDropInsIfDue()
        if !table.streams.isEmpty { refillStreams() }  // pieces of long replies, as clients read them
        settleAll()  // replies to reads go out before the sync, not after it
        commits.commitQueued()
        deliverCompletions()
        settleAll()
        peers.closeSpent()  // once the replies are out
        lifecycle.pingWatchdog()
        return stopReason()
    }

    private func dispatch(_ event: Poller.Event) {
        if event.fd == poller.wakeFD {
            return  // cleared at the start of the pass
        } else if event.fd == poller.signalFD {
            if let signal = poller.takeTerminationSignal() { signalArrived(signal) }
        } else if event.fd == lifecycle.dropInWatcher?.fd {
            dropInsChanged()
        } else if lifecycle.listeners.contains(event.fd) {
            acceptAll(from: event.fd)
        } else if let connection = table.connections[event.fd] {
            if event.hangup { return hangUp(connection) }
            if event.writable { flush(connection) }
            if event.readable, table.connections[event.fd] != nil { read(connection) }
        }
    }

    deinit {
        handler.follower.stop()
        lifecycle.dropInWatcher?.close()
    }
}
