import FoundationEssentials
import KVFleet
import KVStorage
import KVProtocol
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
    }

    /// What `kvctl --system status` shows of the fleet. Any thread.
    var status: FleetStatus {
        let reflected = reflector.status
        let gateway = gateway?.status
        return FleetStatus(
            endpoints: gateway?.endpoints.map { $0.absoluteString } ?? [], memberInUse: gateway?.memberInUse.absoluteString,
            phase: Self.phaseName(reflected.phase), appliedRevision: reflected.appliedRevision, seenRevision: reflected.seenRevision,
            relists: reflected.relists, lastError: reflected.lastError ?? gateway?.lastError, problems: reflected.problems.map(\.description),
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
        case .failed(let reason, let wait):
            told.withLock { $0.failure = reason }
            let line = "fleet: \(reason); retrying in \(Self.seconds(wait))"
            if previous.failure == reason { log.log(.debug, line) } else { log.warning(line) }
            Systemd.notify("STATUS=fleet: etcd unreachable, serving the mirror at etcd revision \(appliedRevision): \(reason)")
        }
    }

    private static func seconds(_ duration: Duration) -> String {
        let tenths = (duration / .milliseconds(100)).rounded()
        return "\(Int(tenths) / 10).\(Int(tenths) % 10) s"
    }
}
