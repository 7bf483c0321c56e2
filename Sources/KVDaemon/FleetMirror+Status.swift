import FoundationEssentials
import KVFleet
import KVProtocol
import KVStorage
import KVValues
import Synchronization

/// The fleet mirror as admins see it: journal lines for listings, watches, fail-overs,
/// relistings and failures; one `STATUS=` line for systemd; and the `Status` reply.
extension FleetMirror {
    /// What the journal was last told, so an outage that repeats one failure every backoff
    /// writes one warning, not one per retry.
    struct Told: Sendable {
        /// The etcd member the last watch or listing went to.
        var member: String?
        /// The failure last logged; nil once a listing or an update went through.
        var failure: String?
        /// Left-out entries logged in the current minute (at most ``leftOutLinesPerMinute``),
        /// the minute's start, and how many more were not logged one by one.
        var leftOutLogged = 0
        var leftOutSince: ContinuousClock.Instant?
        var leftOutUnlogged = 0
    }

    /// How many left-out etcd keys the journal names one by one per minute; the others are
    /// counted in one line (100,000 unreadable keys must not flood the journal).
    static let leftOutLinesPerMinute = 50

    /// What `kvctl --system status` shows of the fleet. Any thread.
    var status: FleetStatus {
        let reflected = reflector.status
        let gateway = gateway?.status
        return FleetStatus(
            endpoints: gateway?.endpoints.map { $0.absoluteString } ?? [],
            memberInUse: gateway?.memberInUse.absoluteString,
            phase: Self.phaseName(reflected.phase), appliedRevision: reflected.appliedRevision,
            seenRevision: reflected.seenRevision,
            relists: reflected.relists, lastError: reflected.lastError ?? gateway?.lastError,
            problems: reflected.problems.map { $0.shortened() }, problemCount: reflected.problemCount,
            prefix: layout.prefix, domains: layout.patterns.map(\.text))
    }

    static func phaseName(_ phase: FleetReflectorStatus.Phase) -> String {
        switch phase {
        case .starting: "starting"
        case .listing: "listing"
        case .watching: "watching"
        case .waitingToRetry: "waiting to retry"
        case .stopped: "stopped"
        }
    }

    /// Logs one turn of the reflector's run and updates systemd's status line. The mirror's
    /// thread.
    func tell(_ event: FleetReflectorEvent) {
        let member = gateway?.status.memberInUse.absoluteString ?? "etcd"
        let previous = told.withLock { told in
            defer { told.member = member }
            return told
        }
        if let was = previous.member, was != member, event != .relisting {
            log.warning("fleet: failed over from etcd member \(was) to \(member)")
        }
        switch event {
        case .listed(let revision):
            told.withLock { $0.failure = nil }
            log.info("fleet: listed \(layout.prefix) from \(member) at etcd revision \(revision)")
            Systemd.notify("STATUS=fleet: mirrored at etcd revision \(revision) from \(member)")
        case .watching(let from):
            // Each retry of an outage starts a watch: one line for the first.
            let line = "fleet: watching etcd from revision \(from) through \(member)"
            if previous.failure != nil, previous.member == member { log.log(.debug, line) } else { log.info(line) }
            Systemd.notify("STATUS=fleet: watching \(member), etcd revision \(from - 1) applied")
        case .relisting:
            log.info("fleet: etcd compacted the revisions the mirror needed: listing again")
        case .historyReplaced(let reason):
            log.warning("fleet: \(reason)")
        case .leftOut(let problems):
            logLeftOut(problems)
        case .failed(let reason, let wait):
            told.withLock { $0.failure = reason }
            let line = "fleet: \(reason); retrying in \(Self.seconds(wait))"
            if previous.failure == reason { log.log(.debug, line) } else { log.warning(line) }
            Systemd.notify(
                "STATUS=fleet: etcd unreachable, serving the mirror at etcd revision \(appliedRevision): \(reason)")
        }
    }

    /// Logs each left-out entry with its reason (shortened, escaped to one line) while the
    /// minute's budget lasts; counts the rest in one line when the next minute starts.
    private func logLeftOut(_ problems: [FleetProblem]) {
        let now = ContinuousClock.now
        let (budget, unlogged) = told.withLock { told -> (Int, Int) in
            var unlogged = 0
            if told.leftOutSince.map({ now - $0 >= .seconds(60) }) ?? true {
                (told.leftOutSince, told.leftOutLogged, unlogged, told.leftOutUnlogged) = (
                    now, 0, told.leftOutUnlogged, 0
                )
            }
            let budget = min(problems.count, Self.leftOutLinesPerMinute - told.leftOutLogged)
            told.leftOutLogged += budget
            told.leftOutUnlogged += problems.count - budget
            return (budget, unlogged)
        }
        if unlogged > 0 {
            log.warning(
                "fleet: \(unlogged) more etcd key(s) were left out in the last minute (not logged one by one; kvctl --system status counts them)"
            )
        }
        for problem in problems.prefix(budget) { log.warning("fleet: " + problem.shortened().escapedForOneLine) }
        if budget > 0, budget < problems.count {  // the minute's budget ran out: once
            log.warning(
                "fleet: \(problems.count - budget) more etcd key(s) left out; the journal names at most \(Self.leftOutLinesPerMinute) a minute"
            )
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        let tenths = (duration / .milliseconds(100)).rounded()
        return "\(Int(tenths) / 10).\(Int(tenths) % 10) s"
    }
}
