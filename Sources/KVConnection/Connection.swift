import KVProtocol
import KVSystem
import KVValues
import Synchronization

/// A blocking connection to kvd over its Unix socket.
///
/// Calls are serialized by an internal lock, so one connection may be shared between threads;
/// each call waits for its reply. Closed when released or by ``close()``. Every system call goes
/// through the `SystemCalls` it was made with.
///
/// ```swift
/// let connection = try Connection(socketPath: Paths.socket(explicit: nil, environment: env))
/// let (value, revision) = try connection.get(domain, key)   // (.string("dark"), 42)
/// ```
public final class Connection: Sendable {
    /// The socket this connection was made to.
    public let socketPath: String
    let system: any SystemCalls
    private let state: Mutex<State>
    /// The descriptor for ``interrupt()``, which must not wait for the lock of a running stream;
    /// set to -1 before the descriptor is closed, so a reused number is never shut down.
    private let interruptible: Mutex<Int32>

    struct State: ~Copyable {
        var descriptor: Int32
        var framer = MessageFramer()
        /// Where replies are received before framing; allocated on the first read and reused
        /// (a fresh zeroed 64 KiB per read was most of a `Set`'s client CPU).
        var chunk: [UInt8] = []
    }

    /// Connects to the kvd socket at `socketPath`, after checking its folder (the rule every kvd
    /// program shares: the fallback folder `/tmp/kvd-<uid>` must be the user's own, mode 0700). Throws ``ClientError/cannotConnect(path:reason:)``
    /// naming the path when that fails, ``ClientError/unsafeSocketFolder(_:)`` for a folder
    /// another user may control.
    public convenience init(socketPath: String) throws(ClientError) {
        try self.init(socketPath: socketPath, system: LinuxSystem())
    }

    convenience init(socketPath: String, system: any SystemCalls) throws(ClientError) {
        try Self.prepareFolder(for: socketPath)
        do {
            self.init(descriptor: try system.connectUnix(socketPath), socketPath: socketPath, system: system)
        } catch {
            throw .cannotConnect(path: socketPath, reason: Self.reason(error, connecting: socketPath, system: system))
        }
    }

    /// Makes sure the folder of the socket at `path` may be trusted, by the rule every kvd program
    /// shares (`SocketFolder.prepare(forSocket:fallback:owner:)`): the fallback folder
    /// (`/tmp/kvd-<uid>`) is created with mode 0700 if missing and must be a folder owned by the
    /// user with mode 0700; a path elsewhere is left alone. Blocks for a `mkdir` and an `lstat`.
    ///
    /// Throws ``ClientError/unsafeSocketFolder(_:)`` saying what to do.
    package static func prepareFolder(for path: String) throws(ClientError) {
        do {
            try SocketFolder.prepare(forSocket: path)
        } catch {
            throw .unsafeSocketFolder(error)
        }
    }

    /// A connection over `descriptor`, a connected blocking Unix stream socket it now owns.
    package init(descriptor: Int32, socketPath: String, system: any SystemCalls) {
        self.socketPath = socketPath
        self.system = system
        self.state = Mutex(State(descriptor: descriptor))
        self.interruptible = Mutex(descriptor)
    }

    /// Why connecting failed, in the words `cannotConnect` shows: the system's message
    /// ("No such file or directory"), or what is wrong with the path.
    static func reason(_ error: SystemError) -> String {
        error.errno == .nameTooLong ? error.description : error.errno.description
    }

    /// ``reason(_:)`` of a failed connect to `path`, but for a path where something that is no
    /// socket stands (a regular file, a folder: the kernel answers "Connection refused" there):
    /// then what it is and what to do, since no kvd can listen at such a path.
    static func reason(_ error: SystemError, connecting path: String, system: any SystemCalls) -> String {
        guard let kind = notASocket(path, after: error, system: system) else { return reason(error) }
        return "\(path) is \(kind), not a socket: \(notASocketAdvice)"
    }

    /// The end of a ``reason(_:connecting:system:)`` for a path no kvd can listen at.
    static let notASocketAdvice = "remove it, or point --socket or KVD_SOCKET at kvd's socket"

    /// What stands at `path` when it is not a socket, after a connect failed with `error`: "a
    /// regular file", "a folder", ...; `nil` when it is a socket, is missing, or the failure is another.
    static func notASocket(_ path: String, after error: SystemError, system: any SystemCalls) -> String? {
        guard error.errno == .connectionRefused || error.errno == .notASocket,
            let status = try? system.status(path, followingLinks: true), status.kind != .socket
        else { return nil }
        switch status.kind {
        case .regular: return "a regular file"
        case .directory: return "a folder"
        case .fifo: return "a FIFO"
        case .symbolicLink: return "a symbolic link"
        case .characterDevice, .blockDevice: return "a device"
        case .socket, .unknown: return "not a socket"
        }
    }

    deinit {
        close()
    }

    /// Closes the connection; later calls throw ``ClientError/connectionClosed``.
    public func close() {
        interruptible.withLock { $0 = -1 }
        state.withLock { state in
            if state.descriptor >= 0 { system.close(state.descriptor) }
            state.descriptor = -1
        }
    }

    /// Makes a call blocked on this connection (a watch) fail at once with
    /// ``ClientError/connectionClosed``, from any thread; the connection is then unusable.
    ///
    /// The corresponding C call is `shutdown(SHUT_RDWR)`.
    package func interrupt() {
        interruptible.withLock { descriptor in
            if descriptor >= 0 { _ = try? system.shutdown(descriptor) }
        }
    }

    /// Sends `request` and returns its reply; an error reply throws its case of ``ClientError``
    /// (``ClientError/init(errorReply:)``).
    /// Not for `DefaultsRequest.watch(_:_:)`, which has many replies: use ``watch(_:_:onEvent:)``.
    public func call(_ request: DefaultsRequest) throws(ClientError) -> VarlinkReply {
        try callPipelined([request])[0].get()
    }

    /// Sends all `requests` at once, then reads their replies, in order. A failure of the
    /// connection fails the requests not yet answered. Each request must have exactly one reply:
    /// no `DefaultsRequest.watch(_:_:)`. A request longer than one message
    /// (`Limits.messageBytes`) is not sent: it fails with ``ClientError/tooLarge(limit:)``, as
    /// kvd would answer it (kvd then closes the connection, often before the client has sent it
    /// all and can read the answer), and the others are still sent.
    public func callPipelined(_ requests: [DefaultsRequest]) -> [Result<VarlinkReply, ClientError>] {
        state.withLock { state in
            var bytes: [UInt8] = []
            var oversized: Set<Int> = []
            for (position, request) in requests.enumerated() {
                let message = request.call.encoded()
                if message.count - 1 > Limits.messageBytes { oversized.insert(position) } else { bytes += message }
            }
            if !oversized.isEmpty {
                let sent = requests.indices.filter { !oversized.contains($0) }
                var replies = sent.isEmpty ? [] : callPipelined(encoded: bytes, count: sent.count, on: &state)
                return requests.indices.map {
                    oversized.contains($0)
                        ? .failure(.tooLarge(limit: Int64(Limits.messageBytes))) : replies.removeFirst()
                }
            }
            return callPipelined(encoded: bytes, count: requests.count, on: &state)
        }
    }

    /// Sends `bytes` (`count` encoded calls), then reads their replies, in order.
    private func callPipelined(encoded bytes: [UInt8], count: Int, on state: inout State) -> [Result<
        VarlinkReply, ClientError
    >] {
        if let failure = send(bytes, on: &state) {
            return Array(repeating: .failure(failure), count: count)
        }
        var results: [Result<VarlinkReply, ClientError>] = []
        for _ in 0..<count {
            do throws(ClientError) {
                results.append(.success(try Self.checked(readReply(from: &state))))
            } catch {
                results.append(.failure(error))
                if !error.isErrorReply {
                    return results + Array(repeating: .failure(error), count: count - results.count)
                }
            }
        }
        return results
    }

    /// Streams the replies of a call made with `more: true` to `onReply` until it returns false,
    /// kvd ends the stream, or the connection fails (which throws). Holds the connection for the
    /// whole stream; after the callback stops early the connection is closed, since replies to
    /// the call may still be on their way.
    public func stream(_ request: DefaultsRequest, onReply: (VarlinkReply) throws(ClientError) -> Bool)
        throws(ClientError)
    {
        try stream(request) { (reply, _) throws(ClientError) in try onReply(reply) }
    }

    /// ``stream(_:onReply:)``, telling `onReply` with each reply whether more bytes have been
    /// received already (`moreReceived`): a reader that saves what it read can wait for a
    /// pause in the stream instead of saving after each reply.
    package func stream(
        _ request: DefaultsRequest, onReply: (VarlinkReply, _ moreReceived: Bool) throws(ClientError) -> Bool
    ) throws(ClientError) {
        let stopped = try state.withLock { (state: inout State) throws(ClientError) -> Bool in
            let message = request.call.encoded()
            guard message.count - 1 <= Limits.messageBytes else { throw .tooLarge(limit: Int64(Limits.messageBytes)) }
            if let failure = send(message, on: &state) { throw failure }
            while true {
                let reply = try Self.checked(readReply(from: &state))
                guard try onReply(reply, state.framer.pendingByteCount > 0) else { return true }
                guard reply.continues else { return false }
            }
        }
        if stopped { close() }
    }

    private func send(_ bytes: [UInt8], on state: inout State) -> ClientError? {
        guard state.descriptor >= 0 else { return .connectionClosed }
        let descriptor = state.descriptor
        do {
            try bytes.withUnsafeBytes { raw in Result { () throws(SystemError) in try system.sendAll(descriptor, raw) }
            }.get()
            return nil
        } catch {
            return error.errno == .brokenPipe || error.errno == .connectionReset
                ? .connectionClosed : .connectionFailed(error)
        }
    }

    private func readReply(from state: inout State) throws(ClientError) -> VarlinkReply {
        while true {
            let message: ArraySlice<UInt8>?
            do { message = try state.framer.next() } catch { throw .protocolError(error.description) }
            if let message {
                do { return try VarlinkReply(message: message) } catch { throw .protocolError(error.description) }
            }
            guard state.descriptor >= 0 else { throw .connectionClosed }
            if state.chunk.isEmpty { state.chunk = [UInt8](repeating: 0, count: 65_536) }
            let descriptor = state.descriptor
            let received = state.chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try system.receive(descriptor, into: raw) }
            }
            switch received {
            case .success(0): throw .connectionClosed
            case .success(let count):
                state.chunk.withUnsafeBytes { state.framer.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            case .failure(let error) where error.errno == .connectionReset: throw .connectionClosed
            case .failure(let error): throw .connectionFailed(error)
            }
        }
    }

    private static func checked(_ reply: VarlinkReply) throws(ClientError) -> VarlinkReply {
        if reply.error != nil { throw ClientError(errorReply: reply) }
        return reply
    }
}
