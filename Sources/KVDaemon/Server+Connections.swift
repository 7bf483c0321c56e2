import KVProtocol
import KVStorage
import KVSystem

/// Connections: accepting (and refusing when out of descriptors), reading, writing, hanging
/// up, closing. Loop thread only; every system call through ``Server/system``.
extension Server {
    /// Accepts every connection waiting on `listener`. Out of descriptors (`EMFILE`, `ENFILE`),
    /// refuses one (see ``ConnectionTable/refuseOne(from:)``) and leaves the rest for the next pass.
    func acceptAll(from listener: Int32) {
        guard !lifecycle.isStopping else { return }
        while true {
            let fd: Int32
            do {
                guard let accepted = try system.acceptWaiting(listener) else { return }
                fd = accepted
            } catch  where error.errno == .tooManyOpenFiles || error.errno == .tooManyOpenFilesInSystem {
                if peers.closeSpent() { continue }  // the pidfds kept for this pass first
                return table.refuseOne(from: listener)
            } catch {
                return log.warning("\(error)")
            }
            let connection = ClientConnection(id: table.nextID, fd: fd, memory: memory, system: system)
            // Who connected: its credentials, then /proc through its pidfd (its confinement and
            // the program history records); in a root of its own, its sandbox off the loop.
            let peer = Result { () throws(Errno) in
                limits.identifiesPeers
                    ? try peers.begin(fd)
                    : .identified(PeerProcess(credentials: try system.peerCredentials(fd)))
            }
            if case .failure(let error) = peer, error.isOutOfDescriptors {
                // No descriptor left to learn who it is: refused as a connection over the limit
                // is (closed at once; the client retries), never served unidentified.
                system.close(fd)
                continue
            }
            guard table.admit(connection, credentials: peer.map(\.credentials)) else {
                if case .success(.lookingInRoot(let lookup)) = peer { lookup.abandon(system) }
                system.close(fd)
                continue
            }
            table.add(connection)
            switch peer {
            case .success(.lookingInRoot(let lookup)):
                // Unwatched until its peer is known: none of its calls is read before.
                rootLookups.start(lookup, connection: connection.id)
            case .success(.identified(let identified)): admit(connection, identified: identified)
            case .failure: admit(connection, identified: nil)
            }
        }
    }

    /// Serves `connection` from now on, its peer `identified` (nil: even its credentials are
    /// unknown): watched, its reach and writer set (``ClientConnection/identifyPeer(_:recordsWriter:confines:)``).
    private func admit(_ connection: ClientConnection, identified: PeerProcess?) {
        do {
            try poller.watch(connection.fd, readable: true, writable: false, adding: true)
        } catch {
            log.warning("cannot watch a new connection: \(error)")
            return close(connection)
        }
        connection.identifyPeer(
            identified, recordsWriter: limits.identifiesWriters, confines: limits.identifiesPeers)
        log.log(.debug, "client \(connection.id) connected (\(table.connections.count) open)")
    }

    /// Serves the connections whose peer's root was looked into (``RootLookups``), or whose
    /// patience ran out (unidentified: confined). One whose look found kvd out of descriptors
    /// is closed, as at accept.
    func admitLookedUp() {
        for outcome in rootLookups.takeIdentified() {
            guard let connection = table.byID[outcome.connection] else { continue }
            if outcome.tookTooLong, case .success(let peer) = outcome.peer {
                log.warning(
                    "client \(connection.id) (uid \(peer.credentials.uid), pid \(peer.credentials.pid)): its root did not answer within \(rootLookups.patience) (a FUSE or network file system that hangs?): taken as a process kvd could not identify, so confined"
                )
            }
            switch outcome.peer {
            case .success(let identified): admit(connection, identified: identified)
            case .failure: close(connection)
            }
        }
    }

    /// Closes `connection` and forgets it (``ConnectionTable/remove(_:)``); what it held is
    /// given back.
    func close(_ connection: ClientConnection) {
        rootLookups.cancel(connection.id)
        connection.markClosed()
        connection.releaseMemory()
        poller.forget(connection.fd)
        system.close(connection.fd)
        table.remove(connection)
        lifecycle.noteActivity()
        log.log(.debug, "client \(connection.id) disconnected (\(table.connections.count) open)")
    }

    func read(_ connection: ClientConnection) {
        receive(connection, upTo: inputRoom(connection))
        if !connection.isClosed { process(connection) }
    }

    /// Reads what the socket holds, up to `room`, into the connection's framer (see
    /// ``readInput(_:upTo:)``); notes the end of the stream; closes the connection when reading
    /// fails.
    private func receive(_ connection: ClientConnection, upTo room: Int) {
        guard connection.peer == .connected else { return }
        switch readInput(connection, upTo: room) {
        case .ended: connection.peerDoneSending()
        case .failed: close(connection)
        case .received, .nothingNow: break
        }
    }

    /// What one read of a connection's socket gave.
    enum ReadOutcome { case received, nothingNow, ended, failed }

    /// Reads at most `room` bytes (and one read chunk) of what the socket holds into the
    /// connection's framer and charges them to the budget, which may disconnect clients (this
    /// one too).
    private func readInput(_ connection: ClientConnection, upTo room: Int) -> ReadOutcome {
        guard room > 0 else { return .nothingNow }
        let count: Int?
        do {
            count = try table.readInput(connection, upTo: room)
        } catch {
            log.log(.debug, "client \(connection.id): \(error)")
            return .failed
        }
        guard let count else { return .nothingNow }
        guard count > 0 else { return .ended }
        connection.recharge()
        if memory.isOverBudget { shedClients() }
        return .received
    }

    /// Both directions are gone, so no reply can be delivered; but calls already received still
    /// count (a oneway `Set` followed by a close is ordinary varlink use). Stops watching the
    /// socket (a hung-up socket stays ready forever), reads what is left, handles the calls
    /// with their replies dropped, and closes once nothing is in flight.
    func hangUp(_ connection: ClientConnection) {
        poller.forget(connection.fd)
        let room = { connection.framer.limit + 1 - connection.framer.pendingByteCount }
        if connection.peer == .connected {
            while !connection.isClosed, case .received = readInput(connection, upTo: room()) {}
        }
        guard !connection.isClosed else { return }
        connection.peerHungUp()
        process(connection)
    }

    func flush(_ connection: ClientConnection) {
        do {
            try connection.flush()
        } catch {
            return close(connection)
        }
        process(connection)
    }
}
