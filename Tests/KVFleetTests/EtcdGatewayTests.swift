import Foundation
import KVFleet
import Synchronization
import Testing

/// Bytes of a string (etcd keys and values).
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// A prefix no other test uses.
func uniquePrefix(_ name: String) -> String { "\(name)-\(UInt64.random(in: 0...UInt64.max))/" }

/// Reads and writes through the gateway against one shared 3-member cluster: each test keeps to
/// its own key prefix, so they run in parallel.
@Suite(.enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .etcdCluster(members: 3))
struct EtcdGatewayTests {
    var cluster: EtcdCluster { EtcdCluster.shared! }

    func gateway() throws -> EtcdGateway { try EtcdGateway(endpoints: cluster.clientURLs) }

    @Test func rangePagesStayPinnedToTheRevisionOfTheFirstPage() async throws {
        let prefix = uniquePrefix("pages")
        let etcd = try gateway()
        for index in 0..<5 {
            _ = try etcd.commit(
                EtcdTransaction(success: [.put(key: bytes("\(prefix)k\(index)"), value: bytes("old\(index)"))]))
        }
        let first = try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 2)
        #expect(first.keyValues.map(\.value) == [bytes("old0"), bytes("old1")])
        #expect(first.more)
        // Changes after the first page: later pages read at its revision must not see them.
        _ = try etcd.commit(
            EtcdTransaction(success: [
                .put(key: bytes("\(prefix)k2"), value: bytes("new2")), .delete(key: bytes("\(prefix)k3")),
            ]))
        var values: [[UInt8]] = first.keyValues.map(\.value)
        var page = first
        while page.more {
            page = try etcd.range(
                from: page.keyValues.last!.key + [0], end: etcdPrefixEnd(bytes(prefix)), revision: first.revision,
                limit: 2)
            #expect(page.revision == first.revision)
            values += page.keyValues.map(\.value)
        }
        #expect(values == (0..<5).map { bytes("old\($0)") })
        let now = try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 0)
        #expect(now.keyValues.map(\.value) == [bytes("old0"), bytes("old1"), bytes("new2"), bytes("old4")])
        #expect(now.revision > first.revision)
    }

    @Test func anEmptyRangeHasNoKeysAndARevision() throws {
        let prefix = uniquePrefix("empty")
        let page = try gateway().range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 10)
        #expect(page.keyValues.isEmpty && !page.more && page.revision > 0)
    }

    @Test func aTransactionRunsOnlyWhenTheModRevisionsMatch() throws {
        let etcd = try gateway()
        let prefix = uniquePrefix("txn")
        let key = bytes(prefix + "a")
        let other = bytes(prefix + "b")
        // Mod revision 0: the key does not exist yet.
        let created = try etcd.commit(
            EtcdTransaction(
                comparisons: [.modRevision(key: key, equals: 0)], success: [.put(key: key, value: bytes("1"))]))
        #expect(created.succeeded)
        let stored = try etcd.range(from: key, end: [], revision: nil, limit: 0).keyValues
        #expect(stored == [EtcdKeyValue(key: key, value: bytes("1"), modRevision: created.revision)])

        let lost = try etcd.commit(
            EtcdTransaction(
                comparisons: [.modRevision(key: key, equals: created.revision - 1)],
                success: [.put(key: key, value: bytes("2"))],
                failure: [.put(key: other, value: bytes("failure branch"))]))
        #expect(!lost.succeeded)  // the gateway leaves `succeeded` out when false
        #expect(lost.revision > created.revision)  // the failure branch's put
        #expect(try etcd.range(from: key, end: [], revision: nil, limit: 0).keyValues.map(\.value) == [bytes("1")])
        #expect(
            try etcd.range(from: other, end: [], revision: nil, limit: 0).keyValues.map(\.value) == [
                bytes("failure branch")
            ])

        let won = try etcd.commit(
            EtcdTransaction(
                comparisons: [.modRevision(key: key, equals: created.revision)],
                success: [.put(key: key, value: []), .delete(key: other)]))
        #expect(won.succeeded)
        // An empty value (left out of the JSON) reads back as empty.
        #expect(
            try etcd.range(from: key, end: [], revision: nil, limit: 0).keyValues == [
                EtcdKeyValue(key: key, value: [], modRevision: won.revision)
            ])
        let cleared = try etcd.commit(
            EtcdTransaction(success: [.deleteRange(key: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)))]))
        #expect(cleared.succeeded)
        #expect(
            try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 0).keyValues
                .isEmpty)
    }

    @Test func aWatchSeesEventsInOrderWithATransactionsEventsTogether() async throws {
        let etcd = try gateway()
        let prefix = uniquePrefix("watch")
        let start = try etcd.range(from: bytes(prefix), end: [], revision: nil, limit: 0).revision
        _ = try etcd.commit(EtcdTransaction(success: [.put(key: bytes(prefix + "a"), value: bytes("1"))]))
        _ = try etcd.commit(
            EtcdTransaction(success: (0..<3).map { .put(key: bytes(prefix + "t\($0)"), value: bytes("x")) }))
        _ = try etcd.commit(EtcdTransaction(success: [.delete(key: bytes(prefix + "a"))]))
        let messages = try await onThread { () throws -> [EtcdWatchMessage] in
            var messages: [EtcdWatchMessage] = []
            var events = 0
            let deadline = ContinuousClock.now + .seconds(10)
            try etcd.watch(
                from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: start + 1,
                progressInterval: .milliseconds(500)
            ) { message in
                messages.append(message)
                if case .events(let batch, _) = message { events += batch.count }
                return events < 5 && ContinuousClock.now < deadline
            }
            return messages
        }
        let batches = messages.compactMap { message -> [EtcdEvent]? in
            if case .events(let events, _) = message { return events }
            return nil
        }
        let all = batches.flatMap { $0 }
        #expect(all.map(\.kind) == [.put, .put, .put, .put, .delete])
        #expect(
            all.map { String(decoding: $0.keyValue.key, as: UTF8.self) }
                == ["a", "t0", "t1", "t2", "a"].map { prefix + $0 })
        #expect(all.map(\.keyValue.modRevision) == all.map(\.keyValue.modRevision).sorted())
        // The transaction's three puts share one revision and arrive in one message.
        let transaction = try #require(batches.first { $0.contains { $0.keyValue.key == bytes(prefix + "t0") } })
        let together = transaction.filter { String(decoding: $0.keyValue.key, as: UTF8.self).hasPrefix(prefix + "t") }
        #expect(together.count == 3 && Set(together.map(\.keyValue.modRevision)).count == 1)
        #expect(all.last?.keyValue.value == [])
    }

    @Test func anIdleWatchGetsProgressNotifications() async throws {
        let etcd = try gateway()
        let prefix = uniquePrefix("idle")
        let start = try etcd.range(from: bytes(prefix), end: [], revision: nil, limit: 0).revision
        // Timed on the watching thread: the test's own task may wait for a busy thread pool.
        let (revisions, took) = try await onThread { () throws -> ([Int64], Duration) in
            var revisions: [Int64] = []
            let began = ContinuousClock.now
            try etcd.watch(
                from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: start + 1,
                progressInterval: .milliseconds(500)
            ) { message in
                if case .progress(let revision) = message { revisions.append(revision) }
                return revisions.count < 3
            }
            return (revisions, ContinuousClock.now - began)
        }
        #expect(revisions.count == 3)
        #expect(revisions.first! >= start)
        #expect(revisions == revisions.sorted())
        // Three notifications, one every 500 ms (the server's interval), with generous slack.
        #expect(took < .seconds(4))
    }

    @Test func requestsOverEtcdsLimitsAreRefusedAsTooLarge() throws {
        let etcd = try gateway()
        let prefix = uniquePrefix("large")
        let tooMany = EtcdTransaction(success: (0..<129).map { .put(key: bytes("\(prefix)\($0)"), value: bytes("v")) })
        #expect(isTooLarge { _ = try etcd.commit(tooMany) })
        // 1.5 MiB is etcd's default request limit; 3 MiB is also over gRPC's message limit.
        for size in [1_600_000, 3_000_000] {
            #expect(
                isTooLarge {
                    _ = try etcd.commit(
                        EtcdTransaction(success: [
                            .put(key: bytes(prefix + "big"), value: Array(repeating: 0x61, count: size))
                        ]))
                })
        }
        #expect(
            try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 0).keyValues
                .isEmpty)
        // Just under the limits passes.
        let fits = EtcdTransaction(success: (0..<128).map { .put(key: bytes("\(prefix)\($0)"), value: bytes("v")) })
        #expect(try etcd.commit(fits).succeeded)
    }

    @Test func aFutureRevisionIsAProtocolErrorWithEtcdsMessage() throws {
        let etcd = try gateway()
        let now = try etcd.range(from: bytes("x"), end: [], revision: nil, limit: 0).revision
        let error = #expect(throws: EtcdError.self) {
            _ = try etcd.range(from: bytes("x"), end: [], revision: now + 1000, limit: 0)
        }
        guard case .protocolError(let message) = error else {
            Issue.record("expected a protocol error, got \(String(describing: error))")
            return
        }
        #expect(message.contains("future revision"))
    }

    /// Behind a proxy that speaks only HTTP/1.1 the gRPC range cannot pass: the gateway lists
    /// through the JSON gateway instead, and says nothing went wrong.
    @Test func rangesGoThroughTheJSONGatewayWhenGRPCCannotPass() throws {
        let proxy = try HTTP1Proxy(target: cluster.clientURLs[0], folder: cluster.folder)
        defer { proxy.stop() }
        let etcd = try EtcdGateway(endpoints: [proxy.url])
        let prefix = uniquePrefix("proxied")
        for index in 0..<3 {
            _ = try etcd.commit(
                EtcdTransaction(success: [.put(key: bytes("\(prefix)k\(index)"), value: bytes("v\(index)"))]))
        }
        let page = try etcd.range(from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: nil, limit: 0)
        #expect(page.keyValues.map(\.value) == [bytes("v0"), bytes("v1"), bytes("v2")])
        let again = try etcd.range(
            from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), revision: page.revision, limit: 1)
        #expect(again.keyValues.map(\.value) == [bytes("v0")] && again.more)
    }
}

/// A plain HTTP/1.1 reverse proxy in Python in front of one etcd member (what a corporate proxy
/// or an old load balancer may be): POSTs pass, HTTP/2 does not.
final class HTTP1Proxy {
    let process: SpawnedProcess
    let url: String

    init(target: String, folder: String) throws {
        let script = """
            import http.server, sys, urllib.request, urllib.error
            target = sys.argv[1]
            class Handler(http.server.BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"
                def do_POST(self):
                    body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    request = urllib.request.Request(target + self.path, data=body, method="POST",
                                                     headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                    try:
                        with urllib.request.urlopen(request, timeout=10) as answer: status, data = answer.status, answer.read()
                    except urllib.error.HTTPError as error: status, data = error.code, error.read()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                def log_message(self, *args): pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        let output = folder + "/proxy-\(UInt32.random(in: 0...UInt32.max)).out"
        process = try SpawnedProcess("/usr/bin/python3", ["-c", script, target], output: output)
        var port = ""
        for _ in 0..<200 where port.isEmpty {
            port = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").trimmingCharacters(
                in: .whitespacesAndNewlines)
            if port.isEmpty { usleep(20_000) }
        }
        guard !port.isEmpty else { throw ClusterFailure("the HTTP/1.1 proxy did not start") }
        url = "http://127.0.0.1:\(port)"
    }

    /// SIGKILL: a child spawned from the test process inherits its blocked SIGTERM.
    func stop() {
        process.signal(SIGKILL)
        process.reap()
    }
}

/// Whether `body` throws the EtcdError `expected` accepts; records an issue saying what happened
/// otherwise.
func throwsEtcdError(_ expected: String, _ body: () throws -> Void, where accepted: (EtcdError) -> Bool) -> Bool {
    do {
        try body()
        Issue.record("expected \(expected), the call succeeded")
    } catch let error as EtcdError {
        if accepted(error) { return true }
        Issue.record("expected \(expected), got \(error)")
    } catch {
        Issue.record("expected \(expected), got \(error)")
    }
    return false
}

func isTooLarge(_ body: () throws -> Void) -> Bool {
    throwsEtcdError("tooLarge", body) {
        if case .tooLarge = $0 { true } else { false }
    }
}
