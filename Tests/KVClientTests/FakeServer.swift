import Glibc
@testable import KVClient
import KVProtocol
import Synchronization

/// A varlink server in a background thread, for tests: accepts connections one after another
/// on a fresh socket path and answers each call with what `respond` returns (`nil`: close the
/// connection). Records every call it receives.
final class FakeServer: Sendable {
    let path: String
    private let listener: Int32
    private let calls = Calls()
    private let respond: @Sendable (VarlinkCall) -> [VarlinkReply]?

    init(respond: @escaping @Sendable (VarlinkCall) -> [VarlinkReply]?) {
        path = "/tmp/kvclient-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        self.respond = respond
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = UnixSocketAddress(path)!.withSockaddr { bind(listener, $0, $1) }
        precondition(bound == 0 && listen(listener, 8) == 0, "cannot listen on \(path)")
        detachThread { [listener, calls, respond] in Self.serve(listener, calls, respond) }
    }

    deinit {
        // Wakes the serving thread, which then closes the listener: closing it here could hand
        // its number to another test's socket while the thread still accepts on it.
        shutdown(listener, Int32(SHUT_RDWR))
        unlink(path)
    }

    /// The calls received so far.
    var received: [VarlinkCall] { calls.list.withLock { $0 } }

    /// Serves connections until the listener is shut down.
    private static func serve(
        _ listener: Int32, _ calls: Calls, _ respond: @Sendable (VarlinkCall) -> [VarlinkReply]?
    ) {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                close(listener)
                return
            }
            serveConnection(client, calls, respond)
            close(client)
        }
    }

    private static func serveConnection(
        _ client: Int32, _ calls: Calls, _ respond: @Sendable (VarlinkCall) -> [VarlinkReply]?
    ) {
        var framer = MessageFramer()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            while let message = try? framer.next() {
                guard let call = try? VarlinkCall(message: message) else { return }
                calls.list.withLock { $0.append(call) }
                guard let replies = respond(call) else { return }
                for reply in replies {
                    let bytes = reply.encoded()
                    guard bytes.withUnsafeBytes({ send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else { return }
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            chunk.withUnsafeBytes { framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }
}

/// The calls a fake server received, shared with its thread.
final class Calls: Sendable {
    let list = Mutex<[VarlinkCall]>([])
}
