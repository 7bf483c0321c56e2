import Glibc
import KVProtocol
import KVStorage
import KVValues
import Synchronization

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
/// replies, then waits behind the others, so no pipeline holds up the loop.
///
/// Memory: a client's input is read only while it has room (see `inputRoom`): while its calls
/// cannot be handled (they wait for a commit or their turn, or follow a `Watch`), it holds at
/// most one read chunk of input; otherwise one message being received, up to the limit. What
/// all clients hold (input buffers, unsent replies; a watch reply is encoded once and shared by
/// the watchers that have yet to send it) is counted against ``Limits/maxClientMemory``; past
/// it, the clients holding the most are disconnected, each with a warning, and the rest served.
public final class Server {
    public struct Limits: Sendable {
        public var maxPendingOutput = 32 << 20
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
    private let handler: RequestHandler
    /// kvd's own socket or systemd's; replaced by a fresh one if a client comes at idle exit.
    var socket: ListeningSocket
    /// `socket.fds`, checked for every event.
    var listeners: [Int32]
    let log: Logger
    let idleExit: Duration?
    let limits: Limits
    let poller: Poller
    private let memory: ClientMemory
    var connections: [Int32: ClientConnection] = [:]
    private var connectionsByID: [Int: ClientConnection] = [:]
    /// The connections streaming a `Watch`, by id (a commit looks at these only).
    private var watchers: [Int: ClientConnection] = [:]
    private var nextID = 0
    /// One buffer for every socket read (the loop reads one socket at a time).
    private var readBuffer: [UInt8]
    /// Connections with calls left over after their turn, in the order they get the next one.
    private var ready: [Int] = []
    /// Connections handled this pass, to be settled at its end (replies sent together).
    private var unsettled: [ClientConnection] = []
    /// Finished commits, in commit order: from this loop's own commits, or from the store's
    /// thread when it was busy compacting.
    private let completions = CompletionQueue()
    var commitsInFlight = 0
    /// Writes were queued in the store this pass and await ``commitQueued()``.
    private var commitsQueued = false
    var lastActivity = ContinuousClock.now
    var shutdownDeadline: ContinuousClock.Instant?
    /// A descriptor kept open to be given up when the process runs out of descriptors, so an
    /// excess connection can be accepted and closed instead of spinning on `EMFILE`.
    private var spareFD: Int32 = -1
    private var refusedSinceLog = 0
    private var lastRefusalLog: ContinuousClock.Instant?
    let watchdog: Duration?
    var nextWatchdogPing = ContinuousClock.now
    /// Tests: called when the idle timeout has passed, before kvd looks at its backlog
    /// (`.deciding`), and when it found nobody there and returns (`.exiting`).
    var idleExitHook: ((IdleExitStep) -> Void)?

    enum IdleExitStep { case deciding, exiting }

    /// - Parameter socket: the listening socket (from systemd, or bound by ``Daemon``); the
    ///   caller closes ``socket`` (which may be a fresh one by then) after ``run()``.
    init(store: Store, socket: ListeningSocket, log: Logger, idleExit: Duration?, limits: Limits = .init()) throws(SystemError) {
        self.store = store
        self.handler = RequestHandler(store: store)
        self.socket = socket
        self.listeners = socket.fds
        self.log = log
        self.idleExit = idleExit
        self.limits = limits
        self.poller = try Poller()
        self.memory = ClientMemory(budget: limits.maxClientMemory)
        self.readBuffer = [UInt8](repeating: 0, count: limits.readChunk)
        self.watchdog = Systemd.watchdogInterval()
        try watchListeners()
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    func watchListeners() throws(SystemError) {
        for fd in listeners {
            try Sys.setNonBlocking(fd)
            try poller.watch(fd, readable: true, writable: false, adding: true)
        }
    }

    /// Serves until SIGTERM/SIGINT or the idle timeout, then finishes what is in flight.
    /// Blocks the calling thread; returns the reason it stopped.
    public func run() throws(SystemError) -> String {
        while true {
            let events = try poller.wait(timeoutMilliseconds: ready.isEmpty && !commitsQueued ? nextTimeout() : 0)
            for event in events { try dispatch(event) }
            serveReady()
            settleAll()  // replies to reads go out before the sync, not after it
            commitQueued()
            deliverCompletions()
            settleAll()
            pingWatchdog()
            if let reason = stopReason() { return reason }
        }
    }

    private func dispatch(_ event: Poller.Event) throws(SystemError) {
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

    // MARK: connections

    func acceptAll(from listener: Int32) {
        guard shutdownDeadline == nil else { return }
        while true {
            let fd: Int32
            do {
                guard let accepted = try Sys.accept(listener) else { return }
                fd = accepted
            } catch {
                if error.errno == EMFILE || error.errno == ENFILE { refuseOneConnection(listener) } else { log.warning("\(error)") }
                return
            }
            let connection = ClientConnection(id: nextID, fd: fd, memory: memory)
            nextID += 1
            do {
                try poller.watch(fd, readable: true, writable: false, adding: true)
            } catch {
                log.warning("cannot watch a new connection: \(error)")
                Sys.close(fd)
                continue
            }
            connections[fd] = connection
            connectionsByID[connection.id] = connection
            log.log(.debug, "client \(connection.id) connected (\(connections.count) open)")
        }
    }

    /// Out of descriptors: accept with the spare one and close at once, so the client sees a
    /// closed connection instead of hanging, and the loop does not spin.
    private func refuseOneConnection(_ listener: Int32) {
        refusedSinceLog += 1
        if lastRefusalLog.map({ ContinuousClock.now - $0 >= .seconds(10) }) ?? true {
            log.warning("out of file descriptors with \(connections.count) clients connected: refused \(refusedSinceLog) new connection(s)")
            refusedSinceLog = 0
            lastRefusalLog = .now
        }
        guard spareFD >= 0 else { return }
        Sys.close(spareFD)
        if let fd = try? Sys.accept(listener) { Sys.close(fd) }
        spareFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    private func close(_ connection: ClientConnection) {
        connection.isClosed = true
        connection.releaseMemory()
        poller.forget(connection.fd)
        Sys.close(connection.fd)
        connections[connection.fd] = nil
        connectionsByID[connection.id] = nil
        watchers[connection.id] = nil
        lastActivity = .now
        log.log(.debug, "client \(connection.id) disconnected (\(connections.count) open)")
    }

    private func read(_ connection: ClientConnection) {
        receive(connection, upTo: inputRoom(connection))
        if !connection.isClosed { process(connection) }
    }

    /// Input bytes `connection` may still hold: while its calls cannot be handled (they wait for
    /// a commit or their turn, follow a `Watch`, or kvd is stopping), one read chunk in all;
    /// otherwise one whole message and its NUL, so a message over the limit shows as one.
    private func inputRoom(_ connection: ClientConnection) -> Int {
        let waiting = connection.awaitingCommit || connection.waitingForTurn || connection.isWatching || shutdownDeadline != nil
        return (waiting ? limits.readChunk : connection.framer.limit + 1) - connection.framer.pendingByteCount
    }

    /// Reads at most `room` bytes (and one read chunk) of what the socket holds into the
    /// connection's framer and charges them to the budget; notes the end of the stream; closes
    /// the connection when reading fails (unless it already hung up).
    private func receive(_ connection: ClientConnection, upTo room: Int) {
        guard !connection.peerClosed, room > 0 else { return }
        let count: Int?
        do {
            count = try readBuffer.withUnsafeMutableBytes { raw throws(SystemError) in
                try Sys.read(connection.fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<min(raw.count, room)]))
            }
        } catch {
            if connection.hungUp { connection.peerClosed = true } else { close(connection) }
            return
        }
        guard let count else { return }
        guard count > 0 else {
            connection.peerClosed = true
            return
        }
        readBuffer.withUnsafeBytes { connection.framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        connection.recharge()
        if memory.isOverBudget { shedClients() }
    }

    /// Both directions are gone, so no reply can be delivered; but calls already received still
    /// count (a oneway `Set` followed by a close is ordinary varlink use). Reads what is left,
    /// stops watching the socket (a hung-up socket stays ready forever), handles the calls with
    /// their replies dropped, and closes once nothing is in flight.
    private func hangUp(_ connection: ClientConnection) {
        poller.forget(connection.fd)
        connection.hungUp = true
        while !connection.peerClosed, !connection.isClosed {
            let before = connection.framer.pendingByteCount
            receive(connection, upTo: connection.framer.limit + 1 - before)
            if connection.framer.pendingByteCount == before { break }
        }
        guard !connection.isClosed else { return }
        connection.peerClosed = true
        connection.dropOutput()
        process(connection)
    }

    private func flush(_ connection: ClientConnection) {
        do {
            try connection.flush()
        } catch {
            return close(connection)
        }
        process(connection)
    }

    /// Handles queued calls of `connection` while it is free to, and queues it to be settled
    /// at the end of the pass.
    private func process(_ connection: ClientConnection) {
        guard !connection.isClosed else { return }
        var handled = 0
        let outputBefore = connection.pendingOutput
        while canHandleNextCall(connection) {
            if handled == limits.callsPerTurn || connection.pendingOutput - outputBefore >= limits.outputPerTurn {
                giveTurn(connection)
                break
            }
            handled += 1
            let message: ArraySlice<UInt8>
            do {
                guard let next = try connection.framer.next() else { break }
                message = next
            } catch {
                connection.send(.failure(DefaultsInterface.Error.tooLarge, ["limit": .integer(Int64(connection.framer.limit))]))
                connection.closeAfterFlush = true
                log.warning("client \(connection.id) sent a message over \(connection.framer.limit) bytes: disconnecting it")
                break
            }
            handle(message, from: connection)
        }
        connection.framer.compact()  // the handled calls' bytes, and a large message's buffer
        connection.recharge()
        if memory.isOverBudget { shedClients() }
        if !connection.isClosed, !connection.needsSettling {
            connection.needsSettling = true
            unsettled.append(connection)
        }
    }

    /// Settles every connection handled this pass: its replies go out together at the end of
    /// the pass (as Redis writes them before it sleeps), so a client is woken once per pass
    /// and not once per reply while the loop still works on others.
    private func settleAll() {
        while !unsettled.isEmpty {
            let batch = unsettled
            unsettled = []
            for connection in batch where !connection.isClosed {
                connection.needsSettling = false
                settle(connection)
            }
        }
    }

    /// Sends what the socket takes, disconnects a watcher that does not read, closes a
    /// finished connection, and otherwise updates its epoll interest. A watcher that closed its
    /// sending side is not finished: it still reads, until it hangs up.
    private func settle(_ connection: ClientConnection) {
        if connection.pendingOutput > 0, !connection.hungUp {
            do { try connection.flush() } catch { return close(connection) }
        }
        connection.recharge()
        if connection.isWatching, connection.pendingOutput > limits.maxPendingOutput {
            log.warning("client \(connection.id) does not read its watch: disconnecting it")
            return close(connection)
        }
        let noMoreCalls = connection.peerClosed && !connection.waitingForTurn && (!connection.isWatching || connection.hungUp)
        let finished = connection.pendingOutput == 0 && !connection.awaitingCommit && (connection.closeAfterFlush || noMoreCalls)
        if finished { return close(connection) }
        if !connection.hungUp { updateInterest(connection) }
    }

    /// Queues `connection` for another turn on the next pass of the loop.
    private func giveTurn(_ connection: ClientConnection) {
        guard !connection.waitingForTurn else { return }
        connection.waitingForTurn = true
        ready.append(connection.id)
    }

    /// Gives each connection that had calls left over its next turn.
    private func serveReady() {
        let turns = ready
        ready = []
        for id in turns {
            guard let connection = connectionsByID[id] else { continue }
            connection.waitingForTurn = false
            process(connection)
        }
    }

    private func canHandleNextCall(_ connection: ClientConnection) -> Bool {
        !connection.awaitingCommit && !connection.isWatching && !connection.closeAfterFlush
            && shutdownDeadline == nil && connection.pendingOutput <= limits.maxPendingOutput
    }

    private func updateInterest(_ connection: ClientConnection) {
        let readable = !connection.peerClosed && !connection.closeAfterFlush && connection.pendingOutput <= limits.maxPendingOutput
            && inputRoom(connection) > 0
        let writable = connection.pendingOutput > 0
        guard connection.registered != (readable, writable) else { return }
        do {
            try poller.watch(connection.fd, readable: readable, writable: writable)
            connection.registered = (readable, writable)
        } catch {
            close(connection)
        }
    }

    // MARK: calls

    private func handle(_ message: ArraySlice<UInt8>, from connection: ClientConnection) {
        if let (domain, key) = DefaultsRequest.fastGet(message) {
            return connection.send { handler.writeGetReply(domain, key, into: &$0) }
        }
        let call: VarlinkCall
        do {
            call = try VarlinkCall(message: message)
        } catch {
            connection.send(.failure(ServiceInterface.Error.invalidParameter, ["parameter": .string(error.description)]))
            return
        }
        let request: DefaultsRequest
        do {
            request = try DefaultsRequest(call: call)
        } catch {
            if !call.oneway { connection.send(error.reply) }
            return
        }
        switch handler.handle(request) {
        case .reply(let reply):
            if !call.oneway { connection.send(reply) }
        case .commit(let domain, let mutation):
            connection.awaitingCommit = true
            commitsInFlight += 1
            let id = connection.id
            let oneway = call.oneway
            commitsQueued = true
            store.enqueue(domain, mutation) { [completions, poller] result in
                if completions.push(.init(connection: id, oneway: oneway, result: result)) { poller.wake() }
            }
        case .watch(let domain, let key):
            let since = store.revision
            connection.watch = (domain, key, since)
            watchers[connection.id] = connection
            connection.send(handler.initialWatchReply(domain, key, revision: since))
        }
    }

    /// Makes this pass's writes durable with one sync (blocks the loop for it).
    private func commitQueued() {
        guard commitsQueued else { return }
        commitsQueued = false
        completions.whileLoopCommits { store.commitQueued() }
    }

    /// Sends the replies of finished commits and the changes to watchers, in commit order.
    private func deliverCompletions() {
        for item in completions.takeAll() {
            commitsInFlight -= 1
            if case .success(let commit) = item.result { notifyWatchers(commit) }
            guard let connection = connectionsByID[item.connection] else { continue }
            connection.awaitingCommit = false
            if !item.oneway { connection.send(RequestHandler.reply(to: item.result)) }
            process(connection)
        }
    }

    /// Sends the commit's changes to the watchers of its domain: encoded once per key filter,
    /// the same bytes shared by every watcher that uses it.
    private func notifyWatchers(_ commit: Commit) {
        var encoded: [Key?: SharedReply?] = [:]
        for connection in watchers.values where !connection.isClosed {
            guard let watch = connection.watch, watch.domain == commit.domain, commit.revision > watch.since else { continue }
            let reply: SharedReply?
            if let known = encoded[watch.key] {
                reply = known
            } else {
                reply = watchReply(to: commit, key: watch.key)
                encoded[watch.key] = .some(reply)
            }
            guard let reply else { continue }
            connection.send(shared: reply)
            process(connection)
        }
    }

    /// The watch reply for the commit's changes of `key` (all if `nil`); `nil` if there are none.
    private func watchReply(to commit: Commit, key: Key?) -> SharedReply? {
        let changes = commit.changes.filter { key == nil || $0.key == key }
        guard !changes.isEmpty else { return nil }
        return SharedReply(RequestHandler.watchReply(revision: commit.revision, changes: changes, initial: false).encoded())
    }

    /// Clients together hold more than ``Limits/maxClientMemory``: disconnects those holding the
    /// most (unsent replies, unfinished messages) until the rest fit, each with a warning that
    /// names it and what it held.
    private func shedClients() {
        while memory.isOverBudget, let largest = connections.values.max(by: { $0.heldBytes < $1.heldBytes }) {
            log.warning("clients hold \(ClientMemory.text(memory.total)), over the budget of \(ClientMemory.text(memory.budget)) "
                + "(--max-client-memory): disconnecting client \(largest.id), which holds the most, \(largest.memoryDescription)")
            close(largest)
        }
    }

    /// Clients connected now (for status lines).
    public var clientCount: Int { connections.count }

    deinit {
        for connection in connections.values { Sys.close(connection.fd) }
        if spareFD >= 0 { Sys.close(spareFD) }
    }
}
