import FoundationEssentials
import KVSystem

/// One streaming POST to `/v3/watch` on its own thread: libcurl hands the body over in chunks as
/// they arrive; they are cut into lines (the gateway writes one JSON object a line) for the
/// watching thread, which waits for them with ``next(idle:)``.
///
/// Line ends are found incrementally: each chunk is searched once, from where the last search
/// stopped, so a line of N bytes costs O(N) however many chunks bring it (a 32 MB line of a
/// replayed batch is not rescanned whole on each 16 KB chunk). A line longer than
/// ``maximumLineBytes`` ends the stream as a failure that names the limit.
///
/// Thread-safe: the transfer thread appends, ``next(idle:)`` takes; every field is guarded by
/// `condition`. ``close()`` stops the transfer (its thread ends within about a second).
final class WatchStream: @unchecked Sendable {
    /// The longest watch line kept (256 MiB): etcd sends the events of one revision, or of a
    /// batch replayed after a reconnect, as one line; each event is at most etcd's
    /// `--max-request-bytes` (1.5 MiB by default) before base64.
    static let maximumLineBytes = 256 << 20

    enum Next {
        /// One whole line of a 200 answer (without its newline).
        case line(Data)
        /// The stream ended: an HTTP status other than 200 with its body, or the transfer's
        /// failure (nil: etcd closed the stream).
        case ended(status: Int, body: Data, failure: GatewayTransport.Failure?)
        /// No byte came for the idle time.
        case idle
    }

    private let condition = ConditionLock()
    private var lines: [Data] = []
    private var pending = Data()
    /// How far `pending` has been searched for a newline.
    private var scanned = 0
    /// Bytes received so far: a long line that is still arriving is not silence.
    private var received = 0
    private var ending: (status: Int, failure: GatewayTransport.Failure?)?
    private var sink: BodySink?
    private let maximumLine: Int

    /// Starts the POST on a new thread.
    init(
        _ transport: GatewayTransport, _ url: URL, body: Data, token: String?,
        maximumLine: Int = WatchStream.maximumLineBytes
    ) {
        self.maximumLine = maximumLine
        let sink = BodySink(collect: false) { [weak self] chunk in self?.take(chunk) ?? false }
        self.sink = sink
        detachThread { [self] in
            let status: Int
            var failure: GatewayTransport.Failure?
            do throws(GatewayTransport.Failure) {
                status = try transport.stream(url, body: body, token: token, sink: sink)
            } catch {
                status = 0
                failure = error
            }
            condition.withLock {
                if ending == nil { ending = (status, failure) }
                condition.broadcast()
            }
        }
    }

    /// Waits until a line arrives or the stream ends; `.idle` when no byte at all came for
    /// `idle` seconds (bytes of a line still arriving count: a large batch is not silence).
    func next(idle: TimeInterval) -> Next {
        condition.withLock {
            var deadline = ConditionLock.Deadline(after: idle)
            var seen = received
            while lines.isEmpty && ending == nil {
                let woken = condition.wait(until: deadline)
                if received != seen {  // part of a line came: the idle time starts again
                    seen = received
                    deadline = ConditionLock.Deadline(after: idle)
                } else if !woken && lines.isEmpty && ending == nil {
                    return .idle
                }
            }
            if !lines.isEmpty { return .line(lines.removeFirst()) }
            let (status, failure) = ending!
            return .ended(status: status, body: pending, failure: failure)
        }
    }

    /// Stops the transfer.
    func close() {
        condition.withLock { sink }?.stop()
    }

    /// Transfer thread: a chunk of the body. An error answer (not 200) is kept whole for the end.
    private func take(_ chunk: Data) -> Bool {
        let status = condition.withLock { sink }?.status ?? 0
        return condition.withLock {
            defer { condition.broadcast() }
            received &+= chunk.count
            pending.append(chunk)
            guard status == 200 else { return true }
            cutLines()
            guard pending.count <= maximumLine else {
                ending = (0, .noAnswer("a watch line is longer than kvd's limit of \(maximumLine >> 20) MiB"))
                return false
            }
            return true
        }
    }

    /// Moves the whole lines of `pending` to `lines`, searching only bytes not searched before.
    private func cutLines() {
        var start = pending.startIndex
        var from = pending.startIndex + scanned
        while let newline = pending[from...].firstIndex(of: UInt8(ascii: "\n")) {
            let line = pending[start..<newline]
            if !line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { lines.append(Data(line)) }
            start = pending.index(after: newline)
            from = start
        }
        if start != pending.startIndex { pending = Data(pending[start...]) }
        scanned = pending.count
    }
}
