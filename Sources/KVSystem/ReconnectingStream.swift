import Dispatch
import Synchronization

/// Keeps a stream going that the other side may drop: a client's watch of kvd (KVClient's
/// domain cache, `kvctl watch`), a user's kvd following the system instance's `Mirror`, the
/// fleet's watch of etcd. The one reconnect loop of kvd's programs: attempts, the backoff
/// between them, stopping, and what is worth reporting of an outage.
///
/// ``run(_:onRetry:)`` makes one attempt after another on the calling thread until an attempt
/// is ``Outcome/finished`` or ``stop()`` is called. An attempt calls ``working()`` once the
/// stream works (its first event arrived, the snapshot is whole, etcd answered): the backoff
/// starts again at ``Backoff/initial`` and an outage, if there was one, is over. After an
/// attempt that ended (``Outcome/ended(_:)``) or failed (``Outcome/failed(_:)``), `onRetry`
/// hears what happened (an ``Interruption``) and how long the wait is, then the run waits that
/// long (or less: ``stop()`` and ``wake()`` end the wait at once), and the backoff doubles up to
/// ``Backoff/maximum``.
///
/// ```swift
/// let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(50), maximum: .seconds(1)))
/// stream.run({ () -> ReconnectingStream.Outcome in
///     do { try follow(); return .ended("it closed the connection") } catch { return .failed("\(error)") }
/// }, onRetry: { interruption, wait in log("\(interruption.reason); retrying in \(wait)") })
/// ```
///
/// Thread-safe: ``stop()``, ``wake()`` and ``interrupting(with:)`` may be called from any
/// thread; ``run(_:onRetry:)`` from one thread at a time. The wait is a Dispatch semaphore's:
/// no system call of its own.
public final class ReconnectingStream: Sendable {
    /// The wait between attempts: `initial`, doubling up to `maximum`.
    public struct Backoff: Sendable, Equatable {
        /// The first wait, and the wait after an attempt in which the stream worked.
        public var initial: Duration
        /// The longest wait: doubling stops there.
        public var maximum: Duration

        public init(initial: Duration, maximum: Duration) {
            self.initial = initial
            self.maximum = maximum
        }
    }

    /// How one attempt ended.
    public enum Outcome: Sendable, Equatable {
        /// Done for good (the stream completed, or the caller gives up): ``run(_:onRetry:)``
        /// returns.
        case finished
        /// Try again at once, without waiting and without reporting (the attempt's work is
        /// done and the next one starts, as a fleet listing hands over to its watch).
        case again
        /// The other side closed the stream, for this reason: expected (a restart), not a
        /// failure, so it begins no outage. Waits the backoff, then tries again.
        case ended(String)
        /// The attempt failed, for this reason. Waits the backoff, then tries again.
        case failed(String)
    }

    /// What ``run(_:onRetry:)`` reports of an attempt that ended or failed.
    public enum Interruption: Sendable, Equatable {
        /// The stream worked during the attempt (``working()``), then ended or failed; or it
        /// ended (``Outcome/ended(_:)``) before it worked. No outage begins: the next attempt may
        /// well work (the other side restarting).
        case lost(String)
        /// The first failure since the stream last worked, or since the start: an outage begins.
        case outage(String)
        /// Another failure of the same outage; `changed` when its reason is not the last one's.
        case stillOut(String, changed: Bool)

        /// Why the attempt ended.
        public var reason: String {
            switch self {
            case .lost(let reason), .outage(let reason), .stillOut(let reason, _): reason
            }
        }
    }

    /// Where the stream stands between the attempts and ``working()``.
    private enum Link: Equatable {
        /// No outage, and the attempt in progress has not seen the stream work (yet).
        case quiet
        /// The attempt in progress has seen the stream work.
        case working
        /// Attempts have failed since the stream last worked; the last failure's reason.
        case out(String)
    }

    private struct State {
        var stopped = false
        var delay: Duration
        var link = Link.quiet
        /// Ends the attempt in progress (closes its connection) when ``stop()`` is called.
        var interrupt: (@Sendable () -> Void)?
    }

    private let backoff: Backoff
    private let state: Mutex<State>
    private let wakeup = DispatchSemaphore(value: 0)
    private let customWait: (@Sendable (Duration) -> Void)?

    /// `wait` replaces the wait between attempts (tests); by default it ends early on
    /// ``stop()`` and ``wake()``.
    public init(backoff: Backoff, wait: (@Sendable (Duration) -> Void)? = nil) {
        self.backoff = backoff
        self.state = Mutex(State(delay: backoff.initial))
        self.customWait = wait
    }

    /// Whether ``stop()`` was called.
    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// Asks the run to return: the wait in progress ends at once, the attempt in progress is
    /// interrupted (``interrupting(with:)``), and no attempt starts after it. Any thread.
    public func stop() {
        let interrupt = state.withLock { state in
            state.stopped = true
            defer { state.interrupt = nil }
            return state.interrupt
        }
        interrupt?()
        wakeup.signal()
    }

    /// Ends the wait in progress (or the next one) early. Any thread.
    public func wake() {
        wakeup.signal()
    }

    /// The attempt in progress: the stream works. The backoff starts again at its initial
    /// wait, and the outage, if there was one, is over.
    public func working() {
        state.withLock { state in
            state.link = .working
            state.delay = backoff.initial
        }
    }

    /// The attempt in progress: `interrupt` ends it (closes its connection) if ``stop()`` is
    /// called before the attempt ends. Returns false, without keeping `interrupt`, when the
    /// stream is stopped already: the attempt should end at once.
    public func interrupting(with interrupt: @escaping @Sendable () -> Void) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.interrupt = interrupt
            return true
        }
    }

    /// Makes attempts until one is ``Outcome/finished``, an attempt throws (rethrown), or
    /// ``stop()``; `onRetry` hears of each attempt that ended or failed, with the wait before the
    /// next, unless the stream was stopped meanwhile.
    public func run<Failure: Error>(
        _ attempt: () throws(Failure) -> Outcome, onRetry: (Interruption, _ retryingIn: Duration) -> Void
    ) throws(Failure) {
        while !isStopped {
            state.withLock { state in if state.link == .working { state.link = .quiet } }
            let outcome: Outcome
            do { outcome = try attempt() } catch {
                state.withLock { $0.interrupt = nil }
                throw error
            }
            state.withLock { $0.interrupt = nil }
            guard !isStopped else { return }
            let retry: (Interruption, Duration)
            switch outcome {
            case .finished: return
            case .again: continue
            case .ended(let reason): retry = note(reason, failed: false)
            case .failed(let reason): retry = note(reason, failed: true)
            }
            onRetry(retry.0, retry.1)
            wait(retry.1)
        }
    }

    /// Classifies the attempt that just ended, and doubles the backoff; returns what to report
    /// and the wait before the next attempt.
    private func note(_ reason: String, failed: Bool) -> (Interruption, Duration) {
        state.withLock { state in
            let wait = state.delay
            state.delay = min(state.delay * 2, backoff.maximum)
            switch state.link {
            case .working:
                state.link = .quiet
                return (.lost(reason), wait)
            case _ where !failed:
                return (.lost(reason), wait)
            case .quiet:
                state.link = .out(reason)
                return (.outage(reason), wait)
            case .out(let last):
                state.link = .out(reason)
                return (.stillOut(reason, changed: last != reason), wait)
            }
        }
    }

    private func wait(_ duration: Duration) {
        if let customWait { return customWait(duration) }
        let (seconds, attoseconds) = duration.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        _ = wakeup.wait(timeout: .now() + .nanoseconds(nanoseconds))
    }
}
