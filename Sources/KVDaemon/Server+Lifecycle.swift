import Glibc
import KVStorage

/// How the server stops: on SIGTERM/SIGINT after what is in flight, or on idle, decided from
/// the ``Lifecycle``'s timers (the shutdown deadline, the idle timeout, systemd's watchdog).
/// Loop thread only.
extension Server {
    func beginShutdown(signal: Int32) {
        guard !lifecycle.isStopping else { return }
        log.notice(
            "received \(signal == SIGTERM ? "SIGTERM" : signal == SIGHUP ? "SIGHUP" : "SIGINT"): finishing \(commits.inFlight) pending write(s), then stopping"
        )
        Systemd.notify("STOPPING=1")
        lifecycle.beginStopping(grace: limits.shutdownGrace)
        for fd in lifecycle.listeners { poller.forget(fd) }
    }

    func stopReason() -> String? {
        if let deadline = lifecycle.shutdownDeadline {
            let flushed = table.connections.values.allSatisfy { $0.pendingOutput == 0 }
            if commits.inFlight == 0 && (flushed || ContinuousClock.now >= deadline) { return "stopped on request" }
            return nil
        }
        guard let idleExit = lifecycle.idleExit, table.connections.isEmpty, commits.inFlight == 0, store.isIdle
        else { return nil }
        guard ContinuousClock.now - lifecycle.lastActivity >= idleExit else { return nil }
        return exitUnlessClientsWait(idle: idleExit)
    }

    /// Idle long enough: exits unless a client waits in the backlog. kvd's own socket is shut
    /// first, so from then on a connecting client is refused (kvctl then starts a fresh kvd)
    /// and one already queued is accepted and served, kvd going on with a fresh socket in its
    /// place: no connection is queued and then dropped. A socket from systemd is left alone:
    /// systemd keeps queueing clients on it and starts kvd again for them.
    func exitUnlessClientsWait(idle: Duration) -> String? {
        lifecycle.idleExitHook?(.deciding)
        do { try socket.refuseNewConnections() } catch {
            log.warning(
                "cannot shut the listening socket before exiting on idle (\(error)): a client connecting now may be dropped"
            )
        }
        for fd in lifecycle.listeners { acceptAll(from: fd) }
        guard table.connections.isEmpty else {
            if !socket.activated { listenAgain() }
            return nil
        }
        lifecycle.idleExitHook?(.exiting)
        Systemd.notify("STOPPING=1")
        return "idle for \(idle) with no client"
    }

    /// Replaces kvd's own socket, shut at an idle exit that found a client waiting. Failing
    /// that, kvd keeps its socket shut (no client is queued unseen), serves the clients it has
    /// and exits when idle again.
    func listenAgain() {
        for fd in lifecycle.listeners { poller.forget(fd) }
        do {
            socket = try socket.rebound()
            lifecycle.listeners = socket.fds
            try watchListeners()
            log.notice("a client came as kvd was about to exit on idle: serving it on a fresh socket")
        } catch {
            try? socket.refuseNewConnections()  // already shut, unless it is the fresh one
            lifecycle.listeners = []
            log.error("\(error): serving the \(table.connections.count) client(s) connected, then exiting")
        }
    }

    func nextTimeout() -> Int32 {
        lifecycle.timeout(idle: table.connections.isEmpty, committing: commits.inFlight > 0)
    }
}
