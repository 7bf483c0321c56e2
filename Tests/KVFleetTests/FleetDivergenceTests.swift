import Foundation
import Glibc
import KVConnection
import KVProtocol
import KVValues
import Testing

@testable import KVFleet

/// How the fleet stays in step with etcd, with the real programs on one shared 3-member etcd (each
/// test under its own `--etcd-prefix`): a large replayed watch batch, 100,000 unreadable values,
/// the left-out list in status and the journal, the fleet enabled over a host's own values, and a
/// transaction whose answer is lost. etcd wiped under a host has its own cluster
/// (``FleetWipeTests``).
@Suite(
    .enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .etcdCluster(members: 3), .serialized,
    .timeLimit(.minutes(20)))
struct FleetDivergenceTests {
    var cluster: EtcdCluster { EtcdCluster.shared! }

    /// A host on its own prefix of the shared cluster.
    func host(_ name: String, prefix: String, endpoints: [String]? = nil) throws -> FleetHost {
        try FleetHost(
            name, in: try FleetFailureTests.hostsFolder(cluster), cluster: cluster, endpoints: endpoints,
            extraArguments: ["--etcd-prefix", prefix],
            withUser: false)
    }

    /// A host SIGKILLed while 20 values of 1.2 MB are put comes back to one watch line of about
    /// 32 MB (etcd replays them together): it takes them in and goes on.
    @Test func aLargeReplayedBatchDoesNotStallTheHost() throws {
        let prefix = uniquePrefix("batch")
        let host = try host("batch", prefix: prefix)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        var last = try FleetFailureTests.put(writer, prefix + "values/com.corp.small/k", "0")
        _ = try host.status { $0.fleet?.appliedRevision == last }
        host.stopSystem(SIGKILL)
        let big = "\"" + String(repeating: "x", count: 1_200_000) + "\""
        for i in 0..<20 { try FleetFailureTests.put(writer, prefix + "values/com.corp.big\(i)/v", big) }
        try host.startSystem()
        last = try FleetFailureTests.put(writer, prefix + "values/com.corp.small/k", "1")
        let status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "\(status) \(host.logs())")
        #expect(try host.kvctl("get", "com.corp.big19", "v", system: true).output.count == 1_200_001)
        #expect(try host.kvctl("get", "com.corp.small", "k", system: true).output == "1\n")
    }

    /// 100,000 unreadable values (782 etcd revisions of 128) while a host watches; a good value put
    /// after them arrives, and the status counts them all but lists 100.
    @Test func manyUnreadableValuesDoNotHoldUpTheMirror() throws {
        let prefix = uniquePrefix("unreadable")
        let host = try host("unreadable", prefix: prefix)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        var last = try FleetFailureTests.put(writer, prefix + "values/com.corp.good/k", "0")
        _ = try host.status { $0.fleet?.appliedRevision == last }
        for batch in 0..<782 {
            let operations = (0..<128).compactMap { i -> EtcdTransaction.Operation? in
                let n = batch * 128 + i
                guard n < 100_000 else { return nil }
                return .put(key: bytes(prefix + "values/com.corp.bad/k\(n)"), value: bytes("not json"))
            }
            _ = try writer.commit(EtcdTransaction(success: operations))
        }
        last = try FleetFailureTests.put(writer, prefix + "values/com.corp.good/k", "1")
        #expect(try host.eventually("1", "get", "com.corp.good", "k", system: true), "\(host.logs())")
        let status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.problemCount == 100_000)
        #expect(status.fleet?.problems.count == FleetReflector.statusProblemLimit)
        #expect(
            status.fleet?.problems.first?.contains("com.corp.bad/k0\"") == true, "\(status.fleet?.problems.first ?? "")"
        )
        let log = host.systemLog()
        #expect(log.contains("more etcd key(s) left out; the journal names at most"), "the journal is not flooded")
    }

    /// Eight etcd keys of 1.3 MB with a NUL, and one that holds terminal controls and a forged
    /// status line: `kvctl --system status` answers, small, counting them, every name escaped as
    /// `kvctl keys` escapes it; the journal names each with its reason.
    @Test func theLeftOutListIsCappedEscapedAndLogged() throws {
        let prefix = uniquePrefix("status")
        let host = try host("status", prefix: prefix)
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        let long = String(repeating: "k", count: 1_300_000)
        for i in 0..<8 { try FleetFailureTests.put(writer, prefix + "values/com.corp.big/\u{0}\(i)\(long)", "1") }
        let forged = "\u{0}\u{1b}[2K\rFORGED\n  left out: nothing"
        let last = try FleetFailureTests.put(writer, prefix + "values/com.corp.big/" + forged, "1")
        // Only left-out keys: the applied revision stays, the seen one moves.
        let status = try host.status { $0.fleet?.problemCount == 9 && $0.fleet?.seenRevision ?? 0 >= last }
        #expect(status.fleet?.problemCount == 9, "\(host.logs().suffix(2000))")

        let shown = try host.kvctl("status", system: true)
        #expect(shown.status == 0, "\(shown.output.prefix(500))")
        #expect(shown.output.utf8.count < 64 * 1024, "\(shown.output.utf8.count) bytes")
        #expect(shown.output.contains("left out: 9 etcd key(s)"))
        #expect(shown.output.contains("\\x00\\x1b[2K\\rFORGED\\n  left out: nothing"), "\(shown.output.prefix(2000))")
        #expect(!shown.output.contains("\u{1b}") && !shown.output.contains("\u{0}") && !shown.output.contains("\r"))
        #expect(!shown.output.contains("\nFORGED"))
        let json = try host.kvctl("--json", "status", system: true)
        #expect(json.status == 0 && json.output.utf8.count < 64 * 1024)

        let log = host.systemLog()
        #expect(log.contains("FORGED\\n  left out: nothing\" (revision \(last)) is left out: "), "\(log.suffix(3000))")
        #expect(!log.contains("\nFORGED"))
    }

    /// A system instance holding its own `com.corp.mail server` (locked) restarted with
    /// `--fleet-domain 'com.corp.*'` refuses to start, says why, and loses nothing.
    @Test func theFleetOverAHostsOwnValuesRefusesToStart() throws {
        let folder = try FleetFailureTests.hostsFolder(cluster) + "/local"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let socket = folder + "/system.sock"
        let log = folder + "/system.log"
        let plain = ["--system", "--socket", socket, "--state-dir", folder + "/state", "--idle-exit", "0"]
        func kvctl(_ arguments: String...) throws -> (status: Int32, output: String) {
            let output = folder + "/kvctl.out"
            defer { unlink(output) }
            let status = try SpawnedProcess(
                fleetBinaries + "/kvctl", ["--system", "--socket", socket] + arguments, output: output
            ).reap()
            return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
        }
        var local = try FleetHost.start(plain, waitingFor: socket, log: log)
        #expect(try kvctl("set", "com.corp.mail", "server", "mx1").status == 0)
        #expect(try kvctl("lock", "com.corp.mail", "server").status == 0)
        local.signal(SIGTERM)
        local.reap()

        let fleet =
            plain + [
                "--etcd", cluster.clientURLs.joined(separator: ","), "--fleet-domain", "com.corp.*", "--etcd-prefix",
                uniquePrefix("local"),
            ]
        let starting = try SpawnedProcess(fleetBinaries + "/kvd", fleet, output: log)
        // A kvd that starts the fleet anyway never exits: stop it after 15 s (the test fails).
        let exited = Counter()
        Thread {
            if !exited.wait(atLeast: 0, within: 15) { starting.signal(SIGKILL) }
        }.start()
        let refused = starting.reap()
        exited.set(Int(refused))
        #expect(refused == 1, "kvd should refuse to start (137: it started the fleet over the values)")
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains("covers this host's own values"), "\(said.suffix(1500))")
        #expect(said.contains("com.corp.mail (1 value(s), 1 lock(s))"), "\(said.suffix(1500))")

        local = try FleetHost.start(plain, waitingFor: socket, log: log)
        defer {
            local.signal(SIGTERM)
            local.reap()
        }
        #expect(try kvctl("get", "com.corp.mail", "server").output == "mx1\n", "nothing was lost")
        #expect(try kvctl("locks").output == "com.corp.mail server\n")
    }

    /// A proxy in front of etcd throws away the answer to the transaction (etcd committed it): the
    /// host reads the key back, finds its change and acknowledges it.
    @Test func aLostTransactionAnswerIsReadBack() throws {
        let prefix = uniquePrefix("lost")
        let proxy = try LossyProxy(to: cluster.clientURLs[0])
        defer { proxy.stop() }
        let host = try host("lost", prefix: prefix, endpoints: [proxy.url])
        let writer = try EtcdGateway(endpoints: cluster.clientURLs)
        let last = try FleetFailureTests.put(writer, prefix + "values/com.corp.lost/k", "\"old\"")
        _ = try host.status { $0.fleet?.appliedRevision == last }

        let written = try host.kvctl("set", "com.corp.lost", "k", "new", system: true)
        #expect(proxy.droppedAnswers >= 1, "the proxy dropped the answer")
        #expect(written.status == 0, "\(written.output) \(host.logs())")
        #expect(try FleetFailureTests.etcdContents(writer, prefix + "values/com.corp.lost/") == ["k": "\"new\""])
        #expect(
            try host.kvctl("get", "com.corp.lost", "k", system: true).output == "new\n", "the host reads its own write")
    }
}

/// etcd wiped under a running host (stopped, data folders removed, started again: its revision back
/// to 1).
@Suite(.enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .timeLimit(.minutes(20)))
struct FleetWipeTests {
    @Test func aRevisionGoingBackMakesTheHostListAgainAndReadItsOwnWrites() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let host = try FleetHost("a", in: try FleetFailureTests.hostsFolder(cluster), cluster: cluster, withUser: false)
        var writer = try EtcdGateway(endpoints: cluster.clientURLs)
        var last: Int64 = 0
        for i in 0..<30 { last = try FleetFailureTests.put(writer, "kvd/values/com.corp.rg/k\(i)", "\(i)") }
        #expect(try host.status { $0.fleet?.appliedRevision == last }.fleet?.appliedRevision == last, "\(host.logs())")

        try cluster.wipe()
        writer = try EtcdGateway(endpoints: cluster.clientURLs)
        // At once, before the mirror may have noticed: the write must still be read back.
        let written = try host.kvctl("set", "com.corp.rg", "viahost", "mine", system: true)
        #expect(written.status == 0, "\(written.output) \(host.logs())")
        #expect(try host.kvctl("get", "com.corp.rg", "viahost", system: true).output == "mine\n", "\(host.logs())")
        last = try FleetFailureTests.put(writer, "kvd/values/com.corp.rg/new", "1")
        let status = try host.status { $0.fleet?.appliedRevision == last }
        #expect(status.fleet?.appliedRevision == last, "\(status) \(host.logs())")
        #expect(try FleetFailureTests.mirrored(host, "com.corp.rg") == ["new": "1", "viahost": "\"mine\""])
        #expect(host.systemLog().contains("wiped or restored"))

        // Another cluster (another cluster ID) whose revision has passed the host's while the
        // host was stopped: on restart the host notices the ID and lists again, rather than
        // going on from its revision with the new cluster's later events.
        host.stopSystem()
        try cluster.wipe(newToken: "another-cluster")
        writer = try EtcdGateway(endpoints: cluster.clientURLs)
        var expected: [String: String] = [:]
        for i in 0..<Int(last) + 5 {
            last = try FleetFailureTests.put(writer, "kvd/values/com.corp.rg/n\(i)", "\(i)")
            expected["n\(i)"] = "\(i)"
        }
        try host.startSystem()
        let relisted = try host.status { $0.fleet?.appliedRevision == last && $0.fleet?.phase == "watching" }
        #expect(relisted.fleet?.appliedRevision == last, "\(relisted) \(host.logs())")
        #expect(try FleetFailureTests.mirrored(host, "com.corp.rg") == expected, "\(host.logs())")
        #expect(host.systemLog().contains("cluster ID changed"))
    }
}
