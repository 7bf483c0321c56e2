import Foundation

/// One streaming POST to `/v3/watch` on its own thread: libcurl hands the body over in chunks as
/// they arrive; they are cut into lines (the gateway writes one JSON object a line) for the
/// watching thread, which waits for them with ``next(until:)``.
///
/// Thread-safe: the transfer thread appends, ``next(until:)`` takes; every field is guarded by
/// `condition`. ``close()`` stops the transfer (its thread ends within about a second).
final class WatchStream: @unchecked Sendable {
    enum Next {
        /// One whole line of a 200 answer (without its newline).
        case line(Data)
        /// The stream ended: an HTTP status other than 200 with its body, or the transfer's
        /// failure (nil: etcd closed the stream).
        case ended(status: Int, body: Data, failure: GatewayTransport.Failure?)
        /// Nothing came before the deadline.
        case idle
    }

    private let condition = NSCondition()
    private var lines: [Data] = []
    private var pending = Data()
    private var ending: (status: Int, failure: GatewayTransport.Failure?)?
    private var sink: BodySink?

    /// Starts the POST on a new thread.
    init(_ transport: GatewayTransport, _ url: URL, body: Data, token: String?) {
        let sink = BodySink(collect: false) { [weak self] chunk in self?.take(chunk) ?? false }
        self.sink = sink
        Thread { [self] in
            let status: Int
            var failure: GatewayTransport.Failure?
            do throws(GatewayTransport.Failure) {
                status = try transport.stream(url, body: body, token: token, sink: sink)
            } catch {
                status = 0
                failure = error
            }
            condition.withLock {
                ending = (status, failure)
                condition.broadcast()
            }
        }.start()
    }

    /// Waits until a line arrives, the stream ends, or `deadline` passes.
    func next(until deadline: Date) -> Next {
        condition.lock()
        defer { condition.unlock() }
        while lines.isEmpty && ending == nil {
            if !condition.wait(until: deadline) && lines.isEmpty && ending == nil { return .idle }
        }
        if !lines.isEmpty { return .line(lines.removeFirst()) }
        let (status, failure) = ending!
        return .ended(status: status, body: pending, failure: failure)
    }

    /// Stops the transfer.
    func close() {
        condition.withLock { sink }?.stop()
    }

    /// Transfer thread: a chunk of the body. An error answer (not 200) is kept whole for the end.
    private func take(_ chunk: Data) -> Bool {
        let status = condition.withLock { sink }?.status ?? 0
        condition.withLock {
            pending.append(chunk)
            guard status == 200 else { return }
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[pending.startIndex..<newline]
                if !line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { lines.append(Data(line)) }
                pending = Data(pending[pending.index(after: newline)...])
            }
            condition.broadcast()
        }
        return true
    }
}
