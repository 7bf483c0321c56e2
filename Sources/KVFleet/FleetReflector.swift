import KVSystem
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
/// - Another history: a watch message whose revision is below the applied one (etcd's data was
///   wiped or restored from an older backup, so its revision went back), or an answer from a
///   cluster with another ID (``EtcdError/clusterChanged(was:now:)``), ends the watch and lists
///   again at once (``FleetReflectorEvent/historyReplaced(_:)``): the mirror drops what
///   etcd no longer has and gains what it has. ``relist(_:)`` asks for the same (the fleet
///   writer does, when its own read finds etcd behind the mirror).
/// - Failures: a watch cancelled for compaction lists again at once; any other failure (a
///   broken stream, an idle one, an unreachable cluster, a sink that throws) waits a backoff
///   (``Options/initialBackoff`` doubling up to ``Options/maximumBackoff``, reset once a
///   message from etcd has been handled: a ``ReconnectingStream``) and resumes from the applied revision + 1, or lists again when no
///   listing has been committed yet. The ``EtcdAPI`` conformer fails over between endpoints.
/// - Durability: the applied revision advances only when the sink returns, so a crash between
///   an event and its commit replays the event, and never skips it.
/// - Entries that cannot be read (bad typed JSON, invalid names) are left out of the mirror,
///   reported (``FleetReflectorEvent/leftOut(_:)``, for the journal) and counted in
///   ``FleetReflectorStatus/problemCount``, the first ``statusProblemLimit`` in etcd key order
///   listed in ``FleetReflectorStatus/problems`` with the reason; an unreadable new value
///   removes the old one, so the mirror always equals what a listing at its revision would
///   give. They are kept by etcd key in a dictionary that each revision updates by its own
///   events (never sorted whole: 100,000 of them cost nothing per revision); the status picks
///   its first entries when asked. The list lives in memory: after a restart without a
///   listing it holds only the entries changed since.
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
    /// The attempts (a listing or a watch), the backoff between them, stopping.
    let stream: ReconnectingStream
    private let shared = Mutex(Shared())

    private struct Shared: Sendable {
        var status = FleetReflectorStatus()
        /// The entries left out, by etcd key.
        var problems: [[UInt8]: FleetProblem] = [:]
        /// ``relist(_:)`` was called: the watch ends at its next message and lists again.
        var relistReason: String?
    }

    /// How many left-out entries ``status`` lists (the rest are counted).
    public static let statusProblemLimit = 100

    /// `sleep` replaces the backoff's wait (tests); by default the wait ends early on ``stop()``.
    public init(
        etcd: any EtcdAPI, layout: FleetLayout, options: Options = Options(),
        sleep: (@Sendable (Duration) -> Void)? = nil
    ) {
        self.etcd = etcd
        self.layout = layout
        self.options = options
        self.stream = ReconnectingStream(
            backoff: .init(initial: options.initialBackoff, maximum: options.maximumBackoff), wait: sleep)
    }

    /// A copy of the current status, with the first ``statusProblemLimit`` entries left out
    /// (in etcd key order) and their count.
    public var status: FleetReflectorStatus {
        shared.withLock { shared in
            var status = shared.status
            status.problems = Self.first(Self.statusProblemLimit, of: shared.problems)
            status.problemCount = shared.problems.count
            return status
        }
    }

    /// The `limit` problems with the smallest etcd keys, in key order, in one pass.
    static func first(_ limit: Int, of problems: [[UInt8]: FleetProblem]) -> [FleetProblem] {
        var kept: [(key: [UInt8], problem: FleetProblem)] = []
        for (key, problem) in problems {
            if kept.count == limit, let last = kept.last, !key.lexicographicallyPrecedes(last.key) { continue }
            var low = 0
            var high = kept.count
            while low < high {
                let middle = (low + high) / 2
                if kept[middle].key.lexicographicallyPrecedes(key) { low = middle + 1 } else { high = middle }
            }
            kept.insert((key, problem), at: low)
            if kept.count > limit { kept.removeLast() }
        }
        return kept.map(\.problem)
    }

    /// Asks ``run(from:delivering:)`` to return. Returns at once; `run` returns after the etcd
    /// call in progress ends (a watch: at its next message, within a progress interval).
    public func stop() {
        stream.stop()
    }

    var isStopped: Bool { stream.isStopped }

    /// Asks the run to list again now (`reason`, for the journal): a watch ends at its next
    /// message (within a progress interval). Any thread.
    public func relist(_ reason: String) {
        shared.withLock { $0.relistReason = $0.relistReason ?? reason }
        stream.wake()
    }

    /// The reason given to ``relist(_:)``, taken once.
    func takeRelistRequest() -> String? {
        shared.withLock { shared in
            defer { shared.relistReason = nil }
            return shared.relistReason
        }
    }

    /// Mirrors until ``stop()``, handing `sink` each update to commit durably with its revision.
    ///
    /// `appliedRevision` is the etcd revision the daemon's store holds (0: nothing yet, so the
    /// run starts with a listing). `sink` runs on this thread and returns once the update is
    /// durable; when it throws, the update counts as not applied and comes again later.
    /// `report` hears of each listing, watch, relisting and failure (for the journal), on this
    /// thread, after ``status`` has taken it in.
    public func run(
        from appliedRevision: Int64, reporting report: (FleetReflectorEvent) -> Void = { _ in },
        delivering sink: (FleetUpdate) throws -> Void
    ) {
        update {
            $0.appliedRevision = appliedRevision
            $0.seenRevision = max($0.seenRevision, appliedRevision)
        }
        var loop = Loop(applied: appliedRevision, needsList: appliedRevision == 0)
        stream.run(
            { () -> ReconnectingStream.Outcome in
                let listing = loop.needsList
                if !listing { report(.watching(from: loop.applied + 1)) }
                return handle(listing ? list(&loop, report, sink) : watch(&loop, report, sink), &loop, report)
            },
            onRetry: { interruption, wait in report(.failed(interruption.reason, retryingIn: wait)) })
        update { $0.phase = .stopped }
    }

    /// What the run does after a listing or a watch ended with `outcome`.
    private func handle(_ outcome: Outcome, _ loop: inout Loop, _ report: (FleetReflectorEvent) -> Void)
        -> ReconnectingStream.Outcome
    {
        switch outcome {
        case .stopped:
            return .finished
        case .listed:
            report(.listed(revision: loop.applied))
        case .relist:
            loop.needsList = true
            update { $0.relists += 1 }
            report(.relisting)
        case .historyReplaced(let reason, let revision):
            loop.needsList = true
            update {
                $0.lastError = reason
                $0.seenRevision = revision
            }
            report(.historyReplaced(reason))
        case .failed(let reason):
            update {
                $0.lastError = reason
                $0.phase = .waitingToRetry
            }
            return .failed(reason)
        }
        return .again
    }

    /// The run's own state, on the run's thread.
    struct Loop {
        var applied: Int64
        var needsList: Bool
    }

    /// How one listing or watch ended.
    enum Outcome: Equatable {
        case stopped
        /// The listing is committed: watch from its revision + 1.
        case listed
        /// etcd compacted the revision needed: list again, now.
        case relist
        /// etcd's history is not the one the mirror holds (why; etcd's revision now): list
        /// again, now.
        case historyReplaced(String, revision: Int64)
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

    /// How a committed update changes the entries left out.
    enum ProblemChanges {
        /// A listing: exactly these.
        case replace([[UInt8]: FleetProblem])
        /// One revision's events, in order: each key's new problem, or nil (readable now, or
        /// deleted).
        case update([([UInt8], FleetProblem?)])
    }

    /// Records a committed update: the applied revision and the entries left out (changed in
    /// place, under the lock: never copied or sorted whole).
    func noteApplied(_ applied: Int64, _ changes: ProblemChanges) {
        shared.withLock { shared in
            shared.status.appliedRevision = applied
            shared.status.seenRevision = max(shared.status.seenRevision, applied)
            switch changes {
            case .replace(let problems): shared.problems = problems
            case .update(let updates): for (key, problem) in updates { shared.problems[key] = problem }
            }
        }
    }
}
