import Dispatch
import Glibc
import KVConnection
import KVProtocol
import KVStorage
import KVSystem
import KVValues
import Synchronization

/// Follows the machine's system instance for a user's kvd: a client of its socket (a
/// KVConnection ``Connection``) that calls `io.kvd.System.Mirror` and hands what it reads to the
/// loop as ``SystemLayer/Update``s.
///
/// Runs on its own thread with blocking I/O (through ``SystemCalls``): the loop never waits
/// for the system instance. Each connection begins with a whole snapshot, so reconnecting is
/// catching up: whatever changed while the system instance was away (stopped, crashed,
/// restarted with other values) arrives as the difference between the two snapshots. While
/// it is away, the loop keeps the last layer it was given; the thread retries with backoff
/// (a ``ReconnectingStream``: 50 ms, doubling, at most 5 s). When nothing ever listens, no
/// update is ever sent, and the user's kvd serves the user's values alone.
///
/// The socket's folder must belong to root or to this user and be writable by nobody else:
/// otherwise whoever could plant a socket there could dictate "locked" values, and kvd logs
/// why and follows nothing.
///
/// Durable: with a ``SystemLayerFile``, the last whole layer received (a snapshot
/// and every change after it) is saved in the state folder, from this thread, after the loop
/// was given it (at each pause in the stream, after at most ``updatesPerSave`` updates, and when
/// the stream ends);
/// ``start(waitingAtMost:)`` hands the saved layer to the loop first. So a lock holds from the
/// moment kvd starts, while the system instance is away or not yet answering, and whatever
/// breaks the connection, until the system instance sends a newer layer.
final class SystemMirror: Sendable {
    let path: String
    private let system: any SystemCalls
    private let log: Logger
    private let wake: @Sendable () -> Void
    private let file: SystemLayerFile?
    private let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(50), maximum: .seconds(5)))

    /// Where following the system instance stands.
    enum Phase: Equatable {
        /// The first attempt has not ended: ``start(waitingAtMost:)`` waits.
        case starting
        /// Synced: the loop has the system instance's layer, and its changes as they come.
        case following
        /// Not connected (or not synced): the loop keeps the last layer it was given (or the
        /// saved one) while the thread reconnects.
        case away
    }

    private struct State {
        var updates: [SystemLayer.Update] = []
        var phase = Phase.starting
    }

    private let dconfProfile: String?
    /// How long ``start(waitingAtMost:)`` waits for the first snapshot once connected (the
    /// system instance answers, its layer is on the way): short, since no call is answered
    /// meanwhile.
    private let firstSyncWait: Duration
    private let state = Mutex(State())
    /// A connection to the system instance is open (from the connect to the end of its stream).
    private let connected = Atomic<Bool>(false)
    /// Updates wait in ``State/updates``: the loop checks this once per pass without the lock.
    private let pending = Atomic<Bool>(false)
    private let firstAttempt = DispatchSemaphore(value: 0)

    /// `dconfProfile`: the user's `DCONF_PROFILE`, sent with the Mirror call (which of dconf's
    /// profiles the system instance gives this user; nil: `user`). `firstSyncWait`: how long
    /// ``start(waitingAtMost:)`` waits for a first snapshot that is on the way.
    init(
        path: String, system: any SystemCalls, log: Logger, file: SystemLayerFile? = nil,
        dconfProfile: String? = nil, firstSyncWait: Duration = .milliseconds(500), wake: @escaping @Sendable () -> Void
    ) {
        self.dconfProfile = dconfProfile
        self.firstSyncWait = firstSyncWait
        self.path = path
        self.system = system
        self.log = log
        self.file = file
        self.wake = wake
    }

    /// Queues the saved layer (if any) as the first update, starts the thread and waits for its
    /// first snapshot or first failure, so that the first client of a freshly started kvd
    /// already sees the system layer: at most `timeout` while the system instance does not
    /// answer, and at most `firstSyncWait` (short) once it took the connection, since a large
    /// layer takes seconds to come and no call is answered meanwhile. Then kvd serves: reads
    /// from the user's own values (and the saved layer, if any) until the layer arrives and is
    /// announced to watchers; writes refused while no layer was ever given
    /// (``SystemFollower/awaitsFirstLayer``).
    func start(waitingAtMost timeout: Duration) {
        let saved = loadSaved()
        DispatchQueue(label: "kvd.system-mirror").async { [self] in run() }
        let started = ContinuousClock.now
        var answered = false
        while !answered {
            let limit = isConnected ? min(timeout, firstSyncWait) : timeout
            let left = limit - (ContinuousClock.now - started)
            if left <= .zero { break }
            answered = firstAttempt.wait(timeout: .now() + Self.milliseconds(min(left, .milliseconds(20)))) == .success
        }
        guard !answered else { return }
        let serving =
            saved
            ? "serving the saved layer until it does"
            : isConnected
                ? "serving reads without its layer, and refusing writes until it arrives"
                : "serving without its layer until it does"
        let what = isConnected ? "sent its layer" : "answered"
        log.warning(
            "the system instance at \(path) has not \(what) in \(ContinuousClock.now - started); \(serving)")
    }

    private static func milliseconds(_ duration: Duration) -> DispatchTimeInterval {
        .milliseconds(
            Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000))
    }

    /// Whether a connection to the system instance is open now (it answers; its first snapshot
    /// may not have arrived). Any thread.
    var isConnected: Bool { connected.load(ordering: .acquiring) }

    /// Stops following (the thread ends at its next read or wait). Any thread.
    func stop() {
        stream.stop()
    }

    /// Where following stands now.
    var phase: Phase { state.withLock { $0.phase } }

    /// Loop thread: the updates read since the last call, in order (none without taking the
    /// lock when there are none: this runs once per pass of the loop).
    func takeUpdates() -> [SystemLayer.Update] {
        guard pending.exchange(false, ordering: .acquiring) else { return [] }
        return state.withLock { state in
            defer { state.updates = [] }
            return state.updates
        }
    }

    /// Queues the layer saved in the state folder, if one is there and sound; whether it did.
    private func loadSaved() -> Bool {
        guard let file else { return false }
        do {
            guard let saved = try file.load() else { return false }
            push(.snapshot(saved.values, locks: saved.locks, revision: saved.revision))
            let locks = saved.locks.values.reduce(0) { $0 + $1.count }
            log.info(
                "enforcing the system layer saved at system revision \(saved.revision) (\(saved.values.count) domain(s), \(locks) lock(s)) until the system instance sends a newer one"
            )
            return true
        } catch {
            log.error("\(error); serving without a system layer until the system instance sends one")
            return false
        }
    }

    /// Saves `layer` (this thread's copy of what the loop was given); logs a failure once per
    /// reason, and when saving works again.
    private func save(_ layer: SystemLayer, lastFailure: inout String?) {
        guard let file, let saved = layer.saved else { return }
        do {
            try file.save(saved)
            if lastFailure != nil { log.info("the system layer is saved again in \(file.path)") }
            lastFailure = nil
        } catch {
            if lastFailure != "\(error)" {
                log.error("\(error); the layer is enforced but would not survive a restart")
            }
            lastFailure = "\(error)"
        }
    }

    private func push(_ update: SystemLayer.Update) { push([update]) }

    /// Queues `updates` together: the loop takes all of them in one pass (a batch, one step).
    private func push(_ updates: [SystemLayer.Update]) {
        guard !updates.isEmpty else { return }
        let first = state.withLock { state in
            state.updates += updates
            return state.updates.count == updates.count
        }
        pending.store(true, ordering: .releasing)
        if first { wake() }
    }

    /// Moves to `phase`; the first move ends ``start(waitingAtMost:)``'s wait.
    private func enter(_ phase: Phase) {
        let first = state.withLock { state in
            defer { state.phase = phase }
            return state.phase == .starting
        }
        if first { firstAttempt.signal() }
    }

    private func run() {
        var copy = SystemLayer()
        var saveFailure: String?
        stream.run(
            { () -> ReconnectingStream.Outcome in
                defer {
                    connected.store(false, ordering: .releasing)
                    enter(.away)
                }
                return follow(&copy, saveFailure: &saveFailure)
            },
            onRetry: { interruption, _ in
                switch interruption {
                case .lost(let ending):
                    log.warning(
                        "the system instance at \(path) went away (\(ending)); serving the last system layer seen, reconnecting"
                    )
                case .outage(let reason): log.info("no system layer from \(path): \(reason)")
                case .stillOut(let reason, changed: true): log.log(.debug, "no system layer from \(path): \(reason)")
                case .stillOut(_, changed: false): break
                }
            })
    }

    /// One connection: the snapshot, then the stream of commits until it ends (always a failure
    /// for the stream: whether it had worked, the stream knows). Each update goes to the loop as
    /// it is read, then to `copy`, which is saved at each pause in the stream (or after
    /// ``updatesPerSave`` updates) and at its end.
    private func follow(_ copy: inout SystemLayer, saveFailure: inout String?) -> ReconnectingStream.Outcome {
        let (opened, refusal) = connect()
        guard let connection = opened else { return .failed(refusal) }
        defer { connection.close() }
        guard stream.interrupting(with: { connection.interrupt() }) else { return .failed("stopped") }
        var reader = MirrorReader()
        /// Updates given to the loop since the layer was last saved.
        var unsaved = 0
        var failure: String?
        defer { if unsaved > 0 { save(copy, lastFailure: &saveFailure) } }
        do throws(ClientError) {
            try connection.stream(DefaultsRequest.mirror(dconfProfile: dconfProfile)) {
                (reply, moreReceived) throws(ClientError) -> Bool in
                do throws(MirrorReader.Failure) {
                    // A batch (a reload of drop-in files) goes to the loop together: one step.
                    let batch = try reader.read(reply)
                    push(batch)
                    for update in batch { copy.apply(update) }
                    unsaved += batch.count
                } catch {
                    failure = error.reason
                    return false
                }
                if reader.synced, phase != .following {
                    enter(.following)
                    stream.working()
                }
                if unsaved > 0 && (!moreReceived || unsaved >= Self.updatesPerSave) {
                    save(copy, lastFailure: &saveFailure)
                    unsaved = 0
                }
                return true
            }
        } catch {
            return .failed(Self.reason(error))
        }
        return .failed(failure ?? "it ended the stream")
    }

    /// A connection to the system instance (then ``isConnected`` until ``run()`` sees the
    /// attempt end), or why there is none.
    private func connect() -> (Connection?, String) {
        if let refusal = folderRefusal() { return (nil, refusal) }
        do {
            let connection = Connection(descriptor: try system.connectUnix(path), socketPath: path, system: system)
            connected.store(true, ordering: .releasing)
            return (connection, "")
        } catch {
            return (nil, error.errno.meansNobodyListens ? "nothing listens there" : "\(error)")
        }
    }

    /// The most updates given to the loop before the layer is saved, in a stream that never
    /// pauses.
    static let updatesPerSave = 64

    /// Why the stream ended, in the words of the journal.
    private static func reason(_ error: ClientError) -> String {
        switch error {
        case .connectionClosed: "it closed the connection"
        case .connectionFailed(let error): "\(error)"
        case .protocolError(let reason): "it sent a malformed reply: \(reason)"
        default: error.isErrorReply ? "it answered: \(error)" : "\(error)"
        }
    }

    /// Why the socket's folder cannot be trusted, or `nil` if it can.
    private func folderRefusal() -> String? {
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        guard let status = try? system.status(folder.isEmpty ? "/" : folder, followingLinks: true) else { return nil }
        let rule = OwnershipRule(kind: nil, owners: [0, system.userID], forbiddenPermissions: 0o022)
        switch rule.violation(of: status) {
        case nil, .kind: return nil
        case .owner(let owner):
            return "its folder \(folder) belongs to uid \(owner), neither root nor this user: not followed"
        case .permissions(let mode):
            return "its folder \(folder) is writable by others (mode \(String(mode, radix: 8))): not followed"
        }
    }
}

/// Reads `Mirror` replies into ``SystemLayer/Update``s: the snapshot's replies are gathered
/// into one update, sent when `synced` arrives; each later reply is one update (or two: values
/// and locks), a batch's replies (`batch: true` but the last) given together.
struct MirrorReader {
    struct Failure: Error { var reason: String }

    private(set) var synced = false
    private var values: [Domain: [Key: Value]] = [:]
    private var locks: [Domain: Set<Key>] = [:]
    /// The updates of a batch whose last reply has yet to come.
    private var held: [SystemLayer.Update] = []

    mutating func read(_ reply: VarlinkReply) throws(Failure) -> [SystemLayer.Update] {
        if let error = reply.error { throw Failure(reason: "it answered \(error)") }
        let mirror: MirrorReply
        do { mirror = try MirrorReply(decoding: reply) } catch { throw Failure(reason: Self.reason(error)) }
        if synced {
            guard let domain = mirror.domain else { return [] }
            var updates = held
            if !mirror.changes.isEmpty { updates.append(.values(domain, mirror.changes, revision: mirror.revision)) }
            if !mirror.locks.isEmpty { updates.append(.locks(domain, mirror.locks, revision: mirror.revision)) }
            // A batch: the next reply belongs to the same change (a reload of drop-in files).
            if mirror.batch {
                held = updates
                return []
            }
            held = []
            return updates
        }
        if let domain = mirror.domain {
            for change in mirror.changes { values[domain, default: [:]][change.key] = change.value }
            for change in mirror.locks where change.locked { locks[domain, default: []].insert(change.key) }
        }
        guard mirror.synced else { return [] }
        synced = true
        defer { (values, locks) = ([:], [:]) }
        return [.snapshot(values, locks: locks, revision: mirror.revision)]
    }

    /// What is wrong with a reply, in the words of the journal.
    private static func reason(_ error: StreamReplyError) -> String {
        switch error {
        case .invalidDomain(let name): "it named an invalid domain \"\(name)\""
        case .invalidChanges: "it sent invalid changes"
        case .invalidLockChange: "it sent an invalid lock change"
        case .noRevision: "it sent a reply without a revision"
        default: "it sent a malformed reply (\(error))"
        }
    }
}
