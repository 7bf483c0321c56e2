import KVSystem
import Synchronization

/// A one-way gate threads can wait at, with a timeout: closed until ``open()``.
/// Also an interruptible sleep: ``wait(seconds:)`` returns early once opened.
///
/// Waits on a ``KVSystem/ConditionLock`` (the monotonic clock).
final class Gate: @unchecked Sendable {
    private let lock = ConditionLock()
    private var isOpen = false
    /// ``isOpen`` for readers that must not take the lock (every cached read asks).
    private let openFlag = Atomic<Bool>(false)

    func open() {
        lock.withLock {
            isOpen = true
            openFlag.store(true, ordering: .releasing)
            lock.broadcast()
        }
    }

    /// Whether ``open()`` was called; lock-free.
    var opened: Bool { openFlag.load(ordering: .acquiring) }

    /// Waits until open or `seconds` pass; returns whether it is open.
    @discardableResult
    func wait(seconds: Double) -> Bool {
        let deadline = ConditionLock.Deadline(after: seconds)
        return lock.withLock {
            while !isOpen {
                if !lock.wait(until: deadline) { break }
            }
            return isOpen
        }
    }
}
