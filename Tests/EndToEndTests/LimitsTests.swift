import Foundation
import Glibc
import Testing

/// The limits against the real kvd: what it acknowledges survives SIGKILL, what it stores can be
/// listed and watched, odd state-folder entries and long domain names do not stop it.
@Suite(.serialized) struct LimitsTests {
    static let replyLimit = 16 << 20

    static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
    }

    static func setCall(_ domain: String, _ key: String, _ json: String) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"\#(key)","value":\#(json)}}"#
    }

    static func getCall(_ domain: String, _ key: String) -> String {
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(domain)","key":"\#(key)"}}"#
    }

    /// The revision a Set reply carries, or the reply itself as the failure.
    static func revision(_ reply: String?) throws -> Int {
        guard let reply, let range = reply.range(of: #"{"parameters":{"revision":"#), !reply.contains("\"error\"")
        else {
            throw TestFailure("not a revision: \(reply?.prefix(300) ?? "no reply")")
        }
        return Int(reply[range.upperBound...].prefix { $0.isNumber })!
    }

    /// A 510-deep value, then another client's write, then SIGKILL.
    @Test func deepWriteAndTheWritesAfterItSurviveSIGKILL() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        #expect(try Self.revision(client.large(Self.setCall("d", "deep", Self.nestedArrays(510)))) == 1)
        let other = try RawClient(sandbox.socket)
        #expect(try Self.revision(other.large(Self.setCall("other", "k", #""acked""#))) == 2)
        other.close()
        client.close()
        daemon.stop(SIGKILL)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        let deep = try #require(client.large(Self.getCall("d", "deep")))
        #expect(
            deep.hasPrefix(#"{"parameters":{"value":\#(Self.nestedArrays(510)),"revision":1,"source":"user"}"#),
            "\(deep.prefix(200))")
        #expect(
            client.large(Self.getCall("other", "k"))
                == #"{"parameters":{"value":"acked","revision":2,"source":"user"}}"#)
        #expect(try Self.revision(client.large(Self.setCall("other", "k2", "3"))) == 3, "the revision never goes back")
        #expect(!sandbox.stateFiles().contains { $0.contains("unreadable") }, "\(sandbox.stateFiles())")
        daemon.stop()
    }

    /// A Set whose canonical form outgrows the limits is refused, not acknowledged and lost
    /// (480,000 dates written with `.000`: 15.1 MiB in, 17.2 MiB out).
    @Test func setThatGrowsWhenEncodedIsRefusedAndLaterWritesSurvive() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        let dates =
            "[" + Array(repeating: #"{"$date":"2026-01-01T00:00:00Z"}"#, count: 480_000).joined(separator: ",") + "]"
        let reply = try #require(client.large(Self.setCall("d", "dates", dates)))
        #expect(
            reply == #"{"parameters":{"limit":\#(Self.replyLimit)},"error":"io.kvd.Defaults.TooLarge"}"#,
            "\(reply.prefix(300))")
        #expect(try Self.revision(client.large(Self.setCall("other", "k", #""acked""#))) >= 1)
        client.close()
        daemon.stop(SIGKILL)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        #expect(client.large(Self.getCall("other", "k"))?.contains(#""value":"acked""#) == true)
        daemon.stop()
    }

    /// A write that would make a domain too large for one reply is refused; the domain stays
    /// listable by kvctl.
    @Test func domainStaysListableWhenAWriteWouldOutgrowAReply() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        let nine = "\"" + String(repeating: "x", count: 9 << 20) + "\""
        _ = try Self.revision(client.large(Self.setCall("big", "a", nine)))
        let refused = try #require(client.large(Self.setCall("big", "b", nine)))
        #expect(
            refused.contains("io.kvd.Defaults.TooLarge") && refused.contains("\(Self.replyLimit)"),
            "\(refused.prefix(300))")
        let keys = try kvctl(sandbox, "keys", "big")
        #expect(keys.status == 0 && keys.stdout == "a\n", "\(keys.stderr)")
        let export = try kvctl(sandbox, "export", "big", "-")
        #expect(export.status == 0 && export.stdout.utf8.count > 9 << 20, "\(export.stderr)")
        daemon.stop()
    }

    /// Values as deep as the contract allows can be listed and watched.
    @Test(arguments: [509, 510, 512])
    func deepValueCanBeListedAndWatched(depth: Int) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        _ = try Self.revision(client.large(Self.setCall("deep", "k", Self.nestedArrays(depth))))
        let keys = try kvctl(sandbox, "keys", "deep")
        #expect(keys.status == 0 && keys.stdout == "k\n", "\(keys.stderr)")
        let whole = try kvctl(sandbox, "--json", "get", "deep")
        #expect(whole.status == 0 && whole.stdout.hasPrefix(#"{"k":\#(Self.nestedArrays(depth))}"#), "\(whole.stderr)")
        let output = sandbox.root + "/watch.out"
        let errors = sandbox.root + "/watch.err"
        let watch = try ChildProcess(
            Binaries.kvctl, ["--socket", sandbox.socket, "--json", "watch", "deep"], stdout: output, stderr: errors)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, (try? String(contentsOfFile: output, encoding: .utf8))?.isEmpty ?? true,
            watch.isRunning
        { usleep(20_000) }
        watch.signal(SIGKILL)
        watch.wait(timeout: 5)
        let watched = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(
            watched.contains(Self.nestedArrays(depth)),
            "watch printed \(watched.prefix(200)); stderr: \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")"
        )
        daemon.stop()
    }

    /// Odd entries in the state folder are set aside and logged; kvd starts and serves.
    @Test func oddEntriesInTheStateFolderDoNotStopStartup() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        _ = try Self.revision(client.large(Self.setCall("good", "k", #""fine""#)))
        client.close()
        #expect(daemon.stop() == 0)
        mkdir(sandbox.file("x.json"), 0o700)
        mkfifo(sandbox.file("y.json"), 0o600)
        symlink("/dev/zero", sandbox.file("z.json"))
        unlink(sandbox.file("kvd.wal"))
        mkdir(sandbox.file("kvd.wal"), 0o700)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        #expect(
            client.large(Self.getCall("good", "k")) == #"{"parameters":{"value":"fine","revision":1,"source":"user"}}"#)
        #expect(try Self.revision(client.large(Self.setCall("x", "k", "1"))) == 2)
        for name in ["x", "y", "z", "kvd.wal"] {
            #expect(
                sandbox.stateFiles().contains { $0.hasPrefix(name + ".unreadable-") },
                "\(name): \(sandbox.stateFiles())")
            #expect(daemon.errorOutput().contains(name == "kvd.wal" ? name : name + ".json"))
        }
        daemon.stop()
    }

    /// A 255-byte domain name is stored, compacted, restarted, and its unreadable file backed up
    /// without stopping kvd.
    @Test func longestDomainNameIsStoredCompactedAndBackedUp() throws {
        let sandbox = Sandbox()
        let name = String(repeating: "n", count: 255)
        var daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        _ = try Self.revision(client.large(Self.setCall(name, "k", #""long""#)))
        client.close()
        #expect(daemon.stop() == 0, "SIGTERM compacts: \(daemon.errorOutput())")
        #expect(!daemon.errorOutput().contains("failed"), "\(daemon.errorOutput())")
        let files = sandbox.stateFiles().filter { $0.hasPrefix("n") && $0.hasSuffix(".json") }
        #expect(files.count == 1, "\(sandbox.stateFiles())")
        #expect(
            sandbox.stateFiles().filter { $0.hasPrefix("n") }.count == 2,
            "the domain file and its history: \(sandbox.stateFiles())")
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        #expect(
            client.large(Self.getCall(name, "k")) == #"{"parameters":{"value":"long","revision":1,"source":"user"}}"#)
        client.close()
        daemon.stop()
        try sandbox.write(try #require(files.first), "{broken")
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        #expect(client.large(Self.getCall(name, "k"))?.contains("io.kvd.Defaults.NotFound") == true)
        #expect(sandbox.stateFiles().contains { $0.contains(".unreadable-") }, "\(sandbox.stateFiles())")
        daemon.stop()
    }
}

extension RawClient {
    /// Sends `call` and reads its reply in large pieces (``receive()`` reads a byte at a time).
    func large(_ call: String) -> String? {
        send(call)
        var message: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let peeked = recv(fd, &buffer, buffer.count, Int32(MSG_PEEK))
            if peeked <= 0 { return nil }
            let end = buffer[..<peeked].firstIndex(of: 0)
            let count = end.map { $0 + 1 } ?? peeked
            _ = recv(fd, &buffer, count, 0)
            if let end {
                message += buffer[..<end]
                return String(decoding: message, as: UTF8.self)
            }
            message += buffer[..<count]
        }
    }
}
