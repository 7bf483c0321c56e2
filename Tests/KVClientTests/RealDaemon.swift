import Foundation
import Glibc
import KVSystem
import KVValues
import Synchronization

@testable import KVClient

/// The real kvd, built beside this test bundle, on a private socket and state folder; killed
/// and its folder removed at deinit. Restartable on the same state.
final class RealDaemon: @unchecked Sendable {
    let root: String
    var socket: String { root + "/kvd.sock" }
    var state: String { root + "/state" }
    /// The running kvd's process id (nil when stopped). Not Foundation's `Process`: kvd closes
    /// the descriptors it inherits, among them the socket by which `Process` learns a child
    /// ended, which then waits for that kvd in a blocking `wait4`, so every other test's
    /// `waitUntilExit` (holding a thread of the cooperative pool) waits for that kvd to stop.
    private(set) var pid: pid_t?
    private let system = LinuxSystem()

    static let binary: String = {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("kvd").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.appendingPathComponent("kvd").path
    }()

    init() throws {
        var template = Array("/tmp/kvclient-real-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        try start()
    }

    deinit {
        stop(SIGKILL)
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Starts kvd on `socket` (default: this daemon's) and waits until it accepts.
    func start(socket path: String? = nil, arguments: [String] = []) throws {
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(null) }
        pid = try system.spawn(
            Self.binary, arguments: ["--socket", path ?? socket, "--state-dir", state, "--idle-exit", "0"] + arguments,
            input: null, output: null, error: null)
        for _ in 0..<500 {
            if (try? Connection(socketPath: path ?? socket)) != nil { return }
            usleep(10_000)
        }
        throw TestFailure("kvd did not start on \(path ?? socket)")
    }

    func stop(_ signal: Int32 = SIGTERM) {
        guard let pid else { return }
        kill(pid, signal)
        _ = try? system.waitForExit(pid, blocking: true)
        self.pid = nil
    }

    func signal(_ signal: Int32) {
        if let pid { kill(pid, signal) }
    }

    /// A new connection, for setting up and checking stored values directly.
    func connection(socket path: String? = nil) throws -> Connection { try Connection(socketPath: path ?? socket) }

    /// A suite on this daemon, reporting diagnostics to `log`.
    func suite(_ name: String, arguments: [String] = [], log: DiagnosticLog? = nil) -> KVDefaults {
        let configuration = KVDefaults.Configuration(
            socketPath: socket, environment: [:], arguments: arguments, autostart: false,
            diagnostics: { diagnostic in log?.entries.withLock { $0.append(diagnostic) } })
        return KVDefaults(suiteName: name, configuration: configuration)!
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` for up to `seconds`.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

func key(_ name: String) -> Key { try! Key(validating: name) }
func domain(_ name: String) -> Domain { try! Domain(validating: name) }
