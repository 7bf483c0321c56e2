import Foundation
import Glibc
import Synchronization
import Testing

/// The real `kvd` against clients that misbehave: floods of connections, a descriptor limit,
/// stalled half messages, clients that never read, that vanish mid-call or mid-watch, endless
/// pipelines. Throughout, a well-behaved client keeps being answered: every one of its calls
/// must come back within ``HostileClientTests/latencyBound`` (a generous bound to catch a
/// blocked loop, not a performance target), and the daemon's memory stays bounded.
@Suite(.serialized) struct HostileClientTests {
    /// Seconds per call: a blocked loop takes seconds, a busy machine (CI on two cores) a few
    /// hundred milliseconds (344 ms seen); `KVD_TEST_LATENCY_BOUND` loosens it for sanitizer builds.
    static let latencyBound = Double(ProcessInfo.processInfo.environment["KVD_TEST_LATENCY_BOUND"] ?? "") ?? 1.0
    /// `KVD_TEST_NO_RSS_BOUNDS=1` (sanitizer builds, whose quarantine and shadow memory swamp
    /// the figures) turns the memory bounds off; everything else is still checked.
    static let checksMemory = ProcessInfo.processInfo.environment["KVD_TEST_NO_RSS_BOUNDS"] == nil

    @Test func fiveHundredConnectionsAtOnceAreAllServed() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        let before = try probe.roundTrips(20)
        var clients: [RawClient] = []
        defer { for client in clients { client.close() } }
        for _ in 0..<500 { clients.append(try RawClient(sandbox.socket)) }
        let during = try probe.roundTrips(20)
        for client in clients {
            client.send(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"probe","key":"k"}}"#)
        }
        for client in clients {
            let reply = try #require(client.receive(), "a connection was dropped")
            #expect(reply.contains(#""value":"probe""#))
        }
        let after = try probe.roundTrips(20)
        print(
            "Hostile: 500 connections held and served at once (plus the probe); probe round trip before \(ms(before)), during \(ms(during)), after \(ms(after))"
        )
        try expectServed(during + after, daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    @Test func runningOutOfDescriptorsRefusesConnectionsCleanlyAndServesOthers() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox, fileLimit: 64)
        let probe = try Probe(sandbox.socket)
        var clients: [RawClient] = []
        var refused = 0
        var served = 0
        var hung = false
        for _ in 0..<150 {
            let client = try RawClient(sandbox.socket)
            client.setTimeouts(seconds: 3)
            let started = Date()
            client.send(#"{"method":"io.kvd.Defaults.Domains"}"#)
            if client.receive() == nil {
                client.close()
                // A refusal is a prompt close, not a connection left hanging in the backlog.
                if Date().timeIntervalSince(started) > 1 {
                    hung = true
                    break
                }
                refused += 1
            } else {
                served += 1
                clients.append(client)  // held open, so the daemon stays at its limit
            }
        }
        let atLimit = try probe.roundTrips(20)
        #expect(!hung, "a connection over the limit was left hanging instead of being closed")
        #expect(refused > 0, "the file limit was never reached")
        #expect(served >= 40, "only \(served) connections were served under a limit of 64 descriptors")
        #expect(daemon.isRunning, "kvd died at its descriptor limit: \(daemon.errorOutput())")
        for client in clients { client.close() }
        // Once kvd has seen the closes a fresh connection is served (one refused before is the limit).
        let set = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"after","key":"k","value":1}}"#
        var reply: [String: Any] = [:]
        let servedAgain = eventually {
            guard let fresh = try? RawClient(sandbox.socket) else { return false }
            defer { fresh.close() }
            fresh.setTimeouts(seconds: 3)
            reply = (try? fresh.call(set)) ?? [:]
            return !reply.isEmpty
        }
        #expect(servedAgain && reply["error"] == nil, "\(reply)")
        print(
            "Hostile: at a limit of 64 descriptors, \(served) connections served and held, \(refused) refused cleanly; probe at the limit \(ms(atLimit))"
        )
        try expectServed(atLimit, daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    @Test func clientsStalledMidMessageDoNotDelayOthers() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        var stalled: [RawClient] = []
        defer { for client in stalled { client.close() } }
        for index in 0..<200 {
            let client = try RawClient(sandbox.socket)
            // Half a call; some stop inside a string, some inside a huge value.
            client.send(
                Array(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":""#.utf8)
                    + [UInt8](repeating: UInt8(ascii: "x"), count: index % 10 == 0 ? 1 << 20 : 10))
            stalled.append(client)
        }
        let during = try probe.roundTrips(50)
        print(
            "Hostile: 200 clients stalled mid-message (20 of them 1 MiB into it); probe round trip \(ms(during)); kvd RSS \(daemon.residentMegabytes) MB"
        )
        try expectServed(during, daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    @Test func clientsThatNeverReadRepliesCostBoundedMemory() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        let big = String(repeating: "v", count: 256 << 10)
        _ = try probe.client.call(
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"big","key":"k","value":"\#(big)"}}"#)
        let baseline = daemon.residentMegabytes
        // Each pipelines 4,000 Gets of a 256 KiB value: 1 GiB of replies each if kvd kept them all.
        let readers = 2
        // MB per client: the 32 MiB of unread replies, a read chunk and one reply, and the copy a
        // growing reply buffer makes (Swift arrays grow into a new buffer: briefly old + new).
        // Measured 95 MB over the baseline for two; without the output bound it passes 1 GB.
        let bound = readers * 64
        var silent: [RawClient] = []
        defer { for client in silent { client.close() } }
        let get = Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"big","key":"k"}}"#.utf8) + [0]
        let batch = Array([[UInt8]](repeating: get, count: 4000).joined())
        let senders = DispatchGroup()
        for _ in 0..<readers {
            let client = try RawClient(sandbox.socket)
            client.setTimeouts(seconds: 3)
            silent.append(client)
            DispatchQueue.global().async(group: senders) { client.send(batch) }  // stops when kvd stops reading
        }
        var peak = baseline
        var during: [Double] = []
        // Long enough for a debug kvd (about 20 MB of replies a second) to fill both allowances,
        // and to pass the bound if it kept on.
        let deadline = Date().addingTimeInterval(8)
        while Date() < deadline, peak - baseline < bound {
            during += try probe.roundTrips(3)
            peak = max(peak, daemon.residentMegabytes)
            usleep(50_000)
        }
        senders.wait()
        peak = max(peak, daemon.residentMegabytes)
        print(
            "Hostile: \(readers) clients pipelined 4,000 Gets of 256 KiB each without reading: kvd RSS \(baseline) MB before, peak \(peak) MB; probe round trip \(ms(during))"
        )
        #expect(!Self.checksMemory || peak - baseline < bound, "kvd grew from \(baseline) MB to \(peak) MB")
        try expectServed(during, daemon)
        for client in silent { client.close() }
        silent = []
        #expect(try probe.client.call(#"{"method":"io.kvd.Defaults.Domains"}"#)["error"] == nil)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    @Test func clientsThatDisconnectMidCallAndMidWatchLeaveTheDaemonServing() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        var latencies: [Double] = []
        for round in 0..<20 {
            // Mid-call: a Set, then gone before its durable reply.
            for index in 0..<20 {
                let client = try RawClient(sandbox.socket)
                client.send(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"gone","key":"k\#(index)","value":\#(round)}}"#
                )
                if index % 2 == 0 { shutdown(client.fd, Int32(SHUT_WR)) }
                client.close()
            }
            // Mid-watch: watchers that vanish, before or after their first reply, while commits stream.
            for index in 0..<10 {
                let watcher = try RawClient(sandbox.socket)
                watcher.send(#"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"gone"},"more":true}"#)
                if index % 2 == 0 { _ = watcher.receive() }
                watcher.close()
            }
            latencies += try probe.roundTrips(5)
        }
        // A watcher that never reads while large commits stream is cut off, not buffered forever.
        let deaf = try RawClient(sandbox.socket)
        defer { deaf.close() }
        deaf.send(#"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"flood"},"more":true}"#)
        let big = String(repeating: "w", count: 1 << 20)
        let baseline = daemon.residentMegabytes
        for index in 0..<60 {
            let reply = try probe.client.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"flood","key":"k\#(index % 3)","value":"\#(big)"}}"#
            )
            #expect(reply["error"] == nil)
            if index % 10 == 0 { latencies += try probe.roundTrips(2) }
        }
        let peak = daemon.residentMegabytes
        deaf.setTimeouts(seconds: 5)
        let cutOff = deaf.drainUntilClosed()
        print(
            "Hostile: 400 clients gone mid-Set, 200 watchers gone mid-watch; a watcher that never read 60 MiB of changes was cut off: \(cutOff) (RSS \(baseline) → \(peak) MB); probe round trip \(ms(latencies))"
        )
        #expect(cutOff, "the deaf watcher was not disconnected")
        #expect(
            !Self.checksMemory || peak - baseline < 150, "kvd grew from \(baseline) MB to \(peak) MB for one watcher")
        let list = try probe.client.call(#"{"method":"io.kvd.Defaults.List","parameters":{"domain":"gone"}}"#)
        #expect(((list["parameters"] as? [String: Any])?["values"] as? [String: Any])?.count == 20, "\(list)")
        try expectServed(latencies, daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    @Test func endlessPipelinesDoNotStarveOtherClients() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        let before = try probe.roundTrips(20)
        let stop = Atomic<Bool>(false)
        let pipelined = Atomic<Int>(0)
        let workers = DispatchGroup()
        // Two clients stream calls nonstop (reads and writes) and read replies on another thread.
        var pipelines: [RawClient] = []
        for kind in ["Get", "Set"] {
            let client = try RawClient(sandbox.socket)
            pipelines.append(client)
            let call =
                kind == "Get"
                ? Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"probe","key":"k"}}"#.utf8) + [0]
                : Array(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"pipe","key":"k","value":1}}"#.utf8)
                    + [0]
            let chunk = Array([[UInt8]](repeating: call, count: 200).joined())
            DispatchQueue.global().async(group: workers) {
                while !stop.load(ordering: .relaxed) { guard client.send(chunk) else { break } }
            }
            DispatchQueue.global().async(group: workers) {
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let count = recv(client.fd, &buffer, buffer.count, 0)
                    if count <= 0 { break }
                    pipelined.add(buffer[..<count].reduce(0) { $0 + ($1 == 0 ? 1 : 0) }, ordering: .relaxed)
                }
                client.close()
            }
        }
        // A third floods bytes that never end a message: cut off at the 16 MiB message limit.
        let flooder = try RawClient(sandbox.socket)
        flooder.setTimeouts(seconds: 10)
        DispatchQueue.global().async(group: workers) {
            let junk = [UInt8](repeating: UInt8(ascii: " "), count: 1 << 16)
            while flooder.send(junk) {}
            flooder.close()
        }
        var during: [Double] = []
        let deadline = Date().addingTimeInterval(3)
        while Date() < deadline { during += try probe.roundTrips(5) }
        stop.store(true, ordering: .relaxed)
        // Hang up with calls still queued (the Set pipeline has thousands waiting for commits).
        for client in pipelines { shutdown(client.fd, Int32(SHUT_RDWR)) }
        guard workers.wait(timeout: .now() + 30) == .success else {
            throw TestFailure("pipelining clients did not stop")
        }
        print(
            "Hostile: two endless pipelines got \(pipelined.load(ordering: .relaxed)) replies in 3 s and a 16 MiB+ flood was cut off; probe round trip before \(ms(before)), during \(ms(during)); kvd RSS \(daemon.residentMegabytes) MB"
        )
        try expectServed(during, daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    /// A watcher may close its sending side after `Watch` (it has nothing more to ask); it still
    /// reads, so the changes keep coming until it hangs up.
    @Test func aWatcherThatHalfClosesKeepsReceivingChanges() throws {
        let sandbox = Sandbox()
        let daemon = try HostileDaemon(sandbox)
        let probe = try Probe(sandbox.socket)
        let watcher = try RawClient(sandbox.socket)
        defer { watcher.close() }
        watcher.setTimeouts(seconds: 5)
        watcher.send(#"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"half"},"more":true}"#)
        shutdown(watcher.fd, Int32(SHUT_WR))
        let initial = try #require(watcher.receive(), "no initial reply")
        #expect(initial.contains(#""initial":true"#), "\(initial)")
        for index in 0..<3 {
            let reply = try probe.client.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"half","key":"k","value":\#(index)}}"#)
            #expect(reply["error"] == nil, "\(reply)")
            let change = watcher.receive()
            #expect(
                change?.contains(#""value":\#(index)"#) == true,
                "change \(index) after the half-close: \(change ?? "connection closed")")
        }
        watcher.close()
        try expectServed(try probe.roundTrips(5), daemon)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")
    }

    /// Every probe call came back within the bound and the daemon still runs.
    private func expectServed(_ latencies: [Double], _ daemon: HostileDaemon) throws {
        #expect(daemon.isRunning, "kvd died: \(daemon.errorOutput())")
        let slowest = latencies.max() ?? 0
        #expect(
            slowest < Self.latencyBound,
            "the well-behaved client waited \(Int(slowest * 1000)) ms for a reply (\(ms(latencies)))")
    }
}

/// "median 0.3 ms, max 2.1 ms over 50 calls".
func ms(_ latencies: [Double]) -> String {
    guard !latencies.isEmpty else { return "no calls" }
    let sorted = latencies.sorted()
    return String(
        format: "median %.1f ms, max %.1f ms over %d calls", sorted[sorted.count / 2] * 1000, sorted.last! * 1000,
        sorted.count)
}

/// The well-behaved client: one connection, one small Get at a time, timed.
struct Probe {
    let client: RawClient

    init(_ socket: String) throws {
        client = try RawClient(socket)
        let reply = try client.call(
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"probe","key":"k","value":"probe"}}"#)
        guard reply["error"] == nil else { throw TestFailure("probe cannot set its key: \(reply)") }
    }

    /// The round-trip times, in seconds, of `count` Gets.
    func roundTrips(_ count: Int) throws -> [Double] {
        try (0..<count).map { _ in
            let started = Date()
            let reply = try client.call(#"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"probe","key":"k"}}"#)
            guard (reply["parameters"] as? [String: Any])?["value"] as? String == "probe" else {
                throw TestFailure("probe got \(reply)")
            }
            return Date().timeIntervalSince(started)
        }
    }
}

/// The real kvd started through `sh -c 'ulimit -n N; exec kvd ...'`, its log in a file (a
/// pipe nobody reads could fill and block it), its memory readable from /proc.
final class HostileDaemon {
    let process: ChildProcess
    let sandbox: Sandbox
    var logFile: String { sandbox.root + "/kvd.log" }

    init(_ sandbox: Sandbox, fileLimit: Int? = nil, extra: [String] = []) throws {
        self.sandbox = sandbox
        // Descriptors above 2 that the test process holds open (other tests' sockets) are closed
        // first: under a low `fileLimit` they would leave kvd, and the log's redirection, none.
        let closeInherited =
            #"for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-" 2>/dev/null; done; "#
        let command =
            "kvd=$1; shift; " + closeInherited + (fileLimit.map { "ulimit -n \($0) || exit 99; " } ?? "")
            + "exec \"$kvd\" \"$@\" 2>\"$0\""
        process = try ChildProcess(
            "/bin/bash",
            [
                "-c", command, sandbox.root + "/kvd.log", Binaries.kvd, "--socket", sandbox.socket, "--state-dir",
                sandbox.state, "--idle-exit", "0",
            ] + extra)
        try waitForListener(sandbox.socket, of: process, log: errorOutput)
    }

    var isRunning: Bool { process.isRunning }

    /// VmRSS of the daemon, in MB.
    var residentMegabytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
    }

    func errorOutput() -> String { String((try? String(contentsOfFile: logFile, encoding: .utf8))?.suffix(2000) ?? "") }

    /// SIGTERM, then the exit status (or -1 after a SIGKILL on timeout).
    func stop(timeout: Double = 20) -> Int32 {
        process.signal(SIGTERM)
        return process.wait(timeout: timeout)
    }
}
