import Foundation
import Glibc
import Testing

/// The real `kvd`, started by hand and under systemd's own socket-activation tool, driven over
/// its socket with raw varlink messages.
@Suite(.serialized) struct DaemonTests {
    @Test(arguments: [Daemon.Mode.byHand, .socketActivated])
    func servesTheContractInterface(mode: Daemon.Mode) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, mode: mode)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        let set = try client.call(
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.a","key":"k","value":{"$date":"2026-11-29T17:00:00.250Z"}}}"#
        )
        let revision = try #require((set["parameters"] as? [String: Any])?["revision"] as? Int)
        #expect(revision >= 1)
        let get = try client.call(
            #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.a","key":"k"}}"#)
        let parameters = try #require(get["parameters"] as? [String: Any])
        #expect((parameters["value"] as? [String: String]) == ["$date": "2026-11-29T17:00:00.250Z"])
        #expect(parameters["revision"] as? Int == revision)
        let description = try client.call(
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"io.kvd.Defaults"}}"#)
        #expect(
            ((description["parameters"] as? [String: Any])?["description"] as? String)?.contains("method Watch(")
                == true)
        #expect(daemon.stop() == 0)
    }

    @Test func pipelinedCallsAreAnsweredInOrder() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        var batch = ""
        for index in 0..<50 {
            batch += #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":\#(index)}}"# + "\0"
            batch += #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":"k"}}"# + "\0"
        }
        client.send(Array(batch.utf8))
        for index in 0..<50 {
            let setReply = try #require(client.receive())
            #expect(setReply.contains("revision"))
            let getReply = try #require(client.receive())
            #expect(getReply.contains(#""value":\#(index)"#), "\(getReply)")
        }
        daemon.stop()
    }

    @Test func badInputGetsAnErrorAndOtherClientsKeepWorking() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let good = try RawClient(sandbox.socket)
        defer { good.close() }
        func goodStillWorks() throws {
            let reply = try good.call(#"{"method":"io.kvd.Defaults.Domains"}"#)
            #expect(reply["error"] == nil)
        }
        let cases: [(String, [UInt8], String?)] = [
            ("broken JSON", Array("{\"method\":".utf8) + [0], "org.varlink.service.InvalidParameter"),
            (
                "unknown method", Array(#"{"method":"io.kvd.Defaults.Explode"}"#.utf8) + [0],
                "org.varlink.service.MethodNotFound"
            ),
            (
                "wrong parameter type",
                Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":7,"key":"k"}}"#.utf8) + [0],
                "org.varlink.service.InvalidParameter"
            ),
            (
                "null value",
                Array(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":{"a":null}}}"#.utf8)
                    + [0], "io.kvd.Defaults.InvalidValue"
            ),
            (
                "bad domain",
                Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"../x","key":"k"}}"#.utf8) + [0],
                "io.kvd.Defaults.InvalidName"
            ),
            (
                "invalid UTF-8",
                Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":""#.utf8) + [0xC3, 0x28]
                    + Array("\"}}".utf8) + [0],
                "org.varlink.service.InvalidParameter"
            ),
            (
                "10,000-deep nesting",
                Array(
                    (#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":"#
                        + String(repeating: "[", count: 10_000)
                        + String(repeating: "]", count: 10_000) + "}}").utf8) + [0],
                "org.varlink.service.InvalidParameter"
            ),
            (
                "20 MiB message",
                Array(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":""#.utf8)
                    + [UInt8](repeating: UInt8(ascii: "x"), count: 20 << 20)
                    + Array("\"}}".utf8) + [0], "io.kvd.Defaults.TooLarge"
            ),
        ]
        for (name, bytes, expected) in cases {
            let bad = try RawClient(sandbox.socket)
            bad.send(bytes)
            let reply = bad.receive()
            #expect(reply?.contains(expected!) == true, "\(name): \(reply ?? "closed")")
            bad.close()
            try goodStillWorks()
        }
        #expect(daemon.stop() == 0, "daemon died: \(daemon.errorOutput())")
    }

    @Test func watchStreamsCommitsToAnotherClient() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let writer = try RawClient(sandbox.socket)
        let watcher = try RawClient(sandbox.socket)
        defer {
            writer.close()
            watcher.close()
        }
        _ = try writer.call(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"w","key":"a","value":1}}"#)
        watcher.send(#"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"w"},"more":true}"#)
        let initial = try #require(watcher.receive())
        #expect(initial.contains(#""initial":true"#) && initial.contains(#""value":1"#), "\(initial)")
        _ = try writer.call(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"w","key":"b","value":"two"}}"#)
        _ = try writer.call(#"{"method":"io.kvd.Defaults.Delete","parameters":{"domain":"w","key":"a"}}"#)
        let first = try #require(watcher.receive())
        #expect(
            first.contains(#""key":"b""#) && first.contains(#""value":"two""#) && first.contains(#""continues":true"#),
            "\(first)")
        let second = try #require(watcher.receive())
        #expect(second.contains(#""key":"a""#) && !second.contains(#""value""#), "\(second)")
        daemon.stop()
    }

    @Test func aClientThatStallsMidMessageDoesNotBlockOthers() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let stalled = try RawClient(sandbox.socket)
        stalled.send(Array(#"{"method":"io.kvd.Defaults.Get","para"#.utf8))
        let other = try RawClient(sandbox.socket)
        for index in 0..<20 {
            let reply = try other.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"s","key":"k","value":\#(index)}}"#)
            #expect(reply["error"] == nil)
        }
        stalled.close()
        other.close()
        daemon.stop()
    }
}

extension DaemonTests {
    /// A client may send a long pipeline and close its sending side at once (`shutdown(SHUT_WR)`),
    /// as `printf ... | socat` does: every call is still answered, across the daemon's turns.
    @Test func aPipelineFollowedByAHalfCloseIsAnsweredInFull() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        var batch: [UInt8] = []
        for _ in 0..<300 { batch += Array(#"{"method":"io.kvd.Defaults.Domains"}"#.utf8) + [0] }
        client.send(batch)
        shutdown(client.fd, Int32(SHUT_WR))
        var replies = 0
        while client.receive() != nil { replies += 1 }
        #expect(replies == 300)
        daemon.stop()
    }
}
