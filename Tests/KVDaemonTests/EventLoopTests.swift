import Foundation
import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// The event loop (`Server`) on its own, over socket pairs, with faults injected into its system
/// calls: `EMFILE` on accept, short writes, `EINTR`, `EAGAIN`, `ECONNRESET`. The test drives the
/// loop pass by pass on its own thread, so each outcome is deterministic.
@Suite struct EventLoopTests {
    /// A server over a ``FaultInjectingSystem`` whose listener hands out socket pairs.
    final class Loop {
        let system = FaultInjectingSystem()
        let folder: String
        let store: Store
        let server: Server

        /// `disk`: what the store writes through (the real one unless a test slows a call).
        /// `systemUpdates`: what the loop follows as its system layer (nil: nothing).
        init(
            limits: Server.Limits = .init(), role: DaemonOptions.Role = .user(systemSocket: nil),
            disk: any FileSystem = LinuxSystem(), systemUpdates: (any SystemUpdateSource)? = nil
        ) throws {
            var template = Array("/tmp/kvd-loop-XXXXXX".utf8CString)
            folder = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
            store = try Store(directory: folder + "/state", fileSystem: disk)
            let listener = system.makeListener()
            server = try Server(
                store: store, socket: .handedOver([listener], system: system),
                log: Logger(toJournal: false, system: system),
                idleExit: nil, limits: limits, system: system, role: role, systemUpdates: systemUpdates)
        }

        deinit {
            store.close()
            _ = try? FileManager.default.removeItem(atPath: folder)
        }

        /// A new client, queued on the listener; the loop accepts it on its next pass.
        func connect() -> Client {
            let (client, daemon) = system.connectPair()
            return Client(fd: client, daemonFD: daemon)
        }

        /// Runs passes of the loop until `done` holds; records an issue naming `what` when it
        /// does not within `passes` passes (each waits at most 20 ms for events).
        @discardableResult
        func run(_ what: String, passes: Int = 250, until done: () -> Bool) -> Bool {
            for _ in 0..<passes {
                if done() { return true }
                do { _ = try server.runPass(maxWait: 20) } catch {
                    Issue.record("the loop failed: \(error)")
                    return false
                }
            }
            if done() { return true }
            Issue.record("\(what): not after \(passes) passes of the loop")
            return false
        }
    }

    /// The test's end of a connection: sends calls, collects replies (never blocking).
    final class Client {
        let fd: Int32
        /// The end the daemon accepts, to aim faults at this connection.
        let daemonFD: Int32
        private var received: [UInt8] = []
        /// The daemon closed the connection (end of stream seen).
        private var closed = false
        /// The test's end is still open.
        private var isOpen = true

        init(fd: Int32, daemonFD: Int32) {
            self.fd = fd
            self.daemonFD = daemonFD
        }

        deinit { disconnect() }

        /// Closes the test's end.
        func disconnect() {
            guard isOpen else { return }
            isOpen = false
            Glibc.close(fd)
        }

        func send(_ calls: String...) {
            var bytes: [UInt8] = []
            for call in calls { bytes += Array(call.utf8) + [0] }
            #expect(
                bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count)
        }

        /// Reads what has arrived; notes the end of the stream.
        private func poll() {
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while !closed, isOpen {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                guard count > 0 else {
                    closed = count == 0 || errno == ECONNRESET
                    return
                }
                received += chunk[..<count]
            }
        }

        /// The complete replies received so far, as text.
        var replies: [String] {
            poll()
            return received.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
                String(decoding: $0, as: UTF8.self)
            }
        }

        var isClosed: Bool {
            poll()
            return closed
        }
    }

    static let set =
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":"\#(String(repeating: "v", count: 3000))"}}"#
    static let get = #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":"k"}}"#
    static let domains = #"{"method":"io.kvd.Defaults.Domains"}"#

    /// Out of descriptors, the loop accepts the waiting client with its spare descriptor and
    /// closes it at once: the client sees the connection close instead of hanging, the loop
    /// does not spin on a listener that stays readable, and once descriptors are free again
    /// clients are served.
    @Test func emfileOnAcceptRefusesTheClientPromptlyAndKeepsServing() throws {
        let loop = try Loop()
        loop.system.limitDescriptors(free: 0)
        let refused = loop.connect()
        loop.run("the client waiting while kvd is out of descriptors was not refused") { refused.isClosed }
        let acceptsWhileOut = loop.system.count(.accept)
        for _ in 0..<20 { _ = try loop.server.runPass(maxWait: 5) }
        #expect(loop.system.count(.accept) == acceptsWhileOut, "the loop kept calling accept on an empty listener")
        #expect(loop.server.table.connections.isEmpty)

        loop.system.limitDescriptors(free: nil)
        let served = loop.connect()
        served.send(Self.domains)
        loop.run("a client after the shortage was not served") { served.replies.count == 1 }
        #expect(served.replies.first?.contains(#""domains""#) == true, "\(served.replies)")
    }

    /// Every send moves at most 64 bytes, and every other one finds the socket full (`EAGAIN`):
    /// each reply still arrives whole and in order, the rest sent on the loop's writable events.
    @Test func shortWritesDeliverEveryReplyWholeAndInOrder() throws {
        let loop = try Loop()
        let client = loop.connect()
        client.send(Self.set)
        loop.run("the Set was not answered") { client.replies.count == 1 }
        for _ in 0..<1000 {
            loop.system.inject(.short(64), on: .send, fd: client.daemonFD)
            loop.system.inject(.fail(.wouldBlock), on: .send, fd: client.daemonFD)
        }
        let sendsBefore = loop.system.count(.send)
        client.send(Self.get, Self.domains, Self.get)
        loop.run("the short writes did not deliver every reply", passes: 2000) { client.replies.count == 4 }
        for _ in 0..<20 { _ = try loop.server.runPass(maxWait: 1) }
        let replies = client.replies.map { try? VarlinkReply(message: ArraySlice($0.utf8)) }
        #expect(replies.count == 4, "\(replies.count) replies for 4 calls")
        guard replies.count == 4 else { return }
        let get = VarlinkReply.value(.string(String(repeating: "v", count: 3000)), revision: 1, source: .user)
        #expect(
            replies[1] == get && replies[3] == get, "a Get reply arrived damaged: \(client.replies[1].prefix(100))...")
        #expect(
            replies[2] == VarlinkReply(parameters: ["domains": .array([.string("d")])]),
            "\(client.replies[2].prefix(100))")
        #expect(loop.system.count(.send) - sendsBefore >= 2 * 6000 / 64, "the sends were not short")
        #expect(!client.isClosed)
    }

    /// `EINTR` from accept, read, send and epoll_wait is retried: the client is served and its
    /// connection stays open.
    @Test func interruptedCallsAreRetried() throws {
        let loop = try Loop()
        let client = loop.connect()
        loop.system.inject(.fail(.interrupted), on: .accept, times: 3)
        loop.system.inject(.fail(.interrupted), on: .epollWait, times: 3)
        loop.system.inject(.fail(.interrupted), on: .read, fd: client.daemonFD, times: 3)
        loop.system.inject(.fail(.interrupted), on: .send, fd: client.daemonFD, times: 3)
        client.send(Self.domains)
        loop.run("a client met by EINTR was not served") { client.replies.count == 1 }
        #expect(!client.isClosed, "the connection was closed after EINTR")
        #expect(loop.server.table.connections.count == 1)
        #expect(loop.system.count(.read) > 3 && loop.system.count(.send) > 3, "the faults were not all met")
    }

    /// A read that finds nothing (`EAGAIN`, as after a spurious wake) is not an error.
    @Test func aReadFindingNothingIsNotAnError() throws {
        let loop = try Loop()
        let client = loop.connect()
        loop.system.inject(.fail(.wouldBlock), on: .read, fd: client.daemonFD, times: 5)
        client.send(Self.domains)
        loop.run("the client was not served after EAGAIN") { client.replies.count == 1 }
        #expect(!client.isClosed)
    }

    /// A connection reset by its peer (on read, or on send) is closed and its memory released;
    /// the other clients are served.
    @Test func aResetConnectionIsClosedAndTheOthersServed() throws {
        let loop = try Loop()
        let onRead = loop.connect()
        let onSend = loop.connect()
        let other = loop.connect()
        loop.run("the clients were not accepted") { loop.server.table.connections.count == 3 }
        loop.system.inject(.fail(.connectionReset), on: .read, fd: onRead.daemonFD)
        loop.system.inject(.fail(.connectionReset), on: .send, fd: onSend.daemonFD)
        onRead.send(Self.domains)
        onSend.send(Self.domains)
        other.send(Self.domains)
        loop.run("the reset connections were not closed") { onRead.isClosed && onSend.isClosed }
        loop.run("the other client was not served") { other.replies.count == 1 }
        #expect(onRead.replies.isEmpty && onSend.replies.isEmpty)
        #expect(loop.server.table.connections.count == 1)
        other.send(Self.get)
        loop.run("the other client's second call was not answered") { other.replies.count == 2 }
        other.disconnect()
        loop.run("the last client's hang-up was not seen") { loop.server.table.connections.isEmpty }
        #expect(loop.server.memory.total == 0, "closed connections still hold \(loop.server.memory.total) bytes")
    }
}
