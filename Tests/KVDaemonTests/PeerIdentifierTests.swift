import Glibc
import KVSystem
import KVTestSupport
import Testing

@testable import KVDaemon

/// The loop keeps each identified peer's pidfd until its pass's replies are out
/// (``PeerIdentifier/closeSpent()``): never at the cost of a connection.
@Suite struct PeerIdentifierTests {
    /// Out of descriptors with pidfds kept, those are closed and the peer identified after all,
    /// as it would have been had each pidfd been closed at once.
    @Test func pidfdsKeptForThePassAreGivenBackBeforeAPeerGoesUnidentified() throws {
        let system = FaultInjectingSystem()
        let peers = PeerIdentifier(system: system)
        var ends: [Int32] = []
        defer { for fd in ends { close(fd) } }
        for _ in 0..<6 {
            var pair: [Int32] = [-1, -1]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
            ends += pair
        }
        system.limitDescriptors(free: 3)
        defer { system.limitDescriptors(free: nil) }
        for daemonEnd in stride(from: 1, to: ends.count, by: 2).map({ ends[$0] }) {
            guard case .identified(let peer) = try peers.begin(daemonEnd) else {
                Issue.record("a socket pair's peer is this process, in kvd's own root")
                continue
            }
            #expect(peer.isConfirmed && peer.credentials.pid == getpid())
        }
        #expect(peers.closeSpent(), "the last ones' pidfds were kept for the pass")
        #expect(!peers.closeSpent())
    }
}
