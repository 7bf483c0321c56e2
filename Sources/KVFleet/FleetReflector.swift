import Dispatch
import KVValues
import Synchronization

/// Mirrors this host's fleet domains from etcd into the daemon's store, the way Kubernetes'
/// reflector does: list, then watch, and list again whenever etcd has compacted the history
/// the watch needs.
///
/// - Listing: the layout's range in pages of ``Options/pageSize`` keys, every page read at the
///   revision of the first one; "compacted" during the listing starts it again. The result is
///   one ``FleetUpdate/replace(_:revision:)``.
/// - Watching: from the applied revision + 1, with progress notifications. Events at or below
///   the applied revision are dropped (etcd 3.4.23 can replay old events after a member
///   restores a snapshot); the events of one etcd revision become one
///   ``FleetUpdate/apply(_:revision:)`` (etcd never splits a revision between watch responses
///   unless asked to fragment, which kvd does not). A revision with no change for this host
///   (another host's domains) is not delivered: ``FleetReflectorStatus/seenRevision`` moves,
///   the applied revision does not, and after a restart those events are read and dropped again.
///   A progress notification moves only the seen revision too: moving the applied one would
///   cost a durable commit per notification, and some etcd 3.4 releases could send a
///   notification ahead of events still to come.
/// - Failures: a watch cancelled for compaction lists again at once; any other failure (a
///   broken stream, an idle one, an unreachable cluster, a sink that throws) waits a backoff
///   (``Options/initialBackoff`` doubling up to ``Options/maximumBackoff``, reset once a
///   message from etcd has been handled) and resumes from the applied revision + 1, or lists again when no
///   listing has been committed yet. The ``EtcdAPI`` conformer fails over between endpoints.
/// - Durability: the applied revision advances only when the sink returns, so a crash between
///   an event and its commit replays the event, and never skips it.
/// - Entries that cannot be read (bad typed JSON, invalid names) are left out of the mirror and
///   listed in ``FleetReflectorStatus/problems`` with the reason; an unreadable new value
///   removes the old one, so the mirror always equals what a listing at its revision would
///   give. The list lives in memory: after a restart without a listing it holds only the
///   entries changed since.
///
/// Threading: ``run(from:delivering:)`` blocks the calling thread (etcd calls, the sink, the
/// backoff all happen there) until ``stop()``; ``stop()`` and ``status`` may be called from any
/// thread.
public final class FleetReflector: Sendable {
    public struct Options: Sendable {
        /// Keys per page of a listing.
        public var pageSize = 5000
        /// etcd's progress notification interval (its `--experimental-watch-progress-notify-interval`):
        /// a stream silent for twice this long counts as broken.
        public var progressInterval: Duration = .seconds(5)
        public var initialBackoff: Duration = .milliseconds(100)
        public var maximumBackoff: Duration = .seconds(5)

        public init() {}
    }

    let etcd: any EtcdAPI
    let layout: FleetLayout
    let options: Options
    private let sleep: (@Sendable (Duration) -> Void)?
    private let shared = Mutex(Shared())
    private let wakeup = DispatchSemaphore(value: 0)

    private struct Shared: Sendable {
        var status = FleetReflectorStatus()
        var stopped = false
    }

    /// `sleep` replaces the backoff's wait (tests); by default the wait ends early on ``stop()``.
    public init(etcd: any EtcdAPI, layout: FleetLayout, options: Options = Options(), sleep: (@Sendable (Duration) -> Void)? = nil) {
        self.etcd = etcd
        self.layout = layout
        self.options = options
        self.sleep = sleep
    }

    /// A copy of the current status.
    public var status: FleetReflectorStatus { shared.withLock { $0.status } }

    /// Asks ``run(from:delivering:)`` to return. Returns at once; `run` returns after the etcd
    /// call in progress ends (a watch: at its next message, within a progress interval).
    public func stop() {
        shared.withLock { $0.stopped = true }
        wakeup.signal()
    }

    var isStopped: Bool { shared.withLock { $0.stopped } }

    /// Mirrors until ``stop()``, handing `sink` each update to commit durably with its revision.
    ///
    /// `appliedRevision` is the etcd revision the daemon's store holds (0: nothing yet, so the
    /// run starts with a listing). `sink` runs on this thread and returns once the update is
    /// durable; when it throws, the update counts as not applied and comes again later.
    /// `report` hears of each listing, watch, relisting and failure (for the journal), on this
    /// thread, after ``status`` has taken it in.
    public func run(
        from appliedRevision: Int64, reporting report: (FleetReflectorEvent) -> Void = { _ in }, delivering sink: (FleetUpdate) throws -> Void
    ) {
        update {
            $0.appliedRevision = appliedRevision
            $0.seenRevision = max($0.seenRevision, appliedRevision)
        }
        var loop = Loop(applied: appliedRevision, needsList: appliedRevision == 0, backoff: options.initialBackoff)
        while !isStopped {
            let listing = loop.needsList
            if !listing { report(.watching(from: loop.applied + 1)) }
            let outcome = listing ? list(&loop, sink) : watch(&loop, sink)
            switch outcome {
            case .stopped:
                break
            case .listed:
                report(.listed(revision: loop.applied))
            case .relist:
                loop.needsList = true
                update { $0.relists += 1 }
                report(.relisting)
            case .failed(let reason):
                update {
                    $0.lastError = reason
                    $0.phase = .waitingToRetry
                }
                guard !isStopped else { break }
                report(.failed(reason, retryingIn: loop.backoff))
                wait(loop.backoff)
                loop.backoff = min(loop.backoff * 2, options.maximumBackoff)
            }
        }
        update { $0.phase = .stopped }
    }

    /// The run's own state, on the run's thread.
    struct Loop {
        var applied: Int64
        var needsList: Bool
        var backoff: Duration
        /// The entries left out, by etcd key.
        var problems: [[UInt8]: FleetProblem] = [:]
    }

    /// How one listing or watch ended.
    enum Outcome: Equatable {
        case stopped
        /// The listing is committed: watch from its revision + 1.
        case listed
        /// etcd compacted the revision needed: list again, now.
        case relist
        /// Wait the backoff, then go on from the applied revision.
        case failed(String)
    }

    func update(_ change: (inout FleetReflectorStatus) -> Void) {
        shared.withLock { change(&$0.status) }
    }

    /// Records that etcd has reached `revision`.
    func noteSeen(_ revision: Int64) {
        update { $0.seenRevision = max($0.seenRevision, revision) }
    }

    /// Records a committed update: the applied revision and the entries left out.
    func noteApplied(_ loop: Loop) {
        let problems = loop.problems.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map(\.value)
        update {
            $0.appliedRevision = loop.applied
            $0.seenRevision = max($0.seenRevision, loop.applied)
            $0.problems = problems
        }
    }

    private func wait(_ duration: Duration) {
        if let sleep { return sleep(duration) }
        let (seconds, attoseconds) = duration.components
        _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
    }
}
