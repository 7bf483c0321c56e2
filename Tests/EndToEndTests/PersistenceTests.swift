import Foundation
import Glibc
import Testing

/// What the real daemon keeps across restarts, idle exits, kills and damaged files.
@Suite(.serialized) struct PersistenceTests {
    private func set(_ client: RawClient, _ domain: String, _ key: String, _ json: String) throws -> Int {
        let reply = try client.call(
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"\#(key)","value":\#(json)}}"#)
        guard let revision = (reply["parameters"] as? [String: Any])?["revision"] as? Int else {
            throw TestFailure("set failed: \(reply)")
        }
        return revision
    }

    private func get(_ client: RawClient, _ domain: String, _ key: String) throws -> [String: Any] {
        try client.call(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(domain)","key":"\#(key)"}}"#)
    }

    private func value(_ reply: [String: Any]) -> Any? { (reply["parameters"] as? [String: Any])?["value"] }

    @Test func valuesAndRevisionSurviveARestart() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        let revision = try set(client, "com.example.r", "greeting", #""hello""#)
        _ = try set(client, "com.example.r", "real", "1.0")
        client.close()
        #expect(daemon.stop(SIGTERM) == 0)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        #expect(value(try get(client, "com.example.r", "greeting")) as? String == "hello")
        let raw = try #require(
            client.receiveRaw(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.r","key":"real"}}"#)
        )
        #expect(raw.contains(#""value":1.0"#), "a real must come back as a real: \(raw)")
        #expect(try set(client, "com.example.r", "next", "1") > revision + 1, "revision must never go back")
        daemon.stop()
    }

    @Test func valuesSurviveAnIdleExitUnderSocketActivation() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, mode: .socketActivated, idleExit: 0.5)
        let client = try RawClient(sandbox.socket)
        _ = try set(client, "idle", "k", "42")
        client.close()
        #expect(daemon.waitForExit(timeout: 15) == 0, "kvd must exit by itself when idle: \(daemon.errorOutput())")
        let again = try Daemon(sandbox, mode: .socketActivated, idleExit: 0.5)
        let second = try RawClient(sandbox.socket)
        #expect(value(try get(second, "idle", "k")) as? Int == 42)
        second.close()
        #expect(again.waitForExit(timeout: 15) == 0)
    }

    @Test func killDashNineLosesNoAcknowledgedWrite() throws {
        let sandbox = Sandbox()
        for round in 0..<3 {
            let daemon = try Daemon(sandbox)
            let client = try RawClient(sandbox.socket)
            for index in 0..<200 {
                _ = try set(client, "kill", "r\(round)-\(index)", "\(index)")
            }
            daemon.stop(SIGKILL)
            client.close()
        }
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        let list = try client.call(#"{"method":"io.kvd.Defaults.List","parameters":{"domain":"kill"}}"#)
        let values = try #require((list["parameters"] as? [String: Any])?["values"] as? [String: Int])
        #expect(values.count == 600)
        for round in 0..<3 { for index in 0..<200 { #expect(values["r\(round)-\(index)"] == index) } }
        daemon.stop()
    }

    @Test func unreadableDomainFileIsBackedUpAndOthersServed() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        _ = try set(client, "good", "k", #""fine""#)
        _ = try set(client, "bad", "k", #""doomed""#)
        client.close()
        daemon.stop()
        let garbage = "{\"format\": \"kvd-domain\", \"formatVersion\": 1, \"values\": {trunc"
        try sandbox.write("bad.json", garbage)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        #expect(value(try get(client, "good", "k")) as? String == "fine")
        #expect(try get(client, "bad", "k")["error"] as? String == "io.kvd.Defaults.NotFound")
        let backups = sandbox.stateFiles().filter { $0.hasPrefix("bad.unreadable-") && $0.hasSuffix(".json") }
        #expect(backups.count == 1, "\(sandbox.stateFiles())")
        #expect(backups.first.flatMap { sandbox.read($0) } == garbage)
        _ = try set(client, "bad", "k", #""new""#)
        #expect(backups.first.flatMap { sandbox.read($0) } == garbage, "the backup must never be overwritten")
        daemon.stop()
        #expect(daemon.errorOutput().contains("bad"), "the damage must be logged")
    }

    @Test func versionZeroFileIsReadAndRewrittenInTheCurrentFormat() throws {
        let sandbox = Sandbox()
        try sandbox.write("legacy.json", #"{"name": "Ada", "count": 3, "ratio": 0.5, "tags": ["a", "b"]}"#)
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        #expect(value(try get(client, "legacy", "name")) as? String == "Ada")
        #expect(value(try get(client, "legacy", "count")) as? Int == 3)
        _ = try set(client, "legacy", "count", "4")
        client.close()
        #expect(daemon.stop() == 0)
        let text = try #require(sandbox.read("legacy.json"))
        #expect(text.contains("\"formatVersion\": 1") && text.contains("\"kvd-domain\""), "\(text)")
        #expect(text.contains("\"Ada\"") && text.contains("\"count\": 4") && text.contains("0.5"))
    }

    @Test func aSecondDaemonOnTheSameStateFolderFailsClearly() throws {
        let sandbox = Sandbox()
        let first = try Daemon(sandbox)
        let second = try run(Binaries.kvd, ["--socket", sandbox.root + "/other.sock", "--state-dir", sandbox.state])
        #expect(second.status == 1)
        #expect(second.stderr.contains("already") && second.stderr.contains(sandbox.state), "\(second.stderr)")
        first.stop()
    }

    @Test func aStaleSocketIsReplacedAndALiveOneIsNot() throws {
        let sandbox = Sandbox()
        // A socket file with nobody behind it, as a killed daemon leaves.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        _ = withUnixAddress(sandbox.socket) { bind(fd, $0, $1) }
        close(fd)
        let daemon = try Daemon(sandbox)
        let live = try run(Binaries.kvd, ["--socket", sandbox.socket, "--state-dir", sandbox.root + "/state2"])
        #expect(live.status == 1 && live.stderr.contains("already listening"), "\(live.stderr)")
        daemon.stop()
    }
}

extension RawClient {
    /// One call; the raw reply text (to check number forms JSONSerialization would blur).
    func receiveRaw(_ call: String) -> String? {
        send(call)
        return receive()
    }
}
