import KVProtocol
import KVValues

/// Replies made piece by piece (``ReplyStream``): a watcher's first replies, or a `Backup`'s,
/// are made while the client has little unsent, at the start and after each pass's reads and
/// writes; live replies to a watcher wait behind the last piece, and a streaming client's next
/// calls are handled after it. Loop thread only.
extension Server {
    /// Makes `connection` (a watcher, or a client in ``ClientConnection/Phase/streaming``,
    /// whose call is being handled: the caller settles it) get `stream`'s pieces, then its
    /// live replies or its next calls.
    func startStream(_ stream: ReplyStream, to connection: ClientConnection) {
        table.startStream(stream, for: connection)
        refill(connection, stream, settle: false)
    }

    /// Makes pieces for every watcher with a stream that has read most of what it was sent.
    func refillStreams() {
        for (id, stream) in table.streams {
            guard let connection = table.byID[id], !connection.isClosed else {
                table.dropStream(id)
                continue
            }
            refill(connection, stream, settle: true)
        }
    }

    /// Makes pieces while `connection` has less than ``ReplyStream/lowWater`` unsent; after the
    /// last, sends the live replies kept (a watcher) or serves its next calls again (a
    /// streaming client); with `settle`, handles them and queues the connection to be settled.
    private func refill(_ connection: ClientConnection, _ stream: ReplyStream, settle: Bool) {
        guard connection.pendingOutput < ReplyStream.lowWater else { return }
        while connection.pendingOutput < ReplyStream.lowWater, let piece = stream.nextPiece() {
            switch piece {
            case .own(let reply): connection.send(reply)
            case .shared(let reply): connection.send(shared: reply)
            }
        }
        if stream.isDone {
            table.endStream(connection.id)
            connection.streamEnded()
            for reply in stream.takeDeferred() {
                switch reply {
                case .own(let bytes): connection.send { $0.append(contentsOf: bytes) }
                case .shared(let shared):
                    connection.send(shared: shared)
                    shared.release(memory)
                }
            }
        }
        if settle { process(connection) }
    }

    /// Sends a live reply to a watcher, or keeps it behind the watcher's stream; a watcher that
    /// has more kept than ``Limits/maxPendingOutput`` does not read, and is disconnected.
    func deliver(_ reply: ReplyStream.Deferred, to connection: ClientConnection) {
        guard let stream = table.streams[connection.id] else {
            switch reply {
            case .own(let bytes): connection.send { $0.append(contentsOf: bytes) }
            case .shared(let shared): connection.send(shared: shared)
            }
            return process(connection)
        }
        stream.keep(reply, memory: memory)
        guard stream.deferredBytes > limits.maxPendingOutput else { return }
        log.warning("client \(connection.id) does not read its watch: disconnecting it")
        close(connection)
    }
}
