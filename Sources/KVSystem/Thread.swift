import Glibc

/// A thread of its own that ``startThread(_:)`` started: waited for once with ``join()``, or let
/// go with ``detach()``. Exactly one of the two is called, once.
public struct StartedThread: Sendable {
    let handle: pthread_t

    /// Waits until the thread's body has returned. C: `pthread_join`.
    public func join() {
        pthread_join(handle, nil)
    }

    /// Lets the thread run on; its resources are released when its body returns.
    /// C: `pthread_detach`.
    public func detach() {
        pthread_detach(handle)
    }
}

/// Runs `body` on a new thread of its own (not one of Dispatch's few pool threads), for work
/// that blocks for long or must not wait for the pool; throws the reason when the system cannot
/// start a thread (`EAGAIN`: out of threads).
///
/// The corresponding C call is `pthread_create`.
public func startThread(_ body: @escaping @Sendable () -> Void) throws(Errno) -> StartedThread {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, context)
    guard result == 0 else {
        Unmanaged<Box>.fromOpaque(context).release()
        throw Errno(rawValue: result)
    }
    return StartedThread(handle: thread)
}

/// Runs `body` on a new detached thread of its own, for work that blocks for long (waiting for a
/// child process), which must not hold one of Dispatch's few pool threads. When no thread can
/// be started, `body` does not run.
///
/// The corresponding C calls are `pthread_create` and `pthread_detach`.
public func detachThread(_ body: @escaping @Sendable () -> Void) {
    (try? startThread(body))?.detach()
}
