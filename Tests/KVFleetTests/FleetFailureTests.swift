import Foundation
import Glibc
import KVConnection
import KVProtocol
import KVTestSupport
import KVValues
import Testing

@testable import KVFleet

/// The fleet when things break, with the real programs: etcd members killed or hung, no quorum, a
/// host stopped across a compaction, a host killed during a burst, two hosts racing, and etcd with
/// expiring tokens.
///
/// "Nothing lost or applied twice" is checked by counting: the system instance commits each
/// etcd revision that changes its domains as one store revision, so N etcd changes must move
/// the host's store revision by exactly N, and the mirror must end equal to etcd.
@Suite(.enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .serialized)
struct FleetFailureTests {
    static func hostsFolder(_ cluster: EtcdCluster) throws -> String {
        let root = cluster.folder + "/hosts"
        try FileManager.default.createDirectory(
            atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return root
    }

    /// Puts `value` (typed JSON) at `etcdKey`; etcd's revision of the change.
    @discardableResult
    static func put(_ etcd: EtcdGateway, _ etcdKey: String, _ value: String) throws -> Int64 {
        try etcd.commit(EtcdTransaction(success: [.put(key: bytes(etcdKey), value: bytes(value))])).revision
    }

    /// What etcd holds under `prefix` (a linearizable read): key after the prefix → value.
    static func etcdContents(_ etcd: EtcdGateway, _ prefix: String) throws -> [String: String] {
        let page = try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 0)
        return Dictionary(
            uniqueKeysWithValues: page.keyValues.map {
                (
                    String(decoding: $0.key.dropFirst(prefix.utf8.count), as: UTF8.self),
                    String(decoding: $0.value, as: UTF8.self)
                )
            })
    }

    /// A host's domain as key → typed JSON text, from `kvctl --system get DOMAIN --json`.
    static func mirrored(_ host: FleetHost, _ domain: String) throws -> [String: String] {
        let run = try host.kvctl("--json", "get", domain, system: true)
        guard run.status == 0 else { return [:] }
        let object =
            try JSONSerialization.jsonObject(with: Data(run.output.utf8), options: [.fragmentsAllowed])
            as? [String: Any] ?? [:]
        return object.mapValues { value in
            let data = try! JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys])
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// The member a host uses is killed, then the next one is hung (SIGSTOP: its connections stay
    /// open and silent). The host fails over each time, and every etcd change is applied exactly
    /// once.
    @Test func aHostFailsOverFromAKilledOrHungMemberAndAppliesEachChangeOnce() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let first = try cluster.follower()
        let host = try FleetHost(
            "a", in: try Self.hostsFolder(cluster), cluster: cluster, endpoints: cluster.endpoints(startingWith: first),
            withUser: false)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        var last = try Self.put(writer, "kvd/values/com.corp.app/k0", "0")
        var status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.memberInUse == cluster.clientURLs[first], "\(status) \(host.logs())")
        let start = status.revision

        // SIGKILL of the member in use, in the middle of 40 changes.
        for i in 1...20 { last = try Self.put(writer, "kvd/values/com.corp.app/k\(i % 7)", "\(i)") }
        cluster.signal(SIGKILL, member: first)
        for i in 21...40 { last = try Self.put(writer, "kvd/values/com.corp.app/k\(i % 7)", "\(i)") }
        status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "\(status) \(host.logs())")
        #expect(status.fleet?.memberInUse != cluster.clientURLs[first], "it failed over")
        #expect(status.revision - start == 40, "40 etcd changes, 40 commits: none lost or applied twice (\(status))")
        #expect(try Self.mirrored(host, "com.corp.app") == Self.etcdContents(writer, "kvd/values/com.corp.app/"))
        #expect(host.systemLog().contains("failed over from etcd member \(cluster.clientURLs[first])"))

        // SIGSTOP of the member now in use: only the idle timeout (no event, no progress
        // notification for twice the interval) can tell.
        try cluster.start(first)
        try cluster.waitUntilHealthy()
        let hung = try #require(cluster.clientURLs.firstIndex(of: status.fleet?.memberInUse ?? ""))
        let others = cluster.clientURLs.indices.filter { $0 != hung }.map { cluster.clientURLs[$0] }
        let survivor = try EtcdGateway(endpoints: others)
        cluster.signal(SIGSTOP, member: hung)
        // a new leader, if it led
        try cluster.waitUntilHealthy(members: cluster.clientURLs.indices.filter { $0 != hung })
        for i in 41...60 { last = try Self.put(survivor, "kvd/values/com.corp.app/k\(i % 7)", "\(i)") }
        status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "the hung member was left: \(status) \(host.logs())")
        #expect(status.fleet?.memberInUse != cluster.clientURLs[hung])
        cluster.signal(SIGCONT, member: hung)
        try cluster.waitUntilHealthy()
        last = try Self.put(writer, "kvd/values/com.corp.app/k0", "61")
        status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.revision - start == 61, "SIGCONT changed nothing: 61 changes, 61 commits (\(status))")
        #expect(try Self.mirrored(host, "com.corp.app") == Self.etcdContents(writer, "kvd/values/com.corp.app/"))
    }

    /// Two of three members stopped. A write through a host fails and changes nothing; reads go on
    /// from the mirror; once the members are back, the hosts catch up and writes work again.
    @Test func withoutQuorumWritesFailReadsGoOnAndTheHostsCatchUpAfter() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let root = try Self.hostsFolder(cluster)
        let a = try FleetHost("a", in: root, cluster: cluster)
        let b = try FleetHost("b", in: root, cluster: cluster)
        #expect(try a.kvctl("set", "com.corp.net", "proxy", "p1", system: true).status == 0, "\(a.logs())")
        #expect(try b.eventually("p1", "get", "com.corp.net", "proxy"))

        let stopped = [1, 2]
        for member in stopped { cluster.signal(SIGSTOP, member: member) }
        let refused = try a.kvctl("set", "com.corp.net", "proxy", "p2", system: true)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("etcd"), "the message says etcd is the trouble: \(refused.output)")
        #expect(try a.kvctl("get", "com.corp.net", "proxy", system: true).output == "p1\n")
        #expect(try b.kvctl("get", "com.corp.net", "proxy").output == "p1\n", "users read on from the mirror")

        for member in stopped { cluster.signal(SIGCONT, member: member) }
        try cluster.waitUntilHealthy()
        #expect(
            try cluster.mustEtcdctl(["get", "--print-value-only", "kvd/values/com.corp.net/proxy"]) == "\"p1\"\n",
            "the refused write changed nothing")
        _ = try cluster.mustEtcdctl(["put", "kvd/values/com.corp.net/proxy", "\"p3\""])
        for host in [a, b] { #expect(try host.eventually("p3", "get", "com.corp.net", "proxy"), "\(host.logs())") }
        #expect(try b.kvctl("set", "com.corp.net", "proxy", "p4", system: true).status == 0)
        #expect(try a.eventually("p4", "get", "com.corp.net", "proxy"))
    }

    /// A host stopped while keys change and are deleted, then etcd compacts and defragments: on
    /// restart the host lists again, the deleted keys and locks are gone, and nothing else changed
    /// (its own non-fleet domains included).
    @Test func aHostStoppedAcrossACompactionListsAgainOnRestart() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let root = try Self.hostsFolder(cluster)
        let a = try FleetHost("a", in: root, cluster: cluster, withUser: false)
        let b = try FleetHost("b", in: root, cluster: cluster, withUser: false)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        for i in 1...5 { try Self.put(writer, "kvd/values/com.corp.app/k\(i)", "\(i)") }
        try Self.put(writer, "kvd/values/com.corp.other/x", "1")
        var last = try Self.put(writer, "kvd/locks/com.corp.app/k1", "1")
        for host in [a, b] { _ = try host.status { $0.fleet?.appliedRevision == last } }
        #expect(try a.kvctl("set", "org.local", "kept", "yes", system: true).status == 0)

        a.stopSystem()
        try Self.put(writer, "kvd/values/com.corp.app/k1", "10")
        _ = try cluster.mustEtcdctl(["del", "kvd/values/com.corp.app/k2"])
        _ = try cluster.mustEtcdctl(["del", "kvd/values/com.corp.other/x"])
        _ = try cluster.mustEtcdctl(["del", "kvd/locks/com.corp.app/k1"])
        try Self.put(writer, "kvd/locks/com.corp.app/k3", "1")
        last = try Self.put(writer, "kvd/values/com.corp.app/k6", "6")
        _ = try cluster.mustEtcdctl(["compact", String(last)])
        _ = try cluster.mustEtcdctl(["defrag"])
        try a.startSystem()

        let status = try a.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "\(status) \(a.logs())")
        #expect(status.fleet?.relists == 1, "\(status)")
        #expect(a.logs().contains("listing again"))
        _ = try b.status { $0.fleet?.appliedRevision == last }
        let expected = ["k1": "10", "k3": "3", "k4": "4", "k5": "5", "k6": "6"]
        #expect(try Self.mirrored(a, "com.corp.app") == expected)
        #expect(try Self.mirrored(b, "com.corp.app") == expected)
        #expect(try a.kvctl("get", "com.corp.other", "x", system: true).status == 1, "the deleted key is gone")
        #expect(try a.kvctl("locks", system: true).output == "com.corp.app k3\n")
        #expect(
            try a.kvctl("get", "org.local", "kept", system: true).output == "yes\n",
            "the host's own domains are untouched")
    }

    /// A host killed (SIGKILL) during a burst of 1,000 etcd changes (values set and deleted, keys
    /// locked and unlocked), restarted during it: its mirror ends equal to a linearizable read of
    /// etcd.
    @Test func aHostKilledDuringABurstEndsEqualToEtcd() async throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let host = try FleetHost("a", in: try Self.hostsFolder(cluster), cluster: cluster, withUser: false)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        let done = Counter()
        let burst = Task.detached { () throws -> Int64 in
            var generator = SeededGenerator.forTest()
            for i in 0..<1000 {
                let key = "k\(Int.random(in: 0..<40, using: &generator))"
                let operation: EtcdTransaction.Operation
                switch i % 10 {
                case 7: operation = .delete(key: bytes("kvd/values/com.corp.burst/" + key))
                case 8: operation = .put(key: bytes("kvd/locks/com.corp.burst/" + key), value: bytes("1"))
                case 9: operation = .delete(key: bytes("kvd/locks/com.corp.burst/" + key))
                default: operation = .put(key: bytes("kvd/values/com.corp.burst/" + key), value: bytes("\(i)"))
                }
                _ = try writer.commit(EtcdTransaction(success: [operation]))
                done.set(i)
            }
            return try Self.put(writer, "kvd/values/com.corp.burst/end", "1000")
        }
        #expect(done.wait(atLeast: 300), "the burst stopped at \(done.value)")
        host.stopSystem(SIGKILL)
        #expect(done.wait(atLeast: 600), "the burst stopped at \(done.value)")
        try host.startSystem()
        let last = try await burst.value

        let status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "\(status) \(host.logs())")
        #expect(try Self.mirrored(host, "com.corp.burst") == Self.etcdContents(writer, "kvd/values/com.corp.burst/"))
        let locks = try Self.etcdContents(writer, "kvd/locks/com.corp.burst/").keys.sorted()
        #expect(try host.kvctl("locks", "com.corp.burst", system: true).output == locks.map { $0 + "\n" }.joined())
    }

    /// Two hosts write one key with `ifRevision` (each the revision it read) at the same moment:
    /// one wins, the other gets RevisionMismatch, and every host ends with the winner's value. Five
    /// rounds.
    @Test func theLoserOfAnIfRevisionRaceGetsRevisionMismatch() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let root = try Self.hostsFolder(cluster)
        let hosts = [
            try FleetHost("a", in: root, cluster: cluster, withUser: false),
            try FleetHost("b", in: root, cluster: cluster, withUser: false),
        ]
        let domain = try Domain(validating: "com.corp.mail")
        let key = try Key(validating: "port")
        #expect(try hosts[0].kvctl("set", "com.corp.mail", "port", "-int", "1", system: true).status == 0)
        #expect(try hosts[1].eventually("1", "get", "com.corp.mail", "port", system: true))
        for round in 0..<5 {
            let connections = try hosts.map { try Connection(socketPath: $0.systemSocket) }
            defer { for connection in connections { connection.close() } }
            let read = try connections.map { try $0.get(domain, key).revision }
            let outcomes = Outcomes()
            let writers = (0..<2).map { (index: Int) -> Thread in
                let value = Value.integer(Int64(100 * round + index))
                return Thread {
                    do {
                        _ = try connections[index].set(domain, key, value, ifRevision: read[index])
                        outcomes.add(index, "won")
                    } catch ClientError.revisionMismatch {
                        outcomes.add(index, "mismatch")
                    } catch {
                        outcomes.add(index, "\(error)")
                    }
                }
            }
            for writer in writers { writer.start() }
            let results = outcomes.wait(for: 2)
            #expect(results.values.sorted() == ["mismatch", "won"], "round \(round): \(results)")
            guard let winner = results.first(where: { $0.value == "won" })?.key else { continue }
            let value = String(100 * round + winner)
            #expect(
                try cluster.mustEtcdctl(["get", "--print-value-only", "kvd/values/com.corp.mail/port"]) == value + "\n")
            for host in hosts { #expect(try host.eventually(value, "get", "com.corp.mail", "port", system: true)) }
        }
    }

    /// etcd with authentication and simple tokens that expire after 2 s idle. The host reads its
    /// credentials from a root-only file, and mirrors and writes on after its token expired.
    @Test func withExpiringTokensTheHostRenewsAndGoesOn() throws {
        let cluster = try EtcdCluster(members: 1, extraFlags: ["--auth-token", "simple", "--auth-token-ttl", "2"])
        defer { cluster.stop() }
        try enableAuthentication(cluster)
        let root = try Self.hostsFolder(cluster)
        let authFile = root + "/etcd-auth"
        _ = FileManager.default.createFile(
            atPath: authFile, contents: Data("root:root-secret\n".utf8), attributes: [.posixPermissions: 0o600])
        let host = try FleetHost(
            "a", in: root, cluster: cluster, extraArguments: ["--etcd-auth-file", authFile], withUser: false)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs, credentials: EtcdAuthTests.root)
        var last = try Self.put(writer, "kvd/values/com.corp.auth/k", "1")
        #expect(try host.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(host.logs())")

        Thread.sleep(forTimeInterval: 3.5)  // past the TTL: the host's token has expired
        last = try Self.put(writer, "kvd/values/com.corp.auth/k", "2")
        #expect(try host.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(host.logs())")
        Thread.sleep(forTimeInterval: 3.5)
        let written = try host.kvctl("set", "com.corp.auth", "k", "-int", "3", system: true)
        #expect(written.status == 0, "\(written.output) \(host.logs())")
        #expect(try Self.etcdContents(writer, "kvd/values/com.corp.auth/") == ["k": "3"])

        // `etcdctl auth disable` under the running host, then a host started with the credentials
        // on the cluster now without auth: both go on unauthenticated, each saying so once.
        try cluster.mustEtcdctl(["--user", "root:root-secret", "auth", "disable"])
        let open = try EtcdGateway(endpoints: cluster.clientURLs)
        Thread.sleep(forTimeInterval: 2.5)  // past the TTL: the host's token has expired
        last = try Self.put(open, "kvd/values/com.corp.auth/k", "4")
        #expect(try host.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(host.logs())")
        #expect(try host.kvctl("set", "com.corp.auth", "k", "-int", "5", system: true).status == 0, "\(host.logs())")
        last = try Self.put(open, "kvd/values/com.corp.auth/k", "6")
        let later = try FleetHost(
            "b", in: root, cluster: cluster, extraArguments: ["--etcd-auth-file", authFile], withUser: false)
        #expect(
            try later.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(later.logs())")
        #expect(
            later.systemLog().contains("authentication is not enabled: calling it without the credentials"),
            "\(later.logs())")
    }

    /// `https://` members: with `--etcd-ca-file` (the authority that signed etcd's certificate)
    /// the host mirrors and writes; without it the certificate is refused, and the status and
    /// the error say why.
    @Test func httpsMembersWorkWithTheirAuthority() throws {
        let cluster = try EtcdCluster(members: 1, tls: true)
        defer { cluster.stop() }
        let caFile = try #require(cluster.caFile)
        #expect(cluster.clientURLs.allSatisfy { $0.hasPrefix("https://") })
        let root = try Self.hostsFolder(cluster)
        let host = try FleetHost(
            "a", in: root, cluster: cluster, extraArguments: ["--etcd-ca-file", caFile], withUser: false)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs, caFile: caFile)
        let last = try Self.put(writer, "kvd/values/com.corp.tls/k", "1")
        #expect(try host.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(host.logs())")
        #expect(try host.kvctl("set", "com.corp.tls", "k", "-int", "2", system: true).status == 0, "\(host.logs())")
        #expect(try Self.etcdContents(writer, "kvd/values/com.corp.tls/") == ["k": "2"])

        let untrusting = try FleetHost("b", in: root, cluster: cluster, withUser: false)
        let refused = try untrusting.status { $0.fleet?.lastError != nil }
        #expect(refused.fleet?.appliedRevision == 0)
        #expect(refused.fleet?.lastError?.contains("certificate") == true, "\(refused)")
        #expect(throws: EtcdError.self) {
            try EtcdGateway(endpoints: cluster.clientURLs).range(from: bytes("k"), end: [], revision: nil, limit: 1)
        }
    }
}

/// A number one thread sets and another reads.
final class Counter: @unchecked Sendable {
    private let condition = NSCondition()
    private var current = -1
    var value: Int { condition.withLock { current } }

    func set(_ value: Int) {
        condition.withLock {
            current = value
            condition.broadcast()
        }
    }

    /// Waits (`seconds` at most) until the count reaches `target`; whether it did.
    func wait(atLeast target: Int, within seconds: Double = 60) -> Bool {
        condition.withLock {
            let deadline = Date().addingTimeInterval(seconds)
            while current < target, condition.wait(until: deadline) {}
            return current >= target
        }
    }
}

/// What racing threads report, by index.
final class Outcomes: @unchecked Sendable {
    private let condition = NSCondition()
    private var results: [Int: String] = [:]

    func add(_ index: Int, _ result: String) {
        condition.withLock {
            results[index] = result
            condition.broadcast()
        }
    }

    /// Waits (30 s at most) until `count` results are in.
    func wait(for count: Int) -> [Int: String] {
        condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while results.count < count, condition.wait(until: deadline) {}
            return results
        }
    }
}
