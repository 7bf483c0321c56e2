/// When the loop waits, wakes and stops: the idle timeout and the activity it counts from, the
/// shutdown deadline once SIGTERM or SIGINT came, systemd's watchdog, and the descriptors kvd
/// listens on. This keeps the times; the server decides from them (see `Server+Lifecycle.swift`:
/// ``Server/stopReason()``, ``Server/exitUnlessClientsWait(idle:)``). Loop thread only.
struct Lifecycle {
    /// How long kvd stays with no client before it exits; nil: it never exits on idle.
    let idleExit: Duration?
    /// systemd's watchdog interval (`WATCHDOG_USEC`); nil: no watchdog.
    let watchdog: Duration?
    /// When the last client left (or kvd started): what the idle timeout counts from.
    var lastActivity = ContinuousClock.now
    /// Set when SIGTERM or SIGINT came: kvd stops once what is in flight is done, or at this time.
    var shutdownDeadline: ContinuousClock.Instant?
    /// When the watchdog is next told kvd is alive.
    var nextWatchdogPing = ContinuousClock.now
    /// The listening descriptors (the socket's, or none when no fresh socket could be had).
    var listeners: [Int32]
    /// Tests: called when the idle timeout has passed, before kvd looks at its backlog
    /// (`.deciding`), and when it found nobody there and returns (`.exiting`).
    var idleExitHook: ((Server.IdleExitStep) -> Void)?

    init(idleExit: Duration?, watchdog: Duration?, listeners: [Int32]) {
        self.idleExit = idleExit
        self.watchdog = watchdog
        self.listeners = listeners
    }

    /// kvd is stopping: it takes no new connection nor call.
    var isStopping: Bool { shutdownDeadline != nil }

    /// How long the loop may wait for events, in milliseconds (-1: as long as it likes): until
    /// the next timer, with `idle` (no client connected) the idle timeout among them, and with
    /// `committing` (while stopping, commits are awaited) at most 10 ms.
    func timeout(idle: Bool, committing: Bool) -> Int32 {
        var wait: Duration?
        func consider(_ candidate: Duration) { wait = min(wait ?? candidate, max(candidate, .zero)) }
        let now = ContinuousClock.now
        if let deadline = shutdownDeadline { consider(min(deadline - now, .milliseconds(100))) }
        if let idleExit, idle { consider(lastActivity + idleExit - now) }
        if watchdog != nil { consider(nextWatchdogPing - now) }
        if committing && shutdownDeadline != nil { consider(.milliseconds(10)) }
        guard let wait else { return -1 }
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: milliseconds + 1)
    }

    /// Tells systemd's watchdog kvd is alive, when the ping is due (twice per interval).
    mutating func pingWatchdog() {
        guard let watchdog, ContinuousClock.now >= nextWatchdogPing else { return }
        Systemd.notify("WATCHDOG=1")
        nextWatchdogPing = .now + watchdog / 2
    }
}
