import Foundation
import Glibc
import Testing

@testable import KVFleet

/// etcd with authentication and simple tokens that expire after 2 s idle (`--auth-token-ttl`,
/// etcd 3.4.10+; checked once a second).
@Suite(
    .enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled),
    .etcdCluster(
        members: 1, extraFlags: ["--auth-token", "simple", "--auth-token-ttl", "2"], setup: enableAuthentication))
struct EtcdAuthTests {
    static let root = EtcdCredentials(name: "root", password: "root-secret")
    var cluster: EtcdCluster { EtcdCluster.shared! }

    @Test func withoutCredentialsOrWithAWrongPasswordCallsAreRefused() throws {
        #expect(
            isAuthentication {
                _ = try EtcdGateway(endpoints: cluster.clientURLs).range(
                    from: bytes("k"), end: [], revision: nil, limit: 0)
            })
        let wrong = EtcdCredentials(name: "root", password: "wrong")
        #expect(
            isAuthentication {
                _ = try EtcdGateway(endpoints: cluster.clientURLs, credentials: wrong).range(
                    from: bytes("k"), end: [], revision: nil, limit: 0)
            })
    }

    @Test func anExpiredTokenIsRenewedForReadsWritesAndWatches() async throws {
        let etcd = try EtcdGateway(endpoints: cluster.clientURLs, credentials: Self.root)
        let prefix = uniquePrefix("auth")
        let written = try etcd.commit(EtcdTransaction(success: [.put(key: bytes(prefix + "k"), value: bytes("v"))]))
        #expect(written.succeeded)
        let staleToken = try #require(try etcd.currentToken(renew: false))

        try await Task.sleep(for: .milliseconds(3500))  // past the 2 s TTL (checked each second)
        // The token did expire: etcd refuses it.
        let url = URL(string: cluster.clientURLs[0])!.appendingPathComponent("/v3/kv/range")
        let refused = try etcd.transport.post(
            url, body: GatewayJSON.encode(RangeRequestJSON(key: GatewayJSON.base64(bytes("k")))), token: staleToken)
        #expect(refused.status != 200)
        #expect(String(decoding: refused.body, as: UTF8.self).contains("invalid auth token"))

        // A watch with the stale token is cancelled by etcd; the gateway renews and watches on.
        let progress = try await onThread { () throws -> Int64? in
            var revision: Int64?
            try etcd.watch(
                from: bytes(prefix), end: etcdPrefixEnd(bytes(prefix)), startRevision: written.revision + 1,
                progressInterval: .milliseconds(500)
            ) { message in
                if case .progress(let seen) = message { revision = seen }
                return revision == nil
            }
            return revision
        }
        #expect(progress != nil)
        #expect(try etcd.currentToken(renew: false) != staleToken)

        try await Task.sleep(for: .milliseconds(3500))
        #expect(
            try etcd.range(from: bytes(prefix + "k"), end: [], revision: nil, limit: 0).keyValues.map(\.value) == [
                bytes("v")
            ])
        #expect(try etcd.commit(EtcdTransaction(success: [.delete(key: bytes(prefix + "k"))])).succeeded)
    }
}

/// Creates root (with the root role) and enables authentication.
@Sendable func enableAuthentication(_ cluster: EtcdCluster) throws {
    try cluster.mustEtcdctl(["user", "add", "root:root-secret"])
    try cluster.mustEtcdctl(["role", "add", "root"])
    try cluster.mustEtcdctl(["user", "grant-role", "root", "root"])
    try cluster.mustEtcdctl(["auth", "enable"])
}

func isAuthentication(_ body: () throws -> Void) -> Bool {
    throwsEtcdError("an authentication error", body) {
        if case .authentication = $0 { true } else { false }
    }
}
