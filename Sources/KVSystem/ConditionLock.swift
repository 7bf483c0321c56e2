import Glibc

/// A lock with a condition threads wait on, with a timeout on the monotonic clock (a change of
/// the wall clock neither cuts nor stretches a wait).
///
/// The corresponding C calls are `pthread_mutex_lock`, `pthread_cond_timedwait` and
/// `pthread_cond_broadcast`.
public final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    public func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Wakes every thread waiting; called holding the lock.
    public func broadcast() {
        pthread_cond_broadcast(condition)
    }

    /// Releases the lock until ``broadcast()`` or `deadline` (from ``deadline(after:)``), then
    /// takes it again; returns false if the deadline passed. Called holding the lock; may wake
    /// early (check what you wait for again).
    public func wait(until deadline: Deadline) -> Bool {
        var time = deadline.time
        return pthread_cond_timedwait(condition, mutex, &time) != ETIMEDOUT
    }

    /// A moment on the monotonic clock.
    public struct Deadline: Sendable {
        fileprivate var time: timespec

        /// `seconds` from now.
        public init(after seconds: Double) {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nanoseconds = Int(now.tv_nsec) + Int(max(seconds, 0).truncatingRemainder(dividingBy: 1) * 1e9)
            now.tv_sec += Int(max(seconds, 0)) + nanoseconds / 1_000_000_000
            now.tv_nsec = nanoseconds % 1_000_000_000
            time = now
        }
    }
}
