import Glibc
import Synchronization

/// A one-way gate threads can wait at, with a timeout: closed until ``open()``.
/// Also an interruptible sleep: ``wait(seconds:)`` returns early once opened.
///
/// The corresponding C calls are `pthread_cond_timedwait` and `pthread_cond_broadcast`.
final class Gate: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var isOpen = false
    /// ``isOpen`` for readers that must not take the mutex (every cached read asks).
    private let openFlag = Atomic<Bool>(false)

    init() {
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

    func open() {
        pthread_mutex_lock(mutex)
        isOpen = true
        openFlag.store(true, ordering: .releasing)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Whether ``open()`` was called; lock-free.
    var opened: Bool { openFlag.load(ordering: .acquiring) }

    /// Waits until open or `seconds` pass; returns whether it is open.
    @discardableResult
    func wait(seconds: Double) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int(seconds.truncatingRemainder(dividingBy: 1) * 1e9)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !isOpen {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        return isOpen
    }
}
