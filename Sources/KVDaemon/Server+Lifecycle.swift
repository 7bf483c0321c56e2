import Glibc
import KVStorage

/// How the server stops: on SIGTERM/SIGINT after what is in flight, or on idle, decided from
/// the ``Lifecycle``'s timers (the shutdown deadline, the idle timeout, systemd's watchdog).
/// Loop thread only.
extension Server {
    func beginShutdown(signal: Int32) {
        guard lifecycle.beginStopping(grace: limits.shutdownGrace) else { return }
        log.notice(
            "received \(signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : "SIGINT"): finishing \(commits.inFlight) pending write(s), then stopping"
        )
        Systemd.notify("STOPPING=1")
        for fd in lifecycle.listeners { poller.forget(fd) }
    }

    /// The reason to stop now, or nil (``Lifecycle/verdict(connected:inFlight:flushed:storeIdle:)``).
    func stopReason() -> String? {
        let verdict = lifecycle.verdict(
            connected: !table.connections.isEmpty, inFlight: commits.inFlight,
            flushed: { table.connections.values.allSatisfy { $0.pendingOutput == 0 } }, storeIdle: { store.isIdle })
        switch verdict {
        case .goOn: return nil
        case .stop(let reason): return reason
        case .idle(let idle): return lifecycle.exitOnIdle(idle, unless: clientsWaited)
        }
    }

    /// Idle long enough: whether a client waited in the backlog. kvd's own socket is shut
    /// first, so from then on a connecting client is refused (kvctl then starts a fresh kvd)
    /// and one already queued is accepted and served, kvd going on with a fresh socket in its
    /// place: no connection is queued and then dropped. A socket from systemd is left alone:
    /// systemd keeps queueing clients on it and starts kvd again for them.
    private func clientsWaited() -> Bool {
        do { try socket.refuseNewConnections() } catch {
            log.warning(
                "cannot shut the listening socket before exiting on idle (\(error)): a client connecting now may be dropped"
            )
        }
        for fd in lifecycle.listeners { acceptAll(from: fd) }
        guard table.connections.isEmpty else {
            if !socket.activated { listenAgain() }
            return true
        }
        return false
    }

    /// Replaces kvd's own socket, shut at an idle exit that found a client waiting. Failing
    /// that, kvd keeps its socket shut (no client is queued unseen), serves the clients it has
    /// and exits when idle again.
    private func listenAgain() {
        for fd in lifecycle.listeners { poller.forget(fd) }
        do {
            try lifecycle.rebindSocket()
            try watchListeners()
            log.notice("a client came as kvd was about to exit on idle: serving it on a fresh socket")
        } catch {
            try? socket.refuseNewConnections()  // already shut, unless it is the fresh one
            lifecycle.stopListening()
            log.error("\(error): serving the \(table.connections.count) client(s) connected, then exiting")
        }
    }

    func nextTimeout() -> Int32 {
        let timeout = lifecycle.timeout(idle: table.connections.isEmpty, committing: commits.inFlight > 0)
        guard let lookup = rootLookups.millisecondsToNextDeadline() else { return timeout }
        return timeout < 0 ? lookup : min(timeout, lookup)
    }
}
