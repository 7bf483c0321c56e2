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
        defer { unsetenv("NOTIFY_SOCKET"); unsetenv("WATCHDOG_USEC") }
        let daemon = try Daemon(sandbox)
        let ready = notify.waitFor("READY=1")
        #expect(ready.last?.contains("READY=1") == true, "\(ready)")
        #expect(ready.last?.contains("STATUS=serving") == true)
        let pings = notify.waitFor("WATCHDOG=1")
        #expect(pings.last == "WATCHDOG=1", "\(pings)")
        #expect(daemon.stop() == 0)
        #expect(notify.waitFor("STOPPING=1").last?.contains("STOPPING=1") == true)
    }

    @Test func unitFilesPassSystemdAnalyzeVerify() throws {
        let sandbox = Sandbox()
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let unitDirectory = sandbox.root + "/units"
        try FileManager.default.createDirectory(atPath: unitDirectory, withIntermediateDirectories: true)
        for unit in ["kvd.socket", "kvd.service"] {
            let template = try String(contentsOf: repository.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
            let text = template.replacingOccurrences(of: "@BINDIR@", with: Binaries.directory)
                .replacingOccurrences(of: "@DOCDIR@", with: repository.path)
            try text.write(toFile: unitDirectory + "/" + unit, atomically: true, encoding: .utf8)
        }
        let result = try run("/usr/bin/systemd-analyze", ["verify", unitDirectory + "/kvd.socket", unitDirectory + "/kvd.service"],
                             environment: ["SYSTEMD_LOG_LEVEL": "notice"])
        let complaints = (result.stdout + result.stderr).split(separator: "\n").filter { $0.contains("kvd.") }
        #expect(result.status == 0 && complaints.isEmpty, "\(result.stdout)\(result.stderr)")
        let service = try String(contentsOfFile: unitDirectory + "/kvd.service", encoding: .utf8)
        #expect(service.contains("Type=notify"))
        let socketUnit = try String(contentsOfFile: unitDirectory + "/kvd.socket", encoding: .utf8)
        #expect(socketUnit.contains("ListenStream=%t/kvd.sock") && socketUnit.contains("SocketMode=0600"))
    }
}
