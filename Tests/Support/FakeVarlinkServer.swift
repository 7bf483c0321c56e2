import Foundation
import Glibc
import KVProtocol
import KVSystem
import Synchronization

/// A varlink server on background threads, for the client's and kvctl's tests: listens on a
/// fresh socket path, serves each connection on a thread of its own (a watch may stay open while
/// other calls are answered), and answers each call with what `respond` returns (`nil`: close
/// the connection), or streams what `serve` sends. Records every call it receives. Its socket
/// calls go through ``LinuxSystem``, like the client's.
public final class FakeVarlinkServer: Sendable {
    /// The socket path to connect to.
    public let path: String
    private let listener: Int32
    private let calls = Calls()

    /// The calls received, shared with the serving thread.
    private final class Calls: Sendable {
        let list = Mutex<[VarlinkCall]>([])
    }

    /// Listens at `/tmp/PREFIX-PID-RANDOM.sock` and serves until released.
    public convenience init(prefix: String = "kvd-fake", respond: @escaping @Sendable (VarlinkCall) -> [VarlinkReply]?)
    {
        self.init(prefix: prefix) { call, send in
            guard let replies = respond(call) else { return false }
            return replies.allSatisfy(send)
        }
    }

    /// Listens at `/tmp/PREFIX-PID-RANDOM.sock` and serves until released: `serve` answers one
    /// call through `send` (false: the client went away), as many replies as it likes, and
    /// returns whether to keep the connection open for further calls. `serve` may block (to
    /// stream a watch); it then holds only its own connection's thread.
    public init(
        prefix: String = "kvd-fake", serve: @escaping @Sendable (VarlinkCall, _ send: (VarlinkReply) -> Bool) -> Bool
    ) {
        let system = LinuxSystem()
        path = "/tmp/\(prefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        do {
            listener = try system.listenUnix(path, backlog: 8)
            try Self.makeBlocking(listener, system)
        } catch {
            preconditionFailure("cannot listen on \(path): \(error)")
        }
        let (listener, calls) = (listener, calls)
        Thread.detachNewThread { Self.serve(listener, calls, serve, system) }
    }

    deinit {
        // Wakes the serving thread, which then closes the listener: closing it here could hand
        // its number to another test's socket while the thread still accepts on it.
        let system = LinuxSystem()
        _ = try? system.shutdown(listener)
        _ = try? system.unlink(path)
    }

    /// The calls received so far.
    public var received: [VarlinkCall] { calls.list.withLock { $0 } }

    private static func makeBlocking(_ fd: Int32, _ system: LinuxSystem) throws(Errno) {
        try system.setStatusFlags(fd, try system.statusFlags(fd) & ~O_NONBLOCK)
    }

    /// Serves connections until the listener is shut down, each on a thread of its own.
    private static func serve(
        _ listener: Int32, _ calls: Calls, _ serve: @escaping Responder, _ system: LinuxSystem
    ) {
        while let client = try? system.retrying("accept4", { () throws(Errno) in try system.accept(listener) }) {
            Thread.detachNewThread {
                if (try? makeBlocking(client, system)) != nil { serveConnection(client, calls, serve, system) }
                system.close(client)
            }
        }
        system.close(listener)
    }

    typealias Responder = @Sendable (VarlinkCall, _ send: (VarlinkReply) -> Bool) -> Bool

    private static func serveConnection(_ client: Int32, _ calls: Calls, _ serve: Responder, _ system: LinuxSystem) {
        var framer = MessageFramer()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let send = { (reply: VarlinkReply) -> Bool in
            reply.encoded().withUnsafeBytes { bytes in (try? system.sendAll(client, bytes)) != nil }
        }
        while true {
            while let message = try? framer.next() {
                guard let call = try? VarlinkCall(message: message) else { return }
                calls.list.withLock { $0.append(call) }
                guard serve(call, send) else { return }
            }
            let count = chunk.withUnsafeMutableBytes { (try? system.receive(client, into: $0)) ?? 0 }
            guard count > 0 else { return }
            chunk.withUnsafeBytes { framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }
}
