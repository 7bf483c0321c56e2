import Foundation
import Glibc
import KVProtocol
import KVSystem
import KVTestSupport
import Synchronization
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
        defer { unlink(path + ".autostart.lock") }
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

    /// A file (or folder) where the socket should be: kernel says "Connection refused", but no kvd
    /// can listen there, so none is started and the error says what stands there and what to do.
    @Test func aFileAtTheSocketPathIsNamedAndNoKvdIsStarted() throws {
        for makeFolder in [false, true] {
            let path = unusedPath()
            defer { unlink(path + ".autostart.lock") }
            if makeFolder { mkdir(path, 0o700) } else { close(open(path, O_WRONLY | O_CREAT, 0o600)) }
            defer { makeFolder ? rmdir(path) : unlink(path) }
            let daemon = script("touch \(path).started")
            defer { unlink(daemon) }
            let error = #expect(throws: ClientError.self) {
                try Autostart.connect(socketPath: path, daemonPath: daemon, environment: [:])
            }
            let text = error?.description ?? ""
            #expect(text.contains("\(path) is \(makeFolder ? "a folder" : "a regular file"), not a socket"), "\(text)")
            #expect(!text.contains("is kvd running"), "\(text)")
            #expect(access(path + ".started", F_OK) != 0, "no kvd started for a path where a file stands")
            #expect(throws: ClientError.self) { try Connection(socketPath: path) }
        }
    }

    @Test func missingDaemonIsNamed() {
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        let error = #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: "/nonexistent/kvd", environment: [:])
        }
        #expect(error?.description.contains("kvd is not at /nonexistent/kvd") == true)
    }

    @Test func daemonGetsSocketArgumentAndEnvironment() {
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        let record = path + ".args"
        let state = stateFolder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let daemon = script("echo \"$1 $2 $KVD_STATE_DIR\" > \(record); exit 3")
        defer {
            unlink(daemon)
            unlink(record)
        }
        let error = #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": state])
        }
        #expect(error?.description.contains("exited at once (status 3)") == true)
        let descriptor = open(record, O_RDONLY)
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        #expect(String(decoding: buffer[..<max(0, count)], as: UTF8.self) == "--socket \(path) \(state)\n")
    }

    @Test func startedDaemonIsAwaitedAndConnected() throws {
        let server = FakeVarlinkServer { _ in [VarlinkReply(parameters: ["domains": .array([.string("com.a")])])] }
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        // The "daemon" makes the socket appear after a moment: a link to the fake server's socket.
        let daemon = script("sleep 0.3; ln -s \(server.path) \"$2\"; sleep 1")
        let state = stateFolder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        defer {
            unlink(daemon)
            unlink(path)
        }
        let connection = try Autostart.connect(
            socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": state])
        #expect(try connection.domains().map(\.name) == ["com.a"])
    }

    /// A fresh, empty folder for an autostarted kvd's state (`KVD_STATE_DIR`).
    func stateFolder() -> String {
        let path = "/tmp/kvclient-state-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o700)
        return path
    }

    /// The lines of the file at `path` (none if it is missing).
    func lines(_ path: String) -> [String] {
        guard let bytes = try? LinuxSystem().readRegularFile(path, limit: 1 << 22) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    @Test func concurrentClientsStartOneDaemon() throws {
        let server = FakeVarlinkServer { _ in [VarlinkReply(parameters: ["domains": .array([])])] }
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        let starts = path + ".starts"
        // Each "daemon" notes that it was started; the socket appears a moment later.
        let daemon = script("echo $$ >> \(starts); sleep 0.3; ln -s \(server.path) \"$2\" 2>/dev/null; sleep 1")
        let state = stateFolder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        defer { for file in [daemon, path, starts] { unlink(file) } }
        let connected = Mutex(0)
        let threads = try (0..<4).map { _ in
            try startThread {
                let connection = try? Autostart.connect(
                    socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": state])
                if (try? connection?.domains()) != nil { connected.withLock { $0 += 1 } }
            }
        }
        for thread in threads { thread.join() }
        #expect(connected.withLock { $0 } == 4)
        #expect(lines(starts).count == 1, "kvds started for one socket: \(lines(starts))")
    }

    @Test func aDaemonThatFailsToStartIsExplainedFromItsLog() {
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        let state = stateFolder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let daemon = script("echo 'kvd: reading settings' >&2; echo 'boom: cannot start' >&2; exit 1")
        defer { unlink(daemon) }
        let error = #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": state])
        }
        let log = state + "/kvd-autostart.log"
        #expect(error?.description.contains(log) == true, "\(String(describing: error))")
        #expect(error?.description.contains("boom: cannot start") == true, "\(String(describing: error))")
        #expect(error?.description.contains("reading settings") == false, "only the last line is quoted")
        var info = stat()
        #expect(stat(log, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test func theAutostartLogIsEmptiedOnceOverItsBound() throws {
        let path = unusedPath()
        defer { unlink(path + ".autostart.lock") }
        let state = stateFolder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let log = state + "/kvd-autostart.log"
        let old = open(log, O_WRONLY | O_CREAT, 0o600)
        ftruncate(old, 1 << 20 + 1)
        close(old)
        let daemon = script("echo 'second start' >&2; exit 1")
        defer { unlink(daemon) }
        #expect(throws: ClientError.self) {
            try Autostart.connect(socketPath: path, daemonPath: daemon, environment: ["KVD_STATE_DIR": state])
        }
        var info = stat()
        #expect(stat(log, &info) == 0 && info.st_size < 4096, "the log was not cut: \(info.st_size) bytes")
        #expect(lines(log).last == "second start")
    }
}
