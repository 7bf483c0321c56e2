import Glibc
import KVProtocol
import KVValues
import Synchronization

/// A blocking connection to kvd over its Unix socket.
///
/// Calls are serialized by an internal lock, so one connection may be shared between threads;
/// each call waits for its reply. Closed when released or by ``close()``.
///
/// ```swift
/// let connection = try Connection(socketPath: SocketPath.resolve(explicit: nil, environment: env))
/// let (value, revision) = try connection.get(domain, key)   // (.string("dark"), 42)
/// ```
public final class Connection: Sendable {
    /// The socket this connection was made to.
    public let socketPath: String
    private let state: Mutex<State>
    /// The descriptor for ``interrupt()``, which must not wait for the lock of a running stream;
    /// set to -1 before the descriptor is closed, so a reused number is never shut down.
    private let interruptible: Mutex<Int32>

    struct State: ~Copyable {
        var descriptor: Int32
        var framer = MessageFramer()
    }

    /// Connects to the kvd socket at `socketPath`, after checking its folder
    /// (``SocketPath/prepareFolder(for:uid:)``). Throws ``ClientError/cannotConnect(path:reason:)``
    /// naming the path when that fails, ``ClientError/unsafeSocketFolder(_:)`` for a folder
    /// another user may control.
    public convenience init(socketPath: String) throws(ClientError) {
        try SocketPath.prepareFolder(for: socketPath)
        switch Socket.connect(path: socketPath) {
        case .success(let descriptor): self.init(descriptor: descriptor, socketPath: socketPath)
        case .failure(let error): throw .cannotConnect(path: socketPath, reason: error.text)
        }
    }

    init(descriptor: Int32, socketPath: String) {
        self.socketPath = socketPath
        self.state = Mutex(State(descriptor: descriptor))
        self.interruptible = Mutex(descriptor)
    }

    deinit {
        close()
    }

    /// Closes the connection; later calls throw ``ClientError/connectionClosed``.
    public func close() {
        interruptible.withLock { $0 = -1 }
        state.withLock { state in
            if state.descriptor >= 0 { Glibc.close(state.descriptor) }
            state.descriptor = -1
        }
    }

    /// Makes a call blocked on this connection (a watch) fail at once with
    /// ``ClientError/connectionClosed``, from any thread; the connection is then unusable.
    ///
    /// The corresponding C call is `shutdown(SHUT_RDWR)`.
    func interrupt() {
        interruptible.withLock { descriptor in
            if descriptor >= 0 { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    /// Sends `request` and returns its reply; an error reply throws ``ClientError/remote(name:parameters:)``.
    /// Not for ``DefaultsRequest/watch(_:_:)``, which has many replies: use ``watch(_:_:onEvent:)``.
    public func call(_ request: DefaultsRequest) throws(ClientError) -> VarlinkReply {
        try callPipelined([request])[0].get()
    }

    /// Sends all `requests` at once, then reads their replies, in order. A failure of the
    /// connection fails the requests not yet answered. Each request must have exactly one reply:
    /// no ``DefaultsRequest/watch(_:_:)``.
    public func callPipelined(_ requests: [DefaultsRequest]) -> [Result<VarlinkReply, ClientError>] {
        state.withLock { state in
            var bytes: [UInt8] = []
            for request in requests { bytes += request.call.encoded() }
            if let failure = Self.send(bytes, on: &state) {
                return requests.map { _ in .failure(failure) }
            }
            var results: [Result<VarlinkReply, ClientError>] = []
            for _ in requests {
                do throws(ClientError) {
                    results.append(.success(try Self.checked(Self.readReply(from: &state))))
                } catch {
                    results.append(.failure(error))
                    if error.remoteName == nil {
                        return results + Array(repeating: .failure(error), count: requests.count - results.count)
                    }
                }
            }
            return results
        }
    }

    /// Streams the replies of a call made with `more: true` to `onEvent` until it returns false,
    /// kvd ends the stream, or the connection fails (which throws). Holds the connection for the
    /// whole stream; after the callback stops early the connection is closed, since replies to
    /// the call may still be on their way.
    public func stream(_ request: DefaultsRequest, onReply: (VarlinkReply) throws(ClientError) -> Bool) throws(ClientError) {
        let stopped = try state.withLock { (state: inout State) throws(ClientError) -> Bool in
            if let failure = Self.send(request.call.encoded(), on: &state) { throw failure }
            while true {
                let reply = try Self.checked(Self.readReply(from: &state))
                guard try onReply(reply) else { return true }
                guard reply.continues else { return false }
            }
        }
        if stopped { close() }
    }

    private static func send(_ bytes: [UInt8], on state: inout State) -> ClientError? {
        guard state.descriptor >= 0 else { return .connectionClosed }
        guard let error = Socket.sendAll(state.descriptor, bytes) else { return nil }
        return error.code == EPIPE || error.code == ECONNRESET ? .connectionClosed : .protocolError("cannot send: \(error.text)")
    }

    private static func readReply(from state: inout State) throws(ClientError) -> VarlinkReply {
        while true {
            let message: ArraySlice<UInt8>?
            do { message = try state.framer.next() } catch { throw .protocolError(error.description) }
            if let message {
                do { return try VarlinkReply(message: message) } catch { throw .protocolError(error.description) }
            }
            guard state.descriptor >= 0 else { throw .connectionClosed }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let received = chunk.withUnsafeMutableBytes { Socket.receive(state.descriptor, into: $0) }
            switch received {
            case .success(0): throw .connectionClosed
            case .success(let count): chunk.withUnsafeBytes { state.framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            case .failure(let error) where error.code == ECONNRESET: throw .connectionClosed
            case .failure(let error): throw .protocolError("cannot receive: \(error.text)")
            }
        }
    }

    private static func checked(_ reply: VarlinkReply) throws(ClientError) -> VarlinkReply {
        if let name = reply.error { throw .remote(name: name, parameters: reply.parameters) }
        return reply
    }
}
