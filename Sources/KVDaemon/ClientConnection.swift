import KVProtocol
import KVValues

/// One client's state on the event loop thread (never touched from another thread).
///
/// Calls are handled one at a time in arrival order, so replies leave in call order: while a
/// write waits for its durable commit, later pipelined calls wait in ``framer``.
///
/// Memory: what the connection holds (its input buffer, its own unsent replies) is charged to
/// the server's ``ClientMemory`` by ``recharge()``; a large watch reply is a ``SharedReply``,
/// held once for every watcher that has yet to send it.
final class ClientConnection {
    let id: Int
    let fd: Int32
    var framer = MessageFramer()
    /// Reply bytes not yet accepted by the socket, from ``outputStart`` on; they go out after
    /// everything in ``queue``.
    private(set) var output: [UInt8] = []
    private var outputStart = 0
    /// Replies queued before ``output``: shared watch replies, and own bytes that were pending
    /// when one was queued. The first is sent from ``queueOffset`` on.
    private var queue: [Piece] = []
    private var queueOffset = 0
    /// Bytes in ``queue``, the sent part of the first piece included.
    private var queuedBytes = 0
    /// Capacity of the own pieces in ``queue``.
    private var queuedOwnCapacity = 0
    private let memory: ClientMemory
    /// What ``recharge()`` last charged to ``memory``.
    private var charged = 0
    /// A write of this client is being committed; its reply goes out before anything else.
    var awaitingCommit = false
    /// Set by `Watch`: the connection then only streams changes.
    var watch: (domain: Domain, key: Key?, since: Int64)? {
        didSet { isWatching = watch != nil }
    }
    /// `watch != nil`, kept as a plain flag: it is checked for every call.
    private(set) var isWatching = false
    /// Close once the output is flushed (after a fatal protocol error, or the peer hung up).
    var closeAfterFlush = false
    /// The peer closed its sending side; no more calls will come.
    var peerClosed = false
    /// Both directions are gone: replies are dropped, and the socket is no longer polled.
    var hungUp = false
    /// Calls are left over after its turn; it is queued for the next one.
    var waitingForTurn = false
    /// Queued to be settled (flushed, closed or re-registered) at the end of the loop's pass.
    var needsSettling = false
    /// Closed by the server; a queued settle skips it.
    var isClosed = false
    /// Interest currently registered with epoll, to skip needless `epoll_ctl` calls.
    var registered: (readable: Bool, writable: Bool) = (true, false)

    private enum Piece {
        case own([UInt8])
        case shared(SharedReply)

        var bytes: [UInt8] {
            switch self {
            case .own(let bytes): bytes
            case .shared(let reply): reply.bytes
            }
        }
    }

    init(id: Int, fd: Int32, memory: ClientMemory) {
        self.id = id
        self.fd = fd
        self.memory = memory
    }

    /// Reply bytes not yet accepted by the socket.
    var pendingOutput: Int { queuedBytes - queueOffset + output.count - outputStart }

    func send(_ reply: VarlinkReply) {
        guard !hungUp else { return }
        reply.encode(into: &output)
    }

    /// Queues a reply that `write` appends (whole message, NUL included).
    func send(writing write: (inout [UInt8]) -> Void) {
        guard !hungUp else { return }
        write(&output)
    }

    /// Queues a reply encoded once for several watchers: a small one is copied into the
    /// output, a large one is held by reference (charged to ``memory`` while anyone holds it).
    func send(shared reply: SharedReply) {
        guard !hungUp else { return }
        guard reply.bytes.count >= SharedReply.minimumShared else { return output.append(contentsOf: reply.bytes) }
        if outputStart < output.count {
            let own = Array(output[outputStart...])
            queue.append(.own(own))
            queuedBytes += own.count
            queuedOwnCapacity += own.capacity
        }
        output.removeAll(keepingCapacity: output.capacity <= 1 << 16)
        outputStart = 0
        reply.hold(memory)
        queue.append(.shared(reply))
        queuedBytes += reply.bytes.count
    }

    /// Forgets unsent replies (nobody is left to read them).
    func dropOutput() {
        while !queue.isEmpty { popPiece() }
        output = []
        outputStart = 0
    }

    /// Charges what the connection holds now to ``memory`` (its input buffer, its own unsent
    /// replies; shared replies are charged once, by themselves).
    func recharge() {
        let now = framer.retainedByteCount + output.capacity + queuedOwnCapacity
        memory.add(now - charged)
        charged = now
    }

    /// Gives back everything the connection holds (it is being closed).
    func releaseMemory() {
        dropOutput()
        memory.add(-charged)
        charged = 0
    }

    /// Bytes that closing this connection would let go of at most: its input buffer and every
    /// unsent reply, shared ones counted in full.
    var heldBytes: Int { framer.retainedByteCount + output.capacity + queuedOwnCapacity + queuedSharedBytes }

    /// "16.0 MiB: 16.0 MiB of input (an unfinished message), 0 B of unsent replies".
    var memoryDescription: String {
        let input = framer.retainedByteCount
        let unfinished = framer.pendingByteCount > 0 ? " (an unfinished message or queued calls)" : ""
        return "\(ClientMemory.text(heldBytes)): \(ClientMemory.text(input)) of input\(unfinished), "
            + "\(ClientMemory.text(pendingOutput)) of unsent replies"
    }

    private var queuedSharedBytes: Int {
        queue.reduce(0) { sum, piece in
            if case .shared(let reply) = piece { return sum + reply.bytes.count }
            return sum
        }
    }

    /// Writes as much pending output as the socket takes. Throws when the peer is gone.
    func flush() throws(SystemError) {
        while let first = queue.first {
            let bytes = first.bytes
            queueOffset += try send(bytes, from: queueOffset)
            guard queueOffset == bytes.count else { return }
            popPiece()
        }
        outputStart += try send(output, from: outputStart)
        if outputStart == output.count {
            output.removeAll(keepingCapacity: output.capacity <= 1 << 16)
            outputStart = 0
        } else if outputStart > 1 << 20 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
    }

    /// Sends `bytes` from `start` on until the socket is full; returns the count sent.
    private func send(_ bytes: [UInt8], from start: Int) throws(SystemError) -> Int {
        var sent = 0
        while start + sent < bytes.count {
            let offset = start + sent
            let written = try bytes.withUnsafeBytes { raw in
                Result { () throws(SystemError) in try Sys.send(fd, UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }.get()
            if written == 0 { break }
            sent += written
        }
        return sent
    }

    /// Removes the first queued piece, sent or dropped.
    private func popPiece() {
        let first = queue.removeFirst()
        queuedBytes -= first.bytes.count
        queueOffset = 0
        switch first {
        case .own(let bytes): queuedOwnCapacity -= bytes.capacity
        case .shared(let reply): reply.release(memory)
        }
    }
}
