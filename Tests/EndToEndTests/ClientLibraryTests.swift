import Foundation
import Glibc
import Testing

/// A long-running program whose stdin the test writes and whose stdout lines it reads, with a
/// timeout: `kvclient-probe` (a KVClient program) or `kvctl watch`.
///
/// Started with `posix_spawn`, not Foundation's `Process`: its child monitoring can block on
/// another child (the daemon) and hang the test at release.
final class Interactive {
    let pid: pid_t
    private let input: Int32
    private let output: Int32
    private var buffer: [UInt8] = []
    /// How much of ``buffer`` holds no newline.
    private var scanned = 0

    init(_ program: String, _ arguments: [String]) throws {
        signal(SIGPIPE, SIG_IGN)  // a write to a program that died fails instead of killing the test
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw TestFailure("pipe failed") }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var environment = ProcessInfo.processInfo.environment
        environment["KVD_NO_AUTOSTART"] = "1"
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, program, &actions, nil, argv, envp)
        close(toChild[0])
        close(fromChild[1])
        guard result == 0 else { throw TestFailure("cannot run \(program): \(result)") }
        self.pid = pid
        input = toChild[1]
        output = fromChild[0]
    }

    static func probe(_ sandbox: Sandbox, domain: String) throws -> Interactive {
        try Interactive(Binaries.directory + "/kvclient-probe", ["--socket", sandbox.socket, "--domain", domain])
    }

    deinit {
        close(input)
        close(output)
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
    }

    /// The next line of output, or nil after `timeout` seconds. Each byte is searched for a
    /// newline once (lines of a MiB, a large value's, come in many reads).
    func line(timeout: Double = 10) -> String? {
        let fd = output
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                scanned = 0
                return line
            }
            scanned = buffer.count
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var pollfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pollfd, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }

    /// Sends a command and returns its one-line answer.
    func ask(_ line: String, timeout: Double = 10) -> String? {
        send(line)
        return self.line(timeout: timeout)
    }
}

/// A kvd on another socket over the same state folder: changes made while the sandbox's kvd is
/// down, as if by another client while a watcher was disconnected.
func whileDown(_ sandbox: Sandbox, _ body: (RawClient) throws -> Void) throws {
    let other = sandbox.root + "/other.sock"
    let process = try Interactive(Binaries.kvd, ["--socket", other, "--state-dir", sandbox.state, "--idle-exit", "0"])
    defer {
        kill(process.pid, SIGTERM)
        var status: Int32 = 0
        waitpid(process.pid, &status, 0)
    }
    var client: RawClient?
    for _ in 0..<500 where client == nil {
        client = try? RawClient(other)
        if client == nil { usleep(10_000) }
    }
    guard let client else { throw TestFailure("the second kvd did not start") }
    defer { client.close() }
    try body(client)
}

func rawSet(_ client: RawClient, _ domain: String, _ key: String, _ json: String) throws {
    let reply = try client.call(
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"\#(key)","value":\#(json)}}"#)
    guard reply["error"] == nil else { throw TestFailure("set failed: \(reply)") }
}

func rawDelete(_ client: RawClient, _ domain: String, _ key: String) throws {
    let reply = try client.call(
        #"{"method":"io.kvd.Defaults.Delete","parameters":{"domain":"\#(domain)","key":"\#(key)"}}"#)
    guard reply["error"] == nil else { throw TestFailure("delete failed: \(reply)") }
}

/// KVClient between real processes against the real kvd, and `kvctl watch` across restarts.
@Suite(.serialized) struct ClientLibraryTests {
    @Test func twoProcessesSeeEachOthersWritesThroughTheirCaches() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        let reader = try Interactive.probe(sandbox, domain: "com.example.shared")
        let writer = try Interactive.probe(sandbox, domain: "com.example.shared")
        #expect(reader.ask("get theme") == "nil")
        #expect(reader.ask("watch theme") == "ok")
        for round in 0..<5 {
            #expect(writer.ask(#"set theme "v\#(round)""#) == "ok")
            #expect(writer.ask("get theme") == #""v\#(round)""#, "a process reads its own write at once")
            #expect(reader.line() == #"change theme "v\#(round)""#)
            #expect(reader.ask(#"wait theme "v\#(round)" 5"#) == "ok", "the reader's cache has it")
        }
        #expect(writer.ask(#"set when {"$date":"2026-11-29T17:00:00.250Z"}"#) == "ok")
        #expect(reader.ask(#"wait when {"$date":"2026-11-29T17:00:00.250Z"} 5"#) == "ok")
        #expect(writer.ask("remove theme") == "ok")
        #expect(reader.line() == "change theme nil")
    }

    @Test func aProcessWatchingMissesNoChangeAcrossADaemonRestart() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        let watcher = try Interactive.probe(sandbox, domain: "com.example.restart")
        #expect(watcher.ask(#"set k "before""#) == "ok")
        #expect(watcher.ask("watch k") == "ok")
        daemon.stop()
        try whileDown(sandbox) { client in
            try rawSet(client, "com.example.restart", "k", #""while down""#)
        }
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        #expect(watcher.line(timeout: 15) == #"change k "while down""#)
        #expect(watcher.ask("get k") == #""while down""#)
        let writer = try Interactive.probe(sandbox, domain: "com.example.restart")
        #expect(writer.ask(#"set k "after""#) == "ok")
        #expect(watcher.line() == #"change k "after""#)
    }

    @Test func kvctlWatchPrintsOneLinePerChangeAndReconnects() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        let setup = try RawClient(sandbox.socket)
        try rawSet(setup, "com.example.watch", "a", #""x""#)
        setup.close()
        let plain = try Interactive(Binaries.kvctl, ["--socket", sandbox.socket, "watch", "com.example.watch"])
        let json = try Interactive(
            Binaries.kvctl, ["--socket", sandbox.socket, "--json", "watch", "com.example.watch", "b"])
        #expect(plain.line() == #"a = "x""#)
        let client = try RawClient(sandbox.socket)
        try rawSet(client, "com.example.watch", "b", "1")
        let changed = plain.line()
        #expect(changed?.hasPrefix("b = 1  by ") == true, "a change names who made it: \(changed ?? "nothing")")
        let first = try #require(json.line())
        #expect(
            first.contains(#""key":"b""#) && first.contains(#""value":1"#),
            "(with \"initial\" if it started after the set)")
        client.close()
        daemon.stop()
        try whileDown(sandbox) { other in
            try rawSet(other, "com.example.watch", "b", "2")
            try rawDelete(other, "com.example.watch", "a")
        }
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        let caughtUp = [plain.line(timeout: 15), plain.line()].compactMap { $0 }.sorted()
        #expect(caughtUp == ["a removed", "b = 2"])
        let second = try #require(json.line(timeout: 15))
        #expect(second.contains(#""key":"b""#) && second.contains(#""value":2"#))
        let again = try RawClient(sandbox.socket)
        try rawSet(again, "com.example.watch", "b", "3")
        again.close()
        #expect(plain.line()?.hasPrefix("b = 3  by ") == true)
        #expect(json.line()?.contains(#""value":3"#) == true)
    }
}
