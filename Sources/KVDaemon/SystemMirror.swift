import Dispatch
import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVValues
import Synchronization

/// Follows the machine's system instance for a user's kvd: a client of its socket that calls
/// `io.kvd.System.Mirror` and hands what it reads to the loop as ``SystemLayer/Update``s.
///
/// Runs on its own thread with blocking I/O (through ``SystemCalls``): the loop never waits
/// for the system instance. Each connection begins with a whole snapshot, so reconnecting is
/// catching up: whatever changed while the system instance was away (stopped, crashed,
/// restarted with other values) arrives as the difference between the two snapshots. While
/// it is away, the loop keeps the last layer it was given; the thread retries with backoff
/// (50 ms, doubling, at most 5 s). When nothing ever listens, no update is ever sent, and the
/// user's kvd serves the user's values alone.
///
/// The socket's folder must belong to root or to this user and be writable by nobody else:
/// otherwise whoever could plant a socket there could dictate "locked" values, and kvd logs
/// why and follows nothing.
///
/// Durable (issue 23): with a ``SystemLayerFile``, the last whole layer received (a snapshot
/// and every change after it) is saved in the state folder, from this thread, after the loop
/// was given it; ``start(waitingAtMost:)`` hands the saved layer to the loop first. So a lock
/// holds from the moment kvd starts, while the system instance is away or not yet answering,
/// and whatever breaks the connection, until the system instance sends a newer layer.
final class SystemMirror: Sendable {
    let path: String
    private let system: any SystemCalls
    private let log: Logger
    private let wake: @Sendable () -> Void
    private let file: SystemLayerFile?

    private struct State {
        var updates: [SystemLayer.Update] = []
        var fd: Int32 = -1
        var stopped = false
        /// The first connection attempt has ended (synced, or failed).
        var firstAttemptDone = false
    }

    private let state = Mutex(State())
    /// Updates wait in ``State/updates``: the loop checks this once per pass without the lock.
    private let pending = Atomic<Bool>(false)
    private let firstAttempt = DispatchSemaphore(value: 0)

    init(
        path: String, system: any SystemCalls, log: Logger, file: SystemLayerFile? = nil,
        wake: @escaping @Sendable () -> Void
    ) {
        self.path = path
        self.system = system
        self.log = log
        self.file = file
        self.wake = wake
    }

    /// Queues the saved layer (if any) as the first update, starts the thread and waits (at
    /// most `timeout`) for its first snapshot or first failure, so that the first client of a
    /// freshly started kvd already sees the system layer.
    func start(waitingAtMost timeout: Duration) {
        let saved = loadSaved()
        DispatchQueue(label: "kvd.system-mirror").async { [self] in run() }
        let milliseconds = Int(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        if firstAttempt.wait(timeout: .now() + .milliseconds(milliseconds)) == .timedOut {
            let serving = saved ? "serving the saved layer" : "serving without its layer"
            log.warning("the system instance at \(path) has not answered in \(timeout); \(serving) until it does")
        }
    }

    /// Stops following (the thread ends at its next read or sleep). Any thread.
    func stop() {
        let fd = state.withLock { state -> Int32 in
            state.stopped = true
            return state.fd
        }
        if fd >= 0 { try? system.shutdown(fd) }
    }

    /// Loop thread: the updates read since the last call, in order (none without taking the
    /// lock when there are none: this runs once per pass of the loop).
    func takeUpdates() -> [SystemLayer.Update] {
        guard pending.exchange(false, ordering: .acquiring) else { return [] }
        return state.withLock { state in
            defer { state.updates = [] }
            return state.updates
        }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

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

    private func firstAttemptEnded() {
        let signal = state.withLock { state in
            defer { state.firstAttemptDone = true }
            return !state.firstAttemptDone
        }
        if signal { firstAttempt.signal() }
    }

    private func run() {
        var delay: UInt32 = 50_000
        var outage: String?
        let copy = SystemLayer()
        var saveFailure: String?
        while !isStopped {
            let outcome = follow { updates in
                for update in updates { copy.apply(update) }
                save(copy, lastFailure: &saveFailure)
            }
            firstAttemptEnded()
            if isStopped { return }  // kvd is stopping (an idle exit): the instance did not go away
            switch outcome {
            case .followed(let ending):
                delay = 50_000
                outage = nil
                log.warning(
                    "the system instance at \(path) went away (\(ending)); serving the last system layer seen, reconnecting"
                )
            case .failed(let reason):
                if outage != reason {
                    log.log(outage == nil ? .info : .debug, "no system layer from \(path): \(reason)")
                }
                outage = reason
            }
            if isStopped { return }
            system.sleep(microseconds: delay)
            delay = min(delay * 2, 5_000_000)
        }
    }

    private enum Outcome {
        /// A snapshot arrived, then the stream ended for this reason.
        case followed(String)
        /// No snapshot arrived, for this reason.
        case failed(String)
    }

    /// One connection: the snapshot, then the stream of commits until it ends. The updates of
    /// each read, once the loop has them, go to `received` (to be saved).
    private func follow(received: ([SystemLayer.Update]) -> Void) -> Outcome {
        if let refusal = folderRefusal() { return .failed(refusal) }
        let fd: Int32
        do { fd = try system.connectUnix(path) } catch {
            return .failed(error.errno.meansNobodyListens ? "nothing listens there" : "\(error)")
        }
        let keep = state.withLock { state -> Bool in
            if !state.stopped { state.fd = fd }
            return !state.stopped
        }
        defer {
            state.withLock { $0.fd = -1 }
            system.close(fd)
        }
        guard keep else { return .failed("stopped") }
        var reader = MirrorReader()
        do throws(SystemError) {
            try send(DefaultsRequest.mirror.call.encoded(), to: fd)
        } catch {
            return .failed("\(error)")
        }
        var framer = MessageFramer()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count: Int
            do throws(SystemError) { count = try receive(into: &buffer, from: fd) } catch {
                return ended(reader, "\(error)")
            }
            guard count > 0 else { return ended(reader, "it closed the connection") }
            buffer.withUnsafeBytes { framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            var updates: [SystemLayer.Update] = []
            defer { if !updates.isEmpty { received(updates) } }
            do {
                while let message = try framer.next() {
                    let batch = try reader.read(try VarlinkReply(message: message))
                    push(batch)
                    updates += batch
                    if reader.synced { firstAttemptEnded() }
                }
            } catch let error as MirrorReader.Failure {
                return ended(reader, error.reason)
            } catch {
                return ended(reader, "it sent a malformed reply: \(error)")
            }
        }
    }

    private func send(_ bytes: [UInt8], to fd: Int32) throws(SystemError) {
        let result = bytes.withUnsafeBytes { bytes in Result { () throws(SystemError) in try system.sendAll(fd, bytes) }
        }
        try result.get()
    }

    private func receive(into buffer: inout [UInt8], from fd: Int32) throws(SystemError) -> Int {
        let result = buffer.withUnsafeMutableBytes { bytes in
            Result { () throws(SystemError) in try system.receive(fd, into: bytes) }
        }
        return try result.get()
    }

    private func ended(_ reader: MirrorReader, _ reason: String) -> Outcome {
        reader.synced ? .followed(reason) : .failed(reason)
    }

    /// Why the socket's folder cannot be trusted, or `nil` if it can.
    private func folderRefusal() -> String? {
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        guard let status = try? system.status(folder.isEmpty ? "/" : folder, followingLinks: true) else { return nil }
        let me = getuid()
        guard status.owner == 0 || status.owner == me else {
            return "its folder \(folder) belongs to uid \(status.owner), neither root nor this user: not followed"
        }
        guard status.permissions & 0o022 == 0 else {
            return
                "its folder \(folder) is writable by others (mode \(String(status.permissions, radix: 8))): not followed"
        }
        return nil
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
        let parameters = reply.parameters
        var domain: Domain?
        if case .string(let name)? = parameters["domain"] {
            guard let valid = try? Domain(validating: name) else {
                throw Failure(reason: "it named an invalid domain \"\(name)\"")
            }
            domain = valid
        }
        let changes: [Change]
        do { changes = try Change.list(parameters["changes"] ?? .array([]), named: "changes") } catch {
            throw Failure(reason: "it sent invalid changes")
        }
        let lockChanges = try Self.lockChanges(parameters["locks"])
        let nowSynced = parameters["synced"] == .bool(true)
        guard case .integer(let revision)? = parameters["revision"] else {
            throw Failure(reason: "it sent a reply without a revision")
        }
        if synced {
            guard let domain else { return [] }
            var updates = held
            if !changes.isEmpty { updates.append(.values(domain, changes, revision: revision)) }
            if !lockChanges.isEmpty { updates.append(.locks(domain, lockChanges, revision: revision)) }
            // `batch: true`: the next reply belongs to the same change (a reload of drop-in files).
            if parameters["batch"] == .bool(true) {
                held = updates
                return []
            }
            held = []
            return updates
        }
        if let domain {
            for change in changes { values[domain, default: [:]][change.key] = change.value }
            for change in lockChanges where change.locked { locks[domain, default: []].insert(change.key) }
        }
        guard nowSynced else { return [] }
        synced = true
        defer { (values, locks) = ([:], [:]) }
        return [.snapshot(values, locks: locks, revision: revision)]
    }

    private static func lockChanges(_ json: JSON?) throws(Failure) -> [(key: Key, locked: Bool)] {
        guard case .array(let items)? = json else { return [] }
        var changes: [(key: Key, locked: Bool)] = []
        for item in items {
            guard case .object(let members) = item, case .string(let name)? = members["key"],
                let key = try? Key(validating: name),
                case .bool(let locked)? = members["locked"]
            else { throw Failure(reason: "it sent an invalid lock change") }
            changes.append((key, locked))
        }
        return changes
    }
}
