/// When the loop waits, wakes and stops: the idle timeout and the activity it counts from, the
/// shutdown deadline once SIGTERM or SIGINT came, systemd's watchdog, and the descriptors kvd
/// listens on (and the system instance's drop-in folder watch). This keeps the times; the server decides from them (see `Server+Lifecycle.swift`:
/// ``Server/stopReason()``, ``Server/exitUnlessClientsWait(idle:)``). Loop thread only.
///
/// A class, not a struct: `ContinuousClock.Instant` is resilient, so a struct holding it is
/// copied whole (value witnesses, retains) when the loop reads one of its fields, on every call.
final class Lifecycle {
    /// How long kvd stays with no client before it exits; nil: it never exits on idle.
    let idleExit: Duration?
    /// systemd's watchdog interval (`WATCHDOG_USEC`); nil: no watchdog.
    let watchdog: Duration?
    /// When the last client left (or kvd started): what the idle timeout counts from.
    @exclusivity(unchecked) var lastActivity = ContinuousClock.now
    /// Set when SIGTERM or SIGINT came (``beginStopping(grace:)``): kvd stops once what is in
    /// flight is done, or at this time.
    private(set) var shutdownDeadline: ContinuousClock.Instant?
    /// kvd is stopping (``shutdownDeadline`` is set): it takes no new connection nor call. A
    /// flag of its own, read for every call without copying the deadline.
    @exclusivity(unchecked) private(set) var isStopping = false
    /// When the watchdog is next told kvd is alive.
    @exclusivity(unchecked) var nextWatchdogPing = ContinuousClock.now
    /// The listening descriptors (the socket's, or none when no fresh socket could be had).
    @exclusivity(unchecked) var listeners: [Int32]
    /// The system instance: tells of changes in its drop-in folders (``DropInWatcher``).
    var dropInWatcher: DropInWatcher?
    /// The system instance's config folder (`--config-dir`), once its drop-ins started.
    var dropInDirectory: String?
    /// How long the drop-in folders must stay quiet after a change before they are read again:
    /// an editor's save (vim renames the file away, then writes the new one) or a tool's several
    /// files are one change, never read half done (a lock would lift in between).
    static let dropInSettle = Duration.milliseconds(250)
    /// The longest a reload waits for the folders to be quiet, from the first change.
    static let dropInSettleLimit = Duration.seconds(2)
    /// The first change since the last reload, and when the reload is due; nil: none pending.
    private var dropInChanges: (first: ContinuousClock.Instant, due: ContinuousClock.Instant)?
    /// Tests: called when the idle timeout has passed, before kvd looks at its backlog
    /// (`.deciding`), and when it found nobody there and returns (`.exiting`).
    var idleExitHook: ((Server.IdleExitStep) -> Void)?

    init(idleExit: Duration?, watchdog: Duration?, listeners: [Int32]) {
        self.idleExit = idleExit
        self.watchdog = watchdog
        self.listeners = listeners
    }

    /// Starts stopping: what is in flight has `grace` to finish.
    func beginStopping(grace: Duration) {
        shutdownDeadline = .now + grace
        isStopping = true
    }

    /// The drop-in folders changed: a reload is due once they were quiet for ``dropInSettle``,
    /// at most ``dropInSettleLimit`` after the first change.
    func dropInsChanged() {
        let now = ContinuousClock.now
        let first = dropInChanges?.first ?? now
        dropInChanges = (first, min(now + Self.dropInSettle, first + Self.dropInSettleLimit))
    }

    /// When the drop-in files' last good content is next tried to be saved, while it is not.
    var nextDropInSave: ContinuousClock.Instant?
    /// When the config folder is next looked at: watched once it is there if it is missing or
    /// not watched (mounted later, made again after it was moved away), watched anew if another
    /// folder is at its path (a file system mounted over it).
    var nextDropInLook: ContinuousClock.Instant?
    /// How often the config folder is looked at.
    static let dropInLookInterval = Duration.seconds(5)

    /// Whether a reload of the drop-in folders is due now (then it is no longer pending).
    func takeDueDropInReload() -> Bool {
        guard let changes = dropInChanges, ContinuousClock.now >= changes.due else { return false }
        dropInChanges = nil
        return true
    }

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
        if let changes = dropInChanges { consider(changes.due - now) }
        if let nextDropInSave { consider(nextDropInSave - now) }
        if let nextDropInLook { consider(nextDropInLook - now) }
        if committing && isStopping { consider(.milliseconds(10)) }
        guard let wait else { return -1 }
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
        return Int32(clamping: milliseconds + 1)
    }

    /// Tells systemd's watchdog kvd is alive, when the ping is due (twice per interval).
    func pingWatchdog() {
        guard let watchdog, ContinuousClock.now >= nextWatchdogPing else { return }
        Systemd.notify("WATCHDOG=1")
        nextWatchdogPing = .now + watchdog / 2
    }
}
