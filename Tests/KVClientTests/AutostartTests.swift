import Glibc
import KVProtocol
import KVTestSupport
import Testing

@testable import KVClient

@Suite struct AutostartTests {
    /// A fresh path where nothing listens.
    func unusedPath() -> String { "/tmp/kvclient-auto-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock" }

    /// Writes an executable shell script and returns its path.
    func script(_ body: String) -> String {
        let path = "/tmp/kvclient-daemon-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sh"
        let text = Array("#!/bin/sh\n\(body)\n".utf8)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o755)
        _ = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        return path
    }

    @Test func disabledByEnvironmentOnlyTriesToConnect() {
        let path = unusedPath()
        let daemon = script("touch \(path).started")
        defer { unlink(daemon) }
        #expect(throws: ClientError.cannotConnect(path: path, reason: "No such file or directory")) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, environment: ["KVD_NO_AUTOSTART": "1"])
        }
        #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, enabled: false, environment: [:])
        }
        #expect(access(path + ".started", F_OK) != 0)
    }

    @Test func missingDaemonIsNamed() {
        let path = unusedPath()
        let error = #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: "/nonexistent/kvd", environment: [:])
        }
        #expect(error?.description.contains("kvd is not at /nonexistent/kvd") == true)
    }

    @Test func daemonGetsSocketArgumentAndEnvironment() {
        let path = unusedPath()
        let record = path + ".args"
        let daemon = script("echo \"$1 $2 $KVD_STATE_DIR\" > \(record); exit 3")
        defer {
            unlink(daemon)
            unlink(record)
        }
        let error = #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": "/tmp/st"])
        }
        #expect(error?.description.contains("exited at once (status 3)") == true)
        let descriptor = open(record, O_RDONLY)
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        #expect(String(decoding: buffer[..<max(0, count)], as: UTF8.self) == "--socket \(path) /tmp/st\n")
    }

    @Test func startedDaemonIsAwaitedAndConnected() throws {
        let server = FakeVarlinkServer { _ in [VarlinkReply(parameters: ["domains": .array([.string("com.a")])])] }
        let path = unusedPath()
        // The "daemon" makes the socket appear after a moment: a link to the fake server's socket.
        let daemon = script("sleep 0.3; ln -s \(server.path) \"$2\"; sleep 1")
        defer {
            unlink(daemon)
            unlink(path)
        }
        let connection = try Autostart.connect(socketPath: path, daemonPath: daemon, environment: [:])
        #expect(try connection.domains().map(\.name) == ["com.a"])
    }
}
