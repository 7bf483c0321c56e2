import Foundation
import Glibc
import Testing

/// kvd's side of the systemd protocol: notifications, the watchdog, and the unit files.
@Suite struct SystemdTests {
    /// A datagram socket standing in for systemd's notification socket.
    final class NotifySocket {
        let path: String
        let fd: Int32

        init(in sandbox: Sandbox) {
            path = sandbox.root + "/notify"
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            _ = withUnixAddress(path) { bind(fd, $0, $1) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// Messages received until one contains `text` (or the timeout passes).
        func waitFor(_ text: String) -> [String] {
            var seen: [String] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return seen }
                let message = String(decoding: buffer[..<count], as: UTF8.self)
                seen.append(message)
                if message.contains(text) { return seen }
            }
        }
    }

    @Test func tellsSystemdItIsReadyPingsTheWatchdogAndSaysWhenStopping() throws {
        let sandbox = Sandbox()
        let notify = NotifySocket(in: sandbox)
        setenv("NOTIFY_SOCKET", notify.path, 1)
        setenv("WATCHDOG_USEC", "200000", 1)
        defer {
            unsetenv("NOTIFY_SOCKET")
            unsetenv("WATCHDOG_USEC")
        }
        let daemon = try Daemon(sandbox)
        let ready = notify.waitFor("READY=1")
        #expect(ready.last?.contains("READY=1") == true, "\(ready)")
        #expect(ready.last?.contains("STATUS=serving") == true)
        let pings = notify.waitFor("WATCHDOG=1")
        #expect(pings.last == "WATCHDOG=1", "\(pings)")
        #expect(daemon.stop() == 0)
        #expect(notify.waitFor("STOPPING=1").last?.contains("STOPPING=1") == true)
    }

    /// `units` as `make install` writes them (`@BINDIR@`: the binaries under test), in a
    /// folder of the sandbox; returns the folder.
    static func installUnits(_ units: [String], in sandbox: Sandbox) throws -> String {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let unitDirectory = sandbox.root + "/units"
        try FileManager.default.createDirectory(atPath: unitDirectory, withIntermediateDirectories: true)
        for unit in units {
            let template = try String(contentsOf: repository.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
            let text = template.replacingOccurrences(of: "@BINDIR@", with: Binaries.directory)
                .replacingOccurrences(of: "@DOCDIR@", with: repository.path)
            try text.write(toFile: unitDirectory + "/" + unit, atomically: true, encoding: .utf8)
        }
        return unitDirectory
    }

    static let userUnits = ["kvd.socket", "kvd.service"]
    static let systemUnits = ["kvd-system.socket", "kvd-system.service"]

    @Test(arguments: [userUnits, systemUnits])
    func unitFilesPassSystemdAnalyzeVerify(units: [String]) throws {
        let sandbox = Sandbox()
        let unitDirectory = try Self.installUnits(units, in: sandbox)
        let result = try run(
            "/usr/bin/systemd-analyze", ["verify"] + units.map { unitDirectory + "/" + $0 },
            environment: ["SYSTEMD_LOG_LEVEL": "notice"])
        let complaints = (result.stdout + result.stderr).split(separator: "\n").filter { $0.contains("kvd") }
        #expect(result.status == 0 && complaints.isEmpty, "\(result.stdout)\(result.stderr)")
    }

    @Test func userUnitsListenOnThePrivateSocketAndPassTheSystemSocketOn() throws {
        let sandbox = Sandbox()
        let unitDirectory = try Self.installUnits(Self.userUnits, in: sandbox)
        let service = try String(contentsOfFile: unitDirectory + "/kvd.service", encoding: .utf8)
        #expect(service.contains("Type=notify"))
        #expect(service.contains("Environment=KVD_SYSTEM_SOCKET=/run/kvd/system.sock"))
        let socketUnit = try String(contentsOfFile: unitDirectory + "/kvd.socket", encoding: .utf8)
        #expect(socketUnit.contains("ListenStream=%t/kvd.sock") && socketUnit.contains("SocketMode=0600"))
    }

    /// Everyone may connect to the system socket (kvd checks who writes); the service runs
    /// `kvd --system` with its state in `StateDirectory=kvd`, and never in a user namespace,
    /// where every peer's uid from `SO_PEERCRED` would read as nobody.
    @Test func systemUnitsListenOnTheSystemSocketForEveryone() throws {
        let sandbox = Sandbox()
        let unitDirectory = try Self.installUnits(Self.systemUnits, in: sandbox)
        let socketUnit = try String(contentsOfFile: unitDirectory + "/kvd-system.socket", encoding: .utf8)
        #expect(socketUnit.contains("ListenStream=/run/kvd/system.sock") && socketUnit.contains("SocketMode=0666"))
        let service = try String(contentsOfFile: unitDirectory + "/kvd-system.service", encoding: .utf8)
        #expect(service.contains("Type=notify"))
        #expect(service.contains("ExecStart=\(Binaries.directory)/kvd --system\n"))
        #expect(service.contains("StateDirectory=kvd\n"))
        #expect(!service.contains("PrivateUsers=yes"))
        #expect(service.contains("ExecReload=/bin/kill -HUP $MAINPID\n"), "systemctl reload reads the drop-in files")
    }

    /// `systemd-analyze security` rates the system service's exposure from 0 (locked down) to 10;
    /// it must be at most 2.0.
    @Test func systemServiceExposureIsAtMostTwo() throws {
        let sandbox = Sandbox()
        let unitDirectory = try Self.installUnits(Self.systemUnits, in: sandbox)
        let result = try run(
            "/usr/bin/systemd-analyze",
            ["security", "--offline=true", "--no-pager", unitDirectory + "/kvd-system.service"],
            environment: ["SYSTEMD_COLORS": "0"])
        let overall = result.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let score = overall.flatMap { line in line.split(separator: " ").compactMap { Double($0) }.last }
        #expect(score != nil && score! <= 2.0, "\(result.stdout)\(result.stderr)")
    }
}

/// Logging to the journal, and stopping on a signal with nothing lost.
@Suite(.serialized) struct JournalAndSignalTests {
    static let journalSocket = "/run/systemd/journal/socket"
    /// The test plays journald: it needs to bind the journal's fixed socket path, so root and no
    /// real journald on this machine.
    static let canPlayJournald = getuid() == 0 && access(journalSocket, F_OK) != 0

    @Test(.enabled(if: canPlayJournald, "needs root and no running journald (it binds /run/systemd/journal/socket)"))
    func logsToTheJournalWhenSystemdConnectedStderrToIt() throws {
        let sandbox = Sandbox()
        mkdir("/run/systemd", 0o755)
        mkdir("/run/systemd/journal", 0o755)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer {
            close(fd)
            unlink(Self.journalSocket)
            rmdir("/run/systemd/journal")
        }
        #expect(withUnixAddress(Self.journalSocket) { bind(fd, $0, $1) } == 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // systemd sets JOURNAL_STREAM to the device:inode of the stream it gives as stderr.
        let logFile = sandbox.root + "/stderr"
        #expect(FileManager.default.createFile(atPath: logFile, contents: nil))
        var status = stat()
        stat(logFile, &status)
        var environment = ProcessInfo.processInfo.environment
        environment["JOURNAL_STREAM"] = "\(status.st_dev):\(status.st_ino)"
        let daemon = try ChildProcess(
            Binaries.kvd, ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--idle-exit", "0"],
            environment: environment, stderr: logFile)
        var buffer = [UInt8](repeating: 0, count: 8192)
        let count = recv(fd, &buffer, buffer.count, 0)
        let entry = count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
        #expect(
            entry.contains("MESSAGE=") && entry.contains("SYSLOG_IDENTIFIER=kvd") && entry.contains("PRIORITY=6"),
            "\(entry)")
        daemon.signal(SIGTERM)
        #expect(daemon.wait(timeout: 20) == 0)
        #expect(
            (try? String(contentsOfFile: logFile, encoding: .utf8)) == "",
            "nothing goes to stderr when it is the journal")
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalFinishesWritesInFlightAndLosesNoAcknowledgedOne(signal: Int32) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        var batch: [UInt8] = []
        for index in 0..<300 {
            batch +=
                Array(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"sig","key":"k\#(index)","value":\#(index)}}"#
                        .utf8) + [0]
        }
        client.send(batch)
        _ = try #require(client.receive(), "the first write must be answered")
        daemon.process.signal(signal)
        var acknowledged = 1
        while let reply = client.receive() {
            #expect(reply.contains("\"revision\""), "\(reply)")
            acknowledged += 1
        }
        client.close()
        #expect(daemon.waitForExit(timeout: 20) == 0, "kvd must exit 0 on \(signal): \(daemon.errorOutput())")
        let again = try Daemon(sandbox)
        let reader = try RawClient(sandbox.socket)
        defer { reader.close() }
        for index in 0..<acknowledged {
            let reply = try reader.call(
                #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"sig","key":"k\#(index)"}}"#)
            #expect((reply["parameters"] as? [String: Any])?["value"] as? Int == index, "acknowledged k\(index) lost")
        }
        again.stop()
    }
}
