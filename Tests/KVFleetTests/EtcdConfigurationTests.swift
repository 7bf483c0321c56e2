import Foundation
import Glibc
import KVFleet
import Testing

/// The auth file and the endpoint list, checked before anything connects.
@Suite struct EtcdConfigurationTests {
    /// Writes `text` to a fresh file with `mode`; returns its path (removed by the caller).
    func authFile(_ text: String, mode: mode_t = 0o600) throws -> String {
        let path = NSTemporaryDirectory() + "kvd-etcd-auth-\(UInt64.random(in: 0...UInt64.max))"
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, mode)
        return path
    }

    func refusal(_ path: String) -> String? { etcdAuthFileRefusal(path) }

    @Test func anAuthFileHoldsNameAndPasswordOnTwoLinesOrWithAColon() throws {
        for (text, password) in [("kvd\nse:cret\n", "se:cret"), ("kvd:se:cret", "se:cret"), ("kvd\r\npw\r\n", "pw")] {
            let path = try authFile(text)
            defer { unlink(path) }
            #expect(try EtcdCredentials.read(fromFile: path) == EtcdCredentials(name: "kvd", password: password))
        }
    }

    @Test func anAuthFileOthersMayReadIsRefused() throws {
        let path = try authFile("kvd:secret", mode: 0o640)
        defer { unlink(path) }
        #expect(refusal(path)?.contains("group and others must have no access (chmod 600") == true)
    }

    @Test(.enabled(if: geteuid() == 0, "needs root: only root can give a file away"))
    func anAuthFileOwnedBySomeoneElseIsRefused() throws {
        let path = try authFile("kvd:secret")
        defer { unlink(path) }
        #expect(chown(path, 65534, 65534) == 0)
        #expect(refusal(path)?.contains("is owned by uid 65534") == true)
    }

    @Test func anAuthFileWithoutAPasswordOrMissingIsRefused() throws {
        for text in ["kvd", "kvd:", "kvd\n\n", "a\nb\nc\n", ""] {
            let path = try authFile(text)
            defer { unlink(path) }
            #expect(refusal(path) != nil, "accepted \(text.debugDescription)")
        }
        #expect(refusal("/nonexistent/kvd-etcd-auth")?.contains("cannot open the etcd auth file") == true)
    }

    @Test func endpointsMustBeHTTPURLs() {
        for endpoints in [[], ["127.0.0.1:2379"], ["ftp://host:2379"], ["http://"]] {
            #expect(throws: EtcdError.self) { _ = try EtcdGateway(endpoints: endpoints) }
        }
        #expect(throws: Never.self) {
            _ = try EtcdGateway(endpoints: ["http://10.0.0.1:2379", "https://etcd.example:2379"])
        }
    }

    @Test func noReachableEndpointIsUnreachableWithEveryReason() throws {
        // Port 1 on 127.0.0.1: nothing listens, the connection is refused at once.
        let etcd = try EtcdGateway(endpoints: ["http://127.0.0.1:1", "http://127.0.0.2:1"])
        let error = #expect(throws: EtcdError.self) {
            _ = try etcd.range(from: bytes("k"), end: [], revision: nil, limit: 0)
        }
        guard case .unreachable(let reason) = error else {
            Issue.record("expected unreachable, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("127.0.0.1:1") && reason.contains("127.0.0.2:1"))
        #expect(etcd.status.lastError != nil)
    }
}
