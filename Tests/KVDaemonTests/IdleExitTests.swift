import Foundation
import Glibc
import KVProtocol
import KVStorage
import KVSystem
import Testing

@testable import KVDaemon

/// The server's exit on idle, at the moments a client can race it: a client that connects then is
/// served or refused, never accepted and dropped ("kvd closed the connection before replying"). The
/// real `Server` runs on a thread with a real store and socket; its `idleExitHook` lets the test
/// connect at the exact moment, which a real client only hits by chance.
@Suite(.serialized) struct IdleExitTests {
    /// A state folder, a socket path beside it, and a server that exits after 50 ms idle.
    final class Fixture: @unchecked Sendable {
        let folder: String
        let store: Store
        let server: Server
        var socketPath: String { folder + "/kvd.sock" }

        init(systemdSocket: Bool = false) throws {
            var template = Array("/tmp/kvd-idle-XXXXXX".utf8CString)
            folder = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            store = try Store(directory: folder + "/state")
            let log = Logger(toJournal: false)
            let socket =
                systemdSocket
                ? ListeningSocket.handedOver([try system.listenUnix(folder + "/kvd.sock")], system: system)
                : try ListeningSocket.open(path: folder + "/kvd.sock", log: log, system: system)
            server = try Server(store: store, socket: socket, log: log, idleExit: .milliseconds(50))
        }

        /// Runs the server until it returns (at most 20 s), then closes as ``Daemon`` does.
        func run() throws -> String {
            let finished = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var reason: String?
            Thread.detachNewThread { [self] in
                reason = try? server.run()
                finished.signal()
            }
            guard finished.wait(timeout: .now() + 20) == .success else {
                throw TestFailure("the server did not exit on idle")
            }
            store.close()
            server.socket.close()
            return reason ?? "the event loop failed"
        }

        deinit {
            store.close()
            _ = try? FileManager.default.removeItem(atPath: folder)
        }
    }

    /// kvd's own socket: once kvd has looked at its backlog for the last time, a client that
    /// connects is refused (kvctl then starts a fresh kvd); it is never queued and dropped.
    @Test func aClientConnectingAsKvdExitsIsRefusedNotDropped() throws {
        let fixture = try Fixture()
        nonisolated(unsafe) var late: Int32?
        fixture.server.idleExitHook = { step in
            guard step == .exiting else { return }
            late = try? system.connectUnix(fixture.socketPath)
        }
        let reason = try fixture.run()
        #expect(reason.hasPrefix("idle"), "\(reason)")
        guard let late else { return }  // refused: the right outcome
        defer { system.close(late) }
        let reply = exchange(late, #"{"method":"io.kvd.Defaults.Domains"}"#)
        Issue.record(
            "a client connected as kvd exited on idle, then got \(reply ?? "the connection closed before a reply")")
    }

    /// A client queued as kvd decides to exit is accepted and served, and kvd goes on
    /// listening on a fresh socket at the same path; it exits once idle again.
    @Test func aClientQueuedAsKvdDecidesIsServedOnAFreshSocket() throws {
        let fixture = try Fixture()
        let connected = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var early: Int32?
        nonisolated(unsafe) var decisions = 0
        fixture.server.idleExitHook = { step in
            guard step == .deciding else { return }
            decisions += 1
            guard decisions == 1 else { return }
            early = try? system.connectUnix(fixture.socketPath)
            connected.signal()
        }
        nonisolated(unsafe) var reason: String?
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            reason = try? fixture.run()
            done.signal()
        }
        #expect(connected.wait(timeout: .now() + 10) == .success)
        let client = try #require(early, "the client could not connect before kvd decided")
        #expect(
            exchange(client, #"{"method":"io.kvd.Defaults.Domains"}"#)?.contains("domains") == true,
            "the queued client was not served")
        let fresh = try system.connectUnix(fixture.socketPath)
        #expect(
            exchange(fresh, #"{"method":"io.kvd.Defaults.Domains"}"#)?.contains("domains") == true,
            "the fresh socket does not serve")
        system.close(fresh)
        system.close(client)
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(reason?.hasPrefix("idle") == true, "\(reason ?? "no reason")")
        #expect(decisions >= 2)
    }

    /// A socket from systemd is left alone: a client that connects as kvd exits stays queued
    /// on it, for the kvd systemd starts next.
    @Test func onASocketFromSystemdAClientConnectingAtExitStaysQueued() throws {
        let fixture = try Fixture(systemdSocket: true)
        nonisolated(unsafe) var late: Int32?
        fixture.server.idleExitHook = { step in
            guard step == .exiting else { return }
            late = try? system.connectUnix(fixture.socketPath)
            if let late { _ = send(late, "x", 1, Int32(MSG_NOSIGNAL)) }
        }
        let listener = fixture.server.socket.fds[0]
        defer { system.close(listener) }
        let reason = try fixture.run()
        #expect(reason.hasPrefix("idle"), "\(reason)")
        let client = try #require(late, "the client was refused: systemd's socket was shut")
        defer { system.close(client) }
        let next = try #require(try system.acceptWaiting(listener), "the client was not left queued for the next kvd")
        defer { system.close(next) }
        var byte: UInt8 = 0
        var readable = pollfd(fd: next, events: Int16(POLLIN), revents: 0)
        #expect(poll(&readable, 1, 5000) == 1, "the client's byte did not arrive on the queued connection")
        #expect(read(next, &byte, 1) == 1 && byte == UInt8(ascii: "x"))
    }

    /// Sends one call on a blocking socket and reads its reply (5 s at most); `nil` if the
    /// connection closed first.
    private func exchange(_ fd: Int32, _ call: String) -> String? {
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(call.utf8) + [0]
        guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { return nil }
        var reply: [UInt8] = []
        var byte: UInt8 = 0
        while recv(fd, &byte, 1, 0) == 1 {
            if byte == 0 { return String(decoding: reply, as: UTF8.self) }
            reply.append(byte)
        }
        return nil
    }
}

/// The real system calls, for the tests' own sockets.
let system = LinuxSystem()

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
