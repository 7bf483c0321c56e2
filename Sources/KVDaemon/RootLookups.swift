import KVSystem
import Synchronization

/// The part of identifying a peer that may wait without end, done off the loop thread: looking
/// for `/.flatpak-info` in the root of a process whose root is not kvd's
/// (``PeerProcess/RootLookup``). Only a root on a local file system is looked into, but a local
/// one can still wait on another (an `overlay` whose lower layer is a FUSE file system whose
/// daemon never answers), and the lookup waits as long as it does; on the loop it would stall
/// every user's calls. So a connection whose peer has a root of its own is accepted
/// unwatched, and its lookup is run by a thread of its uid; the loop takes what each lookup
/// found (``takeIdentified(now:)``), or, once ``patience`` has passed, takes the peer as
/// unidentified: confined, as a peer whose sandbox cannot be told is (the thread, stuck in the
/// file system, finishes whenever it does and its result is dropped).
///
/// Bounds: at most ``Shared/threadsPerUID`` threads for one uid, taking that uid's lookups in
/// accept order (a uid whose lookups are stuck delays only its own later lookups, each of them
/// no longer than ``patience``), and at most ``Shared/maxThreads`` in all (past it, lookups wait
/// for a thread that is done: their patience counts meanwhile). A lookup waiting for a thread
/// holds two descriptors (its process's pidfd and its root) as its connection holds one; a
/// thread stuck in a file system holds them until it returns.
///
/// Loop thread only, but for the threads it starts, which share ``Shared``.
final class RootLookups {
    /// What a lookup gave, or ``PeerProcess`` with the credentials alone once it took too long.
    struct Outcome: Sendable {
        var connection: Int
        var peer: Result<PeerProcess, Errno>
        /// Whether the patience ran out: `peer` is its credentials alone.
        var tookTooLong = false
    }

    /// How long a connection waits for its lookup before its peer is taken as unidentified.
    let patience: Duration
    private let shared: Shared
    /// The connections waiting for their lookups: when they give up, and who connected.
    private var waiting: [Int: (deadline: ContinuousClock.Instant, credentials: PeerCredentials)] = [:]

    /// `wake` wakes the loop (``Poller/wake()``): called by a thread that found a peer.
    init(
        system: any SystemCalls, patience: Duration = .seconds(3), threadsPerUID: Int = 4, maxThreads: Int = 64,
        wake: @escaping @Sendable () -> Void
    ) {
        self.patience = patience
        self.shared = Shared(system: system, threadsPerUID: threadsPerUID, maxThreads: maxThreads, wake: wake)
    }

    /// Whether any connection waits for its lookup.
    var isEmpty: Bool { waiting.isEmpty }

    /// How many lookup threads run now, and how many lookups wait for one (tests).
    var load: (threads: Int, queued: Int, abandoned: Int) {
        shared.state.withLock { ($0.threads, $0.queued.values.map(\.count).reduce(0, +), $0.abandoned.count) }
    }

    /// Starts `lookup`, for the connection `connection`; its peer is taken by ``takeIdentified(now:)``.
    func start(_ lookup: PeerProcess.RootLookup, connection: Int, now: ContinuousClock.Instant = .now) {
        waiting[connection] = (now + patience, lookup.credentials)
        shared.start(Job(connection: connection, lookup: lookup))
    }

    /// The peers found since last asked, and those of the connections whose patience ran out by
    /// `now` (their credentials alone: unidentified).
    func takeIdentified(now: ContinuousClock.Instant = .now) -> [Outcome] {
        var outcomes: [Outcome] = shared.takeFinished().filter { waiting.removeValue(forKey: $0.connection) != nil }
        for (connection, waited) in waiting where waited.deadline <= now {
            waiting[connection] = nil
            shared.giveUp(connection)
            outcomes.append(
                .init(connection: connection, peer: .success(.init(credentials: waited.credentials)), tookTooLong: true)
            )
        }
        return outcomes
    }

    /// The connection closed before its peer was found: its lookup is dropped (its descriptors
    /// closed now if it had not begun, by its thread once done if it had).
    func cancel(_ connection: Int) {
        guard waiting.removeValue(forKey: connection) != nil else { return }
        shared.giveUp(connection)
    }

    /// Milliseconds until the first connection's patience runs out (at least 1), or nil when none waits.
    func millisecondsToNextDeadline(now: ContinuousClock.Instant = .now) -> Int32? {
        guard let first = waiting.values.map(\.deadline).min() else { return nil }
        let left = (first - now).components
        return Int32(clamping: max(1, left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000 + 1))
    }

    struct Job: Sendable {
        var connection: Int
        var lookup: PeerProcess.RootLookup
        var uid: UInt32 { lookup.credentials.uid }
    }

    /// What the loop and the lookup threads share.
    final class Shared: Sendable {
        struct State {
            /// Each uid's lookups not begun, in accept order.
            var queued: [UInt32: [Job]] = [:]
            /// How many threads work for each uid.
            var busy: [UInt32: Int] = [:]
            var threads = 0
            /// Connections given up on whose lookup is running: its result is dropped.
            var abandoned: Set<Int> = []
            /// Lookups done, for the loop.
            var finished: [Outcome] = []
        }

        let state = Mutex(State())
        let system: any SystemCalls
        /// The most threads for one uid's lookups.
        let threadsPerUID: Int
        /// The most threads in all.
        let maxThreads: Int
        let wake: @Sendable () -> Void

        init(system: any SystemCalls, threadsPerUID: Int, maxThreads: Int, wake: @escaping @Sendable () -> Void) {
            self.system = system
            self.threadsPerUID = threadsPerUID
            self.maxThreads = maxThreads
            self.wake = wake
        }

        func start(_ job: Job) {
            let starts = state.withLock { state in
                guard state.busy[job.uid, default: 0] < threadsPerUID, state.threads < maxThreads else {
                    state.queued[job.uid, default: []].append(job)
                    return false
                }
                state.busy[job.uid, default: 0] += 1
                state.threads += 1
                return true
            }
            guard starts else { return }
            do {
                try startThread { [self] in work(job) }.detach()
            } catch {
                // No thread now: queued, for a thread that is done to take; else its patience runs out.
                state.withLock { state in
                    Self.leave(job.uid, &state)
                    state.queued[job.uid, default: []].insert(job, at: 0)
                }
            }
        }

        /// A lookup thread: `job`, then its uid's next ones, then another uid's left waiting for a
        /// thread (at ``maxThreads``), until none is left.
        private func work(_ first: Job) {
            var job = first
            while true {
                let peer = Result { () throws(Errno) in try job.lookup.finish(system) }
                let (next, wakes): (Job?, Bool) = state.withLock { state in
                    var wakes = false
                    if state.abandoned.remove(job.connection) == nil {
                        state.finished.append(Outcome(connection: job.connection, peer: peer))
                        wakes = state.finished.count == 1
                    }
                    if let next = Self.takeQueued(job.uid, &state.queued) { return (next, wakes) }
                    Self.leave(job.uid, &state)
                    let waiting = state.queued.keys.first { state.busy[$0, default: 0] < threadsPerUID }
                    guard let waiting, let next = Self.takeQueued(waiting, &state.queued) else { return (nil, wakes) }
                    state.busy[waiting, default: 0] += 1
                    state.threads += 1
                    return (next, wakes)
                }
                if wakes { wake() }
                guard let next else { return }
                job = next
            }
        }

        /// A thread of `uid`'s stops working for it.
        private static func leave(_ uid: UInt32, _ state: inout State) {
            let busy = state.busy[uid, default: 1] - 1
            state.busy[uid] = busy > 0 ? busy : nil
            state.threads -= 1
        }

        private static func takeQueued(_ uid: UInt32, _ queued: inout [UInt32: [Job]]) -> Job? {
            guard var jobs = queued[uid], !jobs.isEmpty else { return nil }
            let job = jobs.removeFirst()
            queued[uid] = jobs.isEmpty ? nil : jobs
            return job
        }

        func takeFinished() -> [Outcome] {
            state.withLock { state in
                defer { state.finished.removeAll() }
                return state.finished
            }
        }

        /// Drops the lookup of `connection`: not begun, it is removed and its descriptors closed;
        /// done, its result is dropped; running, its thread drops it.
        func giveUp(_ connection: Int) {
            let unstarted: Job? = state.withLock { state in
                for (uid, jobs) in state.queued {
                    guard let index = jobs.firstIndex(where: { $0.connection == connection }) else { continue }
                    var left = jobs
                    let job = left.remove(at: index)
                    state.queued[uid] = left.isEmpty ? nil : left
                    return job
                }
                if let index = state.finished.firstIndex(where: { $0.connection == connection }) {
                    state.finished.remove(at: index)
                    return nil
                }
                state.abandoned.insert(connection)
                return nil
            }
            unstarted?.lookup.abandon(system)
        }
    }
}
