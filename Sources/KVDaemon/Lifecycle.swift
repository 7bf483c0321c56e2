/// When the loop waits, wakes and stops: the idle timeout and the activity it counts from, the
/// shutdown deadline once SIGTERM or SIGINT came, systemd's watchdog, and the descriptors kvd
/// listens on (and the system instance's drop-in folder watch). It keeps the times and makes
/// the decisions on them: whether kvd stops (``verdict(connected:inFlight:flushed:storeIdle:)``),
/// whether it exits on idle (``exitOnIdle(_:unless:)``), when the loop next wakes; the server
/// acts on them (`Server+Lifecycle.swift`). Loop thread only.
///
/// A class, not a struct: `ContinuousClock.Instant` is resilient, so a struct holding it is
/// copied whole (value witnesses, retains) when the loop reads one of its fields, on every call.
final class Lifecycle {
    /// How long kvd stays with no client before it exits; nil: it never exits on idle.
    let idleExit: Duration?
    /// systemd's watchdog interval (`WATCHDOG_USEC`); nil: no watchdog.
    let watchdog: Duration?
    /// When the last client left (or kvd started): what the idle timeout counts from.
    @exclusivity(unchecked) private(set) var lastActivity = ContinuousClock.now
    /// Set when SIGTERM or SIGINT came (``beginStopping(grace:)``): kvd stops once what is in
    /// flight is done, or at this time.
    private(set) var shutdownDeadline: ContinuousClock.Instant?
    /// kvd is stopping (``shutdownDeadline`` is set): it takes no new connection nor call. A
    /// flag of its own, read for every call without copying the deadline.
    @exclusivity(unchecked) private(set) var isStopping = false
    /// When the watchdog is next told kvd is alive.
    @exclusivity(unchecked) private var nextWatchdogPing = ContinuousClock.now
    /// kvd's own socket or systemd's; replaced by a fresh one if a client comes at idle exit
    /// (``rebindSocket()``).
    private(set) var socket: ListeningSocket
    /// The listening descriptors (the socket's, or none when no fresh socket could be had).
    @exclusivity(unchecked) private(set) var listeners: [Int32]
    /// The system instance: tells of changes in its drop-in folders (``DropInWatcher``).
    private(set) var dropInWatcher: DropInWatcher?
    /// The system instance's config folder (`--config-dir`), once its drop-ins started.
    private(set) var dropInDirectory: String?
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
    private(set) var idleExitHook: ((Server.IdleExitStep) -> Void)?

    init(idleExit: Duration?, watchdog: Duration?, socket: ListeningSocket) {
        self.idleExit = idleExit
        self.watchdog = watchdog
        self.socket = socket
        self.listeners = socket.fds
    }

    /// Tests: `hook` is called when the idle timeout has passed (``idleExitHook``).
    func onIdleExit(_ hook: ((Server.IdleExitStep) -> Void)?) {
        idleExitHook = hook
    }

    /// A client left (or kvd started): the idle timeout counts from now.
    func noteActivity() {
        lastActivity = .now
    }

    /// Replaces kvd's own socket, shut at an idle exit that found a client waiting, with a fresh
    /// one, listened on from now on.
    func rebindSocket() throws(DaemonError) {
        socket = try socket.rebound()
        listeners = socket.fds
    }

    /// kvd listens on nothing from now on: it serves who is connected, then exits.
    func stopListening() {
        listeners = []
    }

    /// Starts stopping: what is in flight has `grace` to finish. False, changing nothing, when
    /// kvd is already stopping.
    func beginStopping(grace: Duration) -> Bool {
        guard !isStopping else { return false }
        shutdownDeadline = .now + grace
        isStopping = true
        return true
    }

    /// Whether kvd stops now.
    enum Verdict: Equatable {
        case goOn
        /// Stopping, and what was in flight is done (or its grace is over).
        case stop(String)
        /// Idle for `idle` with nothing in flight: kvd exits unless a client waits
        /// (``exitOnIdle(_:unless:)``).
        case idle(Duration)
    }

    /// Whether kvd stops now: while stopping, once no commit is in flight (`inFlight`) and every
    /// reply is out (`flushed`) or the grace is over; otherwise once nobody was `connected`,
    /// nothing in flight and the store idle (`storeIdle`) for the idle timeout.
    func verdict(connected: Bool, inFlight: Int, flushed: () -> Bool, storeIdle: () -> Bool) -> Verdict {
        if let deadline = shutdownDeadline {
            if inFlight == 0 && (flushed() || ContinuousClock.now >= deadline) { return .stop("stopped on request") }
            return .goOn
        }
        guard let idleExit, !connected, inFlight == 0, storeIdle() else { return .goOn }
        guard ContinuousClock.now - lastActivity >= idleExit else { return .goOn }
        return .idle(idleExit)
    }

    /// Idle for `idle`: kvd exits (the reason returned, systemd told) unless `clientsCame`, which
    /// takes in the clients waiting in the backlog, says one came (then nil: kvd serves it).
    func exitOnIdle(_ idle: Duration, unless clientsCame: () -> Bool) -> String? {
        idleExitHook?(.deciding)
        guard !clientsCame() else { return nil }
        idleExitHook?(.exiting)
        Systemd.notify("STOPPING=1")
        return "idle for \(idle) with no client"
    }

    /// The system instance's drop-ins start in `directory`: it is looked at every
    /// ``dropInLookInterval`` from now on.
    func startDropIns(in directory: String) {
        dropInDirectory = directory
        nextDropInLook = .now + Self.dropInLookInterval
    }

    /// The drop-in folders are watched by `watcher` from now on.
    func dropInsWatched(by watcher: DropInWatcher) {
        dropInWatcher = watcher
    }

    /// Whether the config folder is due to be looked at (then it is next due an interval later).
    func takeDueDropInLook() -> Bool {
        guard let look = nextDropInLook, ContinuousClock.now >= look else { return false }
        nextDropInLook = .now + Self.dropInLookInterval
        return true
    }

    /// Whether saving the drop-in files' last good content is to be tried again now, while it is
    /// `unsaved`: every ``DropInLayer/saveRetry`` (the first try one interval after it failed);
    /// tell ``dropInSaveTried(unsaved:)`` how it went.
    func takeDueDropInSave(unsaved: Bool) -> Bool {
        guard unsaved else {
            nextDropInSave = nil
            return false
        }
        let now = ContinuousClock.now
        guard let due = nextDropInSave else {
            nextDropInSave = now + DropInLayer.saveRetry
            return false
        }
        return now >= due
    }

    /// Saving the drop-in files' content was tried again; with it still `unsaved`, the next try
    /// is an interval later.
    func dropInSaveTried(unsaved: Bool) {
        nextDropInSave = unsaved ? .now + DropInLayer.saveRetry : nil
    }

    /// The drop-in folders changed: a reload is due once they were quiet for ``dropInSettle``,
    /// at most ``dropInSettleLimit`` after the first change.
    func dropInsChanged() {
        let now = ContinuousClock.now
        let first = dropInChanges?.first ?? now
        dropInChanges = (first, min(now + Self.dropInSettle, first + Self.dropInSettleLimit))
    }

    /// When the drop-in files' last good content is next tried to be saved, while it is not.
    private var nextDropInSave: ContinuousClock.Instant?
    /// When the config folder is next looked at: watched once it is there if it is missing or
    /// not watched (mounted later, made again after it was moved away), watched anew if another
    /// folder is at its path (a file system mounted over it).
    private var nextDropInLook: ContinuousClock.Instant?
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
