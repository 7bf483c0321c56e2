import KVProtocol

/// Fairness: each connection handles its calls in turns of at most ``callsPerTurn`` calls or
/// ``outputPerTurn`` reply bytes, then waits behind the others; on the system instance a turn is
/// its uid's, not its own: all the connections of one uid together handle at most one turn's calls
/// and reply bytes per pass of the loop, so a user with many connections gets no more of the loop
/// than a user with one.
///
/// The turns own the rule and its books: what each uid used this pass, and the connections with
/// calls left over, in the order they get the next turn. The server asks them before each call
/// (``take(_:of:)``) and at the start of a pass (``serveReady(_:_:)``). Loop thread only.
final class Turns {
    /// Most calls of one client handled before the others get a turn.
    let callsPerTurn: Int
    /// Most reply bytes produced for one client before the others get a turn.
    let outputPerTurn: Int
    /// The system instance: what each uid's connections handled this pass (a uid's turn).
    @exclusivity(unchecked) private var used: [UInt32: Use] = [:]
    /// Connections with calls left over after their turn, in the order they get the next one.
    @exclusivity(unchecked) private var ready: [Int] = []

    /// Calls handled and reply bytes produced in a turn so far.
    fileprivate struct Use {
        var calls = 0
        var output = 0
    }

    /// One connection's turn as it goes: what its uid had used before it, and what it handled.
    struct Turn {
        fileprivate let uid: UInt32?
        fileprivate let before: Use
        fileprivate let outputBefore: Int
        fileprivate var handled = 0
    }

    init(callsPerTurn: Int, outputPerTurn: Int) {
        self.callsPerTurn = callsPerTurn
        self.outputPerTurn = outputPerTurn
    }

    /// Starts a pass of the loop: every uid has its whole turn again.
    func beginPass() {
        used.removeAll(keepingCapacity: true)
    }

    /// Whether a connection waits for its next turn.
    var hasReady: Bool { !ready.isEmpty }

    /// The turn `connection` starts now: what its uid used this pass counts against it (a user's
    /// kvd, with no uid: each connection's turn is its own).
    func begin(_ connection: ClientConnection) -> Turn {
        Turn(
            uid: connection.uid, before: connection.uid.flatMap { used[$0] } ?? .init(),
            outputBefore: connection.pendingOutput)
    }

    /// Whether `turn` leaves `connection` room for one more call (then counted). When it does not,
    /// the connection, if it has calls left, is queued for a turn on the next pass.
    func take(_ turn: inout Turn, of connection: ClientConnection) -> Bool {
        let output = turn.before.output + connection.pendingOutput - turn.outputBefore
        if turn.before.calls + turn.handled >= callsPerTurn || output >= outputPerTurn {
            if connection.framer.pendingByteCount > 0 { giveTurn(connection) }
            return false
        }
        turn.handled += 1
        return true
    }

    /// Notes what `turn` used against its uid's turn for the rest of the pass.
    func end(_ turn: Turn, of connection: ClientConnection) {
        guard let uid = turn.uid, turn.handled > 0 else { return }
        used[uid] = Use(
            calls: turn.before.calls + turn.handled,
            output: turn.before.output + max(0, connection.pendingOutput - turn.outputBefore))
    }

    /// Queues `connection` for another turn on the next pass of the loop.
    private func giveTurn(_ connection: ClientConnection) {
        connection.waitForTurn()
        ready.append(connection.id)
    }

    /// Gives each connection that had calls left over its next turn (`lookup`: the open
    /// connection of an id, nil once gone; `serve`: handles its calls). A connection whose uid has
    /// used its turn this pass (another of its connections had it) keeps its place at the front
    /// for the next pass, so the connections of one uid take their turns in rotation.
    func serveReady(_ lookup: (Int) -> ClientConnection?, _ serve: (ClientConnection) -> Void) {
        guard !ready.isEmpty else { return }
        var waiting: [Int] = []
        let queued = ready
        ready = []
        for id in queued {
            guard let connection = lookup(id), connection.phase == .waitingForTurn else { continue }
            if let uid = connection.uid, let use = used[uid], use.calls >= callsPerTurn || use.output >= outputPerTurn {
                waiting.append(id)
                continue
            }
            connection.takeTurn()
            serve(connection)
        }
        ready = waiting + ready
    }
}
