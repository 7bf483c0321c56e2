import Foundation
import Glibc
import Testing

/// The built programs, found beside the test bundle (`swift build` puts them together).
enum Binaries {
    static let directory: String = {
        if let dir = ProcessInfo.processInfo.environment["KVD_BIN_DIR"], !dir.isEmpty { return dir }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("kvd").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }()
    static var kvd: String { directory + "/kvd" }
    static var kvctl: String { directory + "/kvctl" }
}

/// A private folder for one test: state, socket; removed when the test ends.
final class Sandbox {
    let root: String
    var state: String { root + "/state" }
    var socket: String { root + "/kvd.sock" }

    init() {
        var template = Array("/tmp/kvd-e2e-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    func file(_ name: String) -> String { state + "/" + name }

    func write(_ name: String, _ text: String) throws {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try text.write(toFile: file(name), atomically: false, encoding: .utf8)
    }

    func read(_ name: String) -> String? { try? String(contentsOfFile: file(name), encoding: .utf8) }

    func stateFiles() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []).sorted() }
}

/// A running daemon: started by hand or under `systemd-socket-activate`; killed at deinit.
final class Daemon {
    let process = Process()
    let stderr = Pipe()
    let sandbox: Sandbox

    enum Mode { case byHand, socketActivated }

    init(_ sandbox: Sandbox, mode: Mode = .byHand, idleExit: Double = 0, extra: [String] = []) throws {
        self.sandbox = sandbox
        let daemonArguments = ["--state-dir", sandbox.state, "--idle-exit", String(idleExit)] + extra
        switch mode {
        case .byHand:
            process.executableURL = URL(fileURLWithPath: Binaries.kvd)
            process.arguments = ["--socket", sandbox.socket] + daemonArguments
        case .socketActivated:
            unlink(sandbox.socket)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
            process.arguments = ["-l", sandbox.socket, Binaries.kvd] + daemonArguments
        }
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try waitForSocket()
    }

    /// Waits until the socket accepts connections (the daemon, or systemd's stand-in, listens).
    func waitForSocket(timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let fd = try? RawClient.connect(sandbox.socket) {
                close(fd)
                return
            }
            guard process.isRunning else { throw TestFailure("kvd exited early: \(errorOutput())") }
            usleep(10_000)
        }
        throw TestFailure("kvd did not listen on \(sandbox.socket) within \(timeout) s")
    }

    func errorOutput() -> String {
        if process.isRunning { return "(still running)" }
        return String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Sends `signal` and waits for the exit; returns the exit status (or 128+signal).
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, timeout: Double = 20) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        return waitForExit(timeout: timeout)
    }

    @discardableResult
    func waitForExit(timeout: Double) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The result of running a program to its end.
struct Run {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `kvctl` (or another program) with `arguments`, feeding `input`, and waits for it.
func run(_ program: String = Binaries.kvctl, _ arguments: [String], input: String? = nil, environment: [String: String] = [:]) throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["KVD_NO_AUTOSTART"] = "1"
    for (name, value) in environment { env[name] = value }
    process.environment = env
    let out = Pipe(), err = Pipe(), inPipe = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = inPipe
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try inPipe.fileHandleForWriting.close()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Run(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
}

/// kvctl against the sandbox's socket.
func kvctl(_ sandbox: Sandbox, _ arguments: String..., input: String? = nil) throws -> Run {
    try run(Binaries.kvctl, ["--socket", sandbox.socket] + arguments, input: input)
}

/// A bare varlink client over a blocking Unix socket, for sending exactly the bytes a test wants.
struct RawClient {
    let fd: Int32

    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw TestFailure("connect \(path): \(String(cString: strerror(error)))")
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    init(_ path: String) throws {
        fd = try Self.connect(path)
    }

    func close() { Glibc.close(fd) }

    /// Sends raw bytes; returns false if the daemon closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    func send(_ text: String) { send(Array(text.utf8) + [0]) }

    /// Reads one NUL-terminated reply; `nil` if the connection closed first.
    func receive() -> String? {
        var message: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n <= 0 { return nil }
            if byte == 0 { return String(decoding: message, as: UTF8.self) }
            message.append(byte)
        }
    }

    /// One call, one reply, parsed as a JSON object.
    func call(_ text: String) throws -> [String: Any] {
        send(text)
        guard let reply = receive() else { throw TestFailure("connection closed instead of a reply to \(text.prefix(100))") }
        return try JSONSerialization.jsonObject(with: Data(reply.utf8)) as! [String: Any]
    }
}
