import KVProtocol
import KVValues

/// Fairness and settling: each connection handles its calls in turns (``Turns``: at most
/// ``Server/Limits/callsPerTurn`` calls or ``Server/Limits/outputPerTurn`` reply bytes); at the
/// end of a pass each connection handled is settled once (replies sent, epoll interest
/// updated, or closed); and what clients hold is kept under ``Server/Limits/maxClientMemory``.
/// Loop thread only.
extension Server {
    /// Handles queued calls of `connection` while it is free to and its turn lasts (``Turns``),
    /// and queues it to be settled at the end of the pass.
    func process(_ connection: ClientConnection) {
        guard !connection.isClosed else { return }
        var turn = turns.begin(connection)
        defer { turns.end(turn, of: connection) }
        while canHandleNextCall(connection), turns.take(&turn, of: connection) {
            let message: ArraySlice<UInt8>
            do {
                guard let next = try connection.nextMessage() else { break }
                message = next
            } catch {
                connection.send(
                    .failure(DefaultsInterface.Error.tooLarge, ["limit": .integer(Int64(connection.framer.limit))]))
                connection.closeAfterFlush()
                let who = connection.uid.map { " (uid \($0)\(connection.mayWrite ? "" : ", who may only read"))" } ?? ""
                log.warning(
                    "client \(connection.id)\(who) sent a message over \(connection.framer.limit) bytes: disconnecting it"
                )
                break
            }
            handle(message, from: connection)
        }
        connection.compactInput()  // the handled calls' bytes, and a large message's buffer
        connection.recharge()
        if memory.isOverBudget { shedClients() }
        table.queueToSettle(connection)
    }

    /// Whether `connection` may handle its next call now: it is serving (not waiting for a
    /// commit or its turn, watching or closing), kvd is not stopping, and its unread replies are
    /// within its cap (``outputCap(_:)``).
    private func canHandleNextCall(_ connection: ClientConnection) -> Bool {
        connection.isServing && !lifecycle.isStopping && connection.pendingOutput <= outputCap(connection)
    }

    /// Unread reply bytes past which a connection's calls wait: ``Limits/readerPendingOutput``
    /// for a reader of the system instance, else ``Limits/maxPendingOutput``.
    func outputCap(_ connection: ClientConnection) -> Int {
        connection.uid != nil && !connection.mayWrite
            ? min(limits.readerPendingOutput, limits.maxPendingOutput) : limits.maxPendingOutput
    }

    /// Gives each connection that had calls left over its next turn (``Turns/serveReady(_:_:)``).
    func serveReady() {
        turns.serveReady({ table.byID[$0] }, process)
    }

    /// Input bytes `connection` may still hold: while its calls cannot be handled (they wait for
    /// a commit or their turn, follow a `Watch`, or kvd is stopping), one read chunk in all;
    /// otherwise one whole message and its NUL, so a message over the limit shows as one.
    func inputRoom(_ connection: ClientConnection) -> Int {
        let waiting = !connection.isServing || lifecycle.isStopping
        return (waiting ? limits.readChunk : connection.framer.limit + 1) - connection.framer.pendingByteCount
    }

    /// Settles every connection handled this pass: its replies go out together at the end of
    /// the pass (as Redis writes them before it sleeps), so a client is woken once per pass
    /// and not once per reply while the loop still works on others.
    func settleAll() {
        while table.hasUnsettled {
            for connection in table.takeUnsettled() where !connection.isClosed { settle(connection) }
        }
    }

    /// Sends what the socket takes, disconnects a watcher that does not read, closes a
    /// finished connection (``ClientConnection/isFinished``), and otherwise updates its epoll
    /// interest.
    private func settle(_ connection: ClientConnection) {
        if connection.pendingOutput > 0, connection.peer != .hungUp {
            do { try connection.flush() } catch { return close(connection) }
        }
        connection.recharge()
        if case .watching = connection.phase, connection.pendingOutput > limits.maxPendingOutput {
            log.warning("client \(connection.id) does not read its watch: disconnecting it")
            return close(connection)
        }
        if connection.isFinished { return close(connection) }
        if connection.peer != .hungUp { updateInterest(connection) }
    }

    private func updateInterest(_ connection: ClientConnection) {
        let readable =
            connection.peer == .connected && connection.phase != .closingAfterFlush
            && connection.pendingOutput <= outputCap(connection) && inputRoom(connection) > 0
        let writable = connection.pendingOutput > 0
        guard connection.registered != (readable, writable) else { return }
        do {
            try poller.watch(connection.fd, readable: readable, writable: writable)
            connection.noteRegistered((readable, writable))
        } catch {
            close(connection)
        }
    }

    /// Clients together hold more than ``Limits/maxClientMemory``: disconnects those holding the
    /// most (unsent replies, unfinished messages) until the rest fit, each with a warning that
    /// names it and what it held (see ``ConnectionTable/sheddingCandidate()`` for whom).
    func shedClients() {
        while memory.isOverBudget, let victim = table.sheddingCandidate() {
            let who = victim.uid.map { " (uid \($0))" } ?? ""
            log.warning(
                "clients hold \(ClientMemory.text(memory.total)), over the budget of \(ClientMemory.text(memory.budget)) "
                    + "(--max-client-memory): disconnecting client \(victim.id)\(who), which holds the most, \(victim.memoryDescription)"
            )
            close(victim)
        }
    }
}
