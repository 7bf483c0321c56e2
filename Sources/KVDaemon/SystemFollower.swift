/// A user's kvd following the machine's system instance: the system layer every request reads
/// (``layer``, through ``RequestHandler``) and the ``SystemMirror`` thread that reads the system
/// instance's changes.
///
/// The follower is the only writer of the layer: the loop takes what the mirror read
/// (``takeUpdates()``) and has it applied here (``apply(_:)``; the ``WatchFanOut`` looks at what
/// watchers saw before and see after). A kvd that follows nothing (the system instance, or a
/// user's kvd with no system socket) has a follower without a mirror, whose layer stays empty.
/// Loop thread only, except ``stop()``.
final class SystemFollower {
    /// Reads the system instance on its own thread (nil: nothing is followed).
    private let mirror: (any SystemUpdateSource)?
    /// The system layer as the loop last applied it: what reads combine with the user's store.
    @exclusivity(unchecked) private(set) var layer = SystemLayer()
    /// Whether the layer was ever given whole (a snapshot: the system instance's, or the one
    /// saved in the state folder).
    private(set) var hasLayer = false

    init(mirror: (any SystemUpdateSource)? = nil) {
        self.mirror = mirror
    }

    /// Whether updates of the system layer can come (a user's kvd with a system socket).
    var followsSystem: Bool { mirror != nil }

    /// Whether writes must wait for the system layer: a system instance answers, and its first
    /// layer (hence which keys it locks) has not been applied, nor a saved one. A kvd whose
    /// system instance does not answer at all serves writes as if there were none.
    var awaitsFirstLayer: Bool { !hasLayer && (mirror?.isConnected ?? false) }

    /// Starts the mirror's thread and waits, at most `timeout`, for its first snapshot (or the
    /// saved layer); see ``SystemMirror/start(waitingAtMost:)``.
    func start(waitingAtMost timeout: Duration) {
        mirror?.start(waitingAtMost: timeout)
    }

    /// Stops following the system instance. Any thread.
    func stop() { mirror?.stop() }

    /// The system layer's updates read since the last call, in order; apply them together with
    /// ``apply(_:)``.
    func takeUpdates() -> [SystemLayer.Update] {
        mirror?.takeUpdates() ?? []
    }

    /// Applies `updates` to the layer, in order.
    func apply(_ updates: [SystemLayer.Update]) {
        for update in updates {
            if case .snapshot = update { hasLayer = true }
            layer.apply(update)
        }
    }
}

/// Where a follower's updates come from: the ``SystemMirror``'s thread (in tests, a source the
/// test feeds). An update is queued on any thread, and the loop woken once it is there.
protocol SystemUpdateSource: AnyObject {
    /// Starts reading, and waits at most `timeout` for the first layer.
    func start(waitingAtMost timeout: Duration)
    /// Stops reading. Any thread.
    func stop()
    /// Loop thread: the updates queued since the last call, in order.
    func takeUpdates() -> [SystemLayer.Update]
    /// Whether a connection to the system instance is open (it answers). Any thread.
    var isConnected: Bool { get }
}

extension SystemUpdateSource {
    /// A source the test feeds: never connected to anything.
    var isConnected: Bool { false }
}

extension SystemMirror: SystemUpdateSource {}
