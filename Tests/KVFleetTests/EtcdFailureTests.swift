import Foundation
import Glibc
import KVFleet
import Testing

/// Members killed, hung and compacted: one cluster, one test at a time (each disturbs it and
/// puts it back).
@Suite(
    .enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .etcdCluster(members: 3), .serialized,
    .timeLimit(.minutes(20)))
struct EtcdFailureTests {
    var cluster: EtcdCluster { EtcdCluster.shared! }

    /// A follower is killed (a dead leader would add an election, a few seconds of "request
    /// timed out", which is etcd's business, not the gateway's).
    @Test func killingTheMemberInUseFailsOverToAnother() async throws {
        let victim = try cluster.follower()
        let etcd = try EtcdGateway(endpoints: cluster.endpoints(startingWith: victim))
        let prefix = uniquePrefix("failover")
        _ = try etcd.range(from: bytes(prefix), end: [], revision: nil, limit: 0)
        #expect(etcd.status.memberInUse.absoluteString == cluster.clientURLs[victim])
        #expect(etcd.status.lastError == nil)

        cluster.signal(SIGKILL, member: victim)
        defer {  // put the cluster back for the next test, whatever happened
            try? cluster.start(victim)
            try? cluster.waitUntilHealthy()
        }
        let written = try await onThread {
            try etcd.commit(
                EtcdTransaction(
                    comparisons: [.modRevision(key: bytes(prefix + "k"), equals: 0)],
                    success: [.put(key: bytes(prefix + "k"), value: bytes("v"))]))
        }
        #expect(written.succeeded)
        let read = try await onThread { try etcd.range(from: bytes(prefix + "k"), end: [], revision: nil, limit: 0) }
        #expect(read.keyValues.map(\.value) == [bytes("v")])
        let status = etcd.status
        #expect(status.memberInUse.absoluteString != cluster.clientURLs[victim])
        #expect(status.lastError?.contains(URL(string: cluster.clientURLs[victim])!.port!.description) == true)
    }

    @Test func aWatchOnAHungMemberEndsAfterTheIdleLimitAndTheNextOneFailsOver() async throws {
        let hungMember = try cluster.follower()
        let etcd = try EtcdGateway(endpoints: cluster.endpoints(startingWith: hungMember))
        let prefix = uniquePrefix("hung")
        let start = try etcd.range(from: bytes(prefix), end: [], revision: nil, limit: 0).revision
        let cluster = cluster
        let ended = try await onThread { () throws -> (error: EtcdError?, waited: Duration) in
            var stoppedAt: ContinuousClock.Instant?
            do throws(EtcdError) {
                try etcd.watch(
                    from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: start + 1,
                    progressInterval: .milliseconds(500)
                ) { _ in
                    // The first message proves the stream works; then the member hangs.
                    if stoppedAt == nil {
                        cluster.signal(SIGSTOP, member: hungMember)
                        stoppedAt = .now
                    }
                    return true
                }
                return (nil, .zero)
            } catch {
                return (error, stoppedAt.map { .now - $0 } ?? .zero)
            }
        }
        defer {  // resumed, the member may call an election (3.4 has no pre-vote by default): wait it out
            cluster.signal(SIGCONT, member: hungMember)
            try? cluster.waitUntilHealthy()
        }
        let waited = ended.waited
        guard case .unreachable(let reason) = ended.error else {
            Issue.record("the watch should end as unreachable, not \(String(describing: ended.error))")
            return
        }
        #expect(reason.contains("no watch message"))
        let limit = EtcdGateway.idleLimit(progressInterval: .milliseconds(500))
        #expect(waited >= limit - .milliseconds(550))  // at most one interval passed before the stop
        #expect(waited < limit + .seconds(1))
        #expect(etcd.status.memberInUse.absoluteString != cluster.clientURLs[hungMember])

        // The next watch starts on another member and works while the hung one stays stopped.
        let progress = try await onThread { () throws -> Int64? in
            var revision: Int64?
            try etcd.watch(
                from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: start + 1,
                progressInterval: .milliseconds(500)
            ) { message in
                if case .progress(let seen) = message { revision = seen }
                return revision == nil
            }
            return revision
        }
        #expect(progress != nil)
    }

    @Test func readsAndWatchesAtACompactedRevisionThrowCompacted() async throws {
        let etcd = try EtcdGateway(endpoints: cluster.clientURLs)
        let prefix = uniquePrefix("compact")
        let old = try etcd.commit(EtcdTransaction(success: [.put(key: bytes(prefix + "k"), value: bytes("1"))]))
            .revision
        _ = try etcd.commit(EtcdTransaction(success: [.put(key: bytes(prefix + "k"), value: bytes("2"))]))
        let compactedAt = try etcd.commit(EtcdTransaction(success: [.put(key: bytes(prefix + "k"), value: bytes("3"))]))
            .revision
        try cluster.mustEtcdctl(["compact", String(compactedAt)])

        #expect(throws: EtcdError.compacted(compactedAt)) {
            _ = try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: old, limit: 0)
        }
        let watched = try await onThread { () -> EtcdError? in
            do throws(EtcdError) {
                try etcd.watch(
                    from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: old,
                    progressInterval: .milliseconds(500)
                ) { _ in false }
                return nil
            } catch {
                return error
            }
        }
        #expect(watched == .compacted(compactedAt))
        #expect(
            try etcd.range(from: bytes(prefix + "k"), end: [], revision: compactedAt, limit: 0).keyValues.map(\.value)
                == [bytes("3")])
    }
}
