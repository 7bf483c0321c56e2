import KVSystem

/// A suite's serial queue of async writes (``KVDefaults/setAsync(_:for:unread:)``,
/// ``KVDefaults/writeAsync(_:forKey:)-(Value?,_)``): each job runs on the queue's own thread,
/// never on Swift's cooperative pool, one at a time, in the order submitted. The thread is
/// started when a job comes and ends when none is left, so an idle suite holds no thread.
///
/// A blocking write of the suite calls ``waitForEarlier()`` first: it waits until every job
/// submitted before it has finished, so an async write followed by a blocking one lands first
/// whichever thread each runs on. A blocking write made on the queue's thread (a change handler
/// a job's write calls, which runs on the writing thread) does not wait: it is part of that job.
///
/// Blocking: ``submit(_:)`` never blocks; ``waitForEarlier()`` blocks while earlier jobs run. If
/// no thread can be started, the jobs run on the submitting thread instead (slower, still in
/// order). Thread-safe.
final class WriteQueue: @unchecked Sendable {
    /// Whether this thread is running a job of a queue, and which queue.
    @TaskLocal static var running: ObjectIdentifier?

    private let lock = ConditionLock()
    /// Guarded by `lock`, as the counters below.
    private var jobs: [@Sendable () -> Void] = []
    /// Jobs ever submitted, and ever finished: a job is done when `finished` passes its number.
    private var submitted: UInt64 = 0
    private var finished: UInt64 = 0
    /// Whether a thread is draining `jobs`.
    private var draining = false

    /// Whether the calling thread runs one of this queue's jobs.
    var isCurrent: Bool { Self.running == ObjectIdentifier(self) }

    /// Queues `job` after the jobs submitted before; starts the thread if none runs.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let start = lock.withLock { () -> Bool in
            jobs.append(job)
            submitted += 1
            guard !draining else { return false }
            draining = true
            return true
        }
        guard start else { return }
        do { try startThread { self.drain() }.detach() } catch { drain() }
    }

    /// Blocks until every job submitted before the call has finished; at once on the queue's
    /// own thread.
    func waitForEarlier() {
        guard !isCurrent else { return }
        lock.withLock {
            let target = submitted
            while finished < target { _ = lock.wait(until: ConditionLock.Deadline(after: 60)) }
        }
    }

    /// Runs `body` on the queue's thread after the jobs submitted before it; returns what it
    /// returned or threw. The caller's task is suspended meanwhile, holding no thread.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws(KVDefaultsError) -> T) async throws(KVDefaultsError)
        -> T
    {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<T, KVDefaultsError>, Never>) in
            submit {
                do throws(KVDefaultsError) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// The thread's loop: runs the jobs in order until none is left.
    private func drain() {
        while true {
            let next = lock.withLock { () -> (@Sendable () -> Void)? in
                guard !jobs.isEmpty else {
                    draining = false
                    return nil
                }
                return jobs.removeFirst()
            }
            guard let next else { return }
            Self.$running.withValue(ObjectIdentifier(self)) { next() }
            lock.withLock {
                finished += 1
                lock.broadcast()
            }
        }
    }
}
