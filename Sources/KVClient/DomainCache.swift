import KVProtocol
import KVSystem
import KVValues
import Synchronization

/// The values of one domain in memory, kept coherent with kvd by a watch on a background thread,
/// so reads need no IPC. The watch reconnects by itself when kvd exits or restarts; the first
/// reply of each new watch is compared with what is cached and the differences are applied, so
/// no change is missed (only intermediate values of a key that changed several times while
/// disconnected are skipped).
///
/// Each change carries its commit's revision, and each key remembers the revision of its last
/// change: a change older than what is cached for its key is ignored, so the process's own writes
/// (applied when acknowledged) and the watch stream may arrive in either order. Changes of the
/// system layer (a lock, a machine default) carry no revision of their own: kvd streams them with
/// the user store's revision, unchanged. So the stream's order is the truth: a streamed change
/// applies at a revision equal to the last one streamed, and anything from outside the stream (an
/// acknowledgement, a `List`) applies only when it is newer than everything streamed
/// (``State/complete``), since the stream already holds it and maybe a system change
/// after it. This relies on kvd streaming a domain's commits and system changes in one order.
///
/// Each key's source (``ValueSource``) comes with its change; the cache keeps the keys whose value
/// is not the user's, so ``isLocked(_:)`` needs no IPC. A key the administrator locked without a
/// value comes as a change with no value and the source `locked` (and, when its lock lifts, with
/// no value and no source): the cache keeps its source though it holds no value for it.
///
/// Memory follows the keys present, not the keys ever seen: a removed key is remembered only
/// until the watch has delivered its removal (``State/complete``); past that point a
/// change to a key the cache knows nothing of is stale by construction.
///
/// Stops its watch when released. On a ``KVMemoryStore`` there is no thread: the store gives
/// the cache its commits as a watch would, in order.
final class DomainCache: Sendable {
    typealias Changes = [String: Value?]

    /// Where the cache stands with its source of values.
    enum Phase: Equatable {
        /// No snapshot yet: reads return registered values and defaults.
        case empty
        /// A snapshot arrived: the values are kvd's as of the last event (while kvd is away, the
        /// last known ones).
        case loaded
    }

    struct State {
        var values: [String: Value] = [:]
        /// The source of each key whose value is not the user's (`system`, `locked`), and of
        /// each key locked without a value (`locked`; it has no entry in ``values``).
        var sources: [String: ValueSource] = [:]
        /// The revision of each present key's last change.
        var revisions: [String: Int64] = [:]
        /// Removed keys whose removal is newer than ``complete`` (this process's own deletes,
        /// acknowledged before the watch delivered them), with the revision of the removal.
        var removals: [String: Int64] = [:]
        /// Every change up to this revision is in the cache (the watch's last event, or the
        /// last snapshot): a change at or below it to a key the cache knows nothing of is older
        /// than that key's removal.
        var complete = Int64.min
        var phase = Phase.empty
        var onChange: OnChange?
    }

    /// Told the changes of each commit or snapshot that changed the cache; `firstLoad`: the
    /// first snapshot, arriving before anything was read from the cache (not a change anyone saw);
    /// `streamed`: the revision of the watch event or snapshot (nil for this process's own
    /// acknowledged write), after which the stream has delivered every earlier change.
    typealias OnChange = @Sendable (_ domain: Domain, _ changes: Changes, _ firstLoad: Bool, _ streamed: Int64?) -> Void

    let domain: Domain
    let reportDiagnostic: @Sendable (KVDiagnostic) -> Void
    private let state = Mutex(State())
    /// Opened after the first snapshot arrived or the first connection failed.
    let firstAttempt = Gate()
    /// The watch of kvd (reconnecting), or the memory store the cache is subscribed to.
    private let source: Source

    private enum Source {
        case kvd(ReconnectingStream)
        case memory(KVMemoryStore)
    }

    /// The cache of `domain`, fed by a watch of kvd on a thread of its own (reconnecting, with a
    /// backoff of 20 ms doubling to 1 s), or by `transport`'s memory store. `report` hears of an
    /// outage, once each.
    init(domain: Domain, transport: RequestClient.Transport, report: @escaping @Sendable (KVDiagnostic) -> Void) {
        self.domain = domain
        self.reportDiagnostic = report
        switch transport {
        case .kvd(let connect):
            let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(20), maximum: .seconds(1)))
            source = .kvd(stream)
            let cache = Weak(self)
            detachThread { Self.watch(domain, into: cache, connect: connect, stream: stream) }
        case .memory(let store):
            source = .memory(store)
            store.subscribe(self)
        }
    }

    deinit {
        switch source {
        case .kvd(let stream): stream.stop()
        case .memory(let store): store.unsubscribe(self)
        }
    }

    // MARK: reading

    /// Waits (up to `timeout` seconds) for the first snapshot, only the first time.
    func waitUntilLoaded(timeout: Double) {
        if !firstAttempt.opened { firstAttempt.wait(seconds: timeout) }
    }

    var phase: Phase { state.withLock { $0.phase } }
    func value(_ key: String) -> Value? { state.withLock { $0.values[key] } }
    /// Whether the system administrator locked `key` (as of the last change streamed).
    func isLocked(_ key: String) -> Bool { state.withLock { $0.sources[key] == .locked } }
    var values: [String: Value] { state.withLock { $0.values } }
    /// Keys the cache keeps anything for (a value, a revision, a removal): what its memory
    /// grows with.
    var footprint: Int {
        state.withLock {
            Set($0.values.keys).union($0.revisions.keys).union($0.removals.keys).union($0.sources.keys).count
        }
    }

    func setOnChange(_ handler: OnChange?) {
        state.withLock { $0.onChange = handler }
    }

    // MARK: changes

    /// Changes kvd committed at `revision`: a write of this process (acknowledged), or
    /// (`streamed`) a watch event, after which every change up to `revision` has been seen.
    /// `sources` names the streamed changes whose value is not the user's.
    func apply(_ changes: [Change], revision: Int64, streamed: Bool = false, sources: [Key: ValueSource] = [:]) {
        let (changed, handler) = state.withLock { state -> (Changes, OnChange?) in
            var changed: Changes = [:]
            for change in changes {
                let update = Update(
                    value: change.value, source: sources[change.key] ?? .user, revision: revision, streamed: streamed)
                Self.apply(update, to: change.key.name, in: &state, changed: &changed)
            }
            if streamed { Self.complete(through: revision, &state) }
            return (changed, state.onChange)
        }
        if !changed.isEmpty { handler?(domain, changed, false, streamed ? revision : nil) }
    }

    /// A full snapshot taken at `revision`: every key not in it was removed by then. `streamed`:
    /// the first reply of a watch (the stream's start); otherwise a `List`, taken outside the
    /// stream. `sources` names the keys whose value is not the user's, and the keys locked
    /// without a value (not in `snapshot`).
    func reconcile(_ snapshot: [String: Value], revision: Int64, streamed: Bool, sources: [String: ValueSource] = [:]) {
        let firstLoad = !firstAttempt.opened
        let (changed, handler) = state.withLock { state -> (Changes, OnChange?) in
            var changed: Changes = [:]
            for (key, value) in snapshot {
                let update = Update(value: value, source: sources[key] ?? .user, revision: revision, streamed: streamed)
                Self.apply(update, to: key, in: &state, changed: &changed)
            }
            // The keys with no value: removed, or locked without one (as `sources` says).
            let valueless = Set(state.values.keys).union(state.sources.keys).union(sources.keys)
            for key in valueless where snapshot[key] == nil {
                let update = Update(value: nil, source: sources[key] ?? .user, revision: revision, streamed: streamed)
                Self.apply(update, to: key, in: &state, changed: &changed)
            }
            Self.complete(through: revision, &state)
            state.phase = .loaded
            return (changed, state.onChange)
        }
        firstAttempt.open()
        if !changed.isEmpty { handler?(domain, changed, firstLoad, streamed ? revision : nil) }
    }

    /// One key's change as it reaches the cache.
    private struct Update {
        var value: Value?
        var source: ValueSource
        var revision: Int64
        /// From the watch stream, in its order (else: an acknowledgement or a `List`).
        var streamed: Bool
    }

    /// Applies `update` to `key` unless something newer is cached: a streamed change is older
    /// only than an own write acknowledged at a later revision (or, for a key the cache knows
    /// nothing of, than what the stream already delivered); anything else is older unless
    /// the stream has not reached its revision yet.
    private static func apply(_ update: Update, to key: String, in state: inout State, changed: inout Changes) {
        let revision = update.revision
        if !update.streamed, revision <= state.complete { return }
        if let last = state.revisions[key] ?? state.removals[key] {
            guard revision >= last else { return }
        } else {
            guard revision >= state.complete else { return }
        }
        let value = update.value
        if value != nil {
            state.revisions[key] = revision
            state.removals[key] = nil
        } else {
            state.revisions[key] = nil
            state.removals[key] = revision > state.complete ? revision : nil
        }
        // A change with no value may lock the key (`locked`, a lock without a value): kept too.
        let kept = update.source != .user && (value != nil || update.source == .locked)
        state.sources[key] = kept ? update.source : nil
        guard state.values[key] != value else { return }
        state.values[key] = value
        changed[key] = .some(value)
    }

    /// Every change up to `revision` is in the cache: forgets the removals it covers.
    private static func complete(through revision: Int64, _ state: inout State) {
        guard revision > state.complete else { return }
        state.complete = revision
        if !state.removals.isEmpty { state.removals = state.removals.filter { $0.value > revision } }
    }
}
