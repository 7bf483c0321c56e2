import KVProtocol
import KVValues

/// One client's state on the event loop thread (never touched from another thread).
///
/// Calls are handled one at a time in arrival order, so replies leave in call order: while a
/// write waits for its durable commit, later pipelined calls wait in ``framer``.
final class ClientConnection {
    let id: Int
    let fd: Int32
    var framer = MessageFramer()
    /// Reply bytes not yet accepted by the socket, from ``outputStart`` on.
    private(set) var output: [UInt8] = []
    private var outputStart = 0
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

    init(id: Int, fd: Int32) {
        self.id = id
        self.fd = fd
    }

    var pendingOutput: Int { output.count - outputStart }

    func send(_ reply: VarlinkReply) {
        guard !hungUp else { return }
        reply.encode(into: &output)
    }

    /// Queues a reply that `write` appends (whole message, NUL included).
    func send(writing write: (inout [UInt8]) -> Void) {
        guard !hungUp else { return }
        write(&output)
    }

    /// Forgets unsent replies (nobody is left to read them).
    func dropOutput() {
        output = []
        outputStart = 0
    }

    /// Writes as much pending output as the socket takes. Throws when the peer is gone.
    func flush() throws(SystemError) {
        while outputStart < output.count {
            let start = outputStart
            let written = try output.withUnsafeBytes { raw in
                Result { () throws(SystemError) in try Sys.send(fd, UnsafeRawBufferPointer(rebasing: raw[start...])) }
            }.get()
            if written == 0 { break }
            outputStart += written
        }
        if outputStart == output.count {
            output.removeAll(keepingCapacity: output.count <= 1 << 16)
            outputStart = 0
        } else if outputStart > 1 << 20 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
    }
}
