import Glibc

/// Runs `body` on a new detached thread of its own, for work that blocks for long (waiting for a
/// child process), which must not hold one of Dispatch's few pool threads.
///
/// The corresponding C calls are `pthread_create` and `pthread_detach`.
public func detachThread(_ body: @escaping @Sendable () -> Void) {
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
    if result == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Box>.fromOpaque(context).release()
    }
}
