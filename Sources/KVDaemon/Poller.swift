import CLinux
import Glibc

/// The event loop's readiness source: an epoll instance, an eventfd to wake it from other
/// threads, and a signalfd for SIGTERM/SIGINT.
///
/// Only the loop thread calls ``wait(timeoutMilliseconds:)``, ``watch(_:readable:writable:)``
/// and ``forget(_:)``; ``wake()`` may be called from any thread.
final class Poller: @unchecked Sendable {
    struct Event {
        var fd: Int32
        var readable: Bool
        var writable: Bool
        var hangup: Bool
    }

    private let epollFD: Int32
    /// Written by ``wake()``; readable means "look at the completion queue".
    let wakeFD: Int32
    /// Readable when SIGTERM or SIGINT arrived; those signals must be blocked in every thread.
    let signalFD: Int32
    private var events = [epoll_event](repeating: epoll_event(), count: 256)

    init() throws(SystemError) {
        epollFD = try Sys.retrying("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        wakeFD = try Sys.retrying("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        signalFD = try Sys.retrying("signalfd") { signalfd(-1, &mask, Int32(SFD_NONBLOCK | SFD_CLOEXEC)) }
        try watch(wakeFD, readable: true, writable: false, adding: true)
        try watch(signalFD, readable: true, writable: false, adding: true)
    }

    deinit {
        Sys.close(signalFD)
        Sys.close(wakeFD)
        Sys.close(epollFD)
    }

    /// Blocks SIGTERM and SIGINT in the calling thread and in threads it starts later, so they
    /// arrive only through ``signalFD``. Call first thing in `main`, before any thread starts.
    static func blockTerminationSignals() {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        pthread_sigmask(SIG_BLOCK, &mask, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Registers `fd` or changes its interest (level-triggered).
    func watch(_ fd: Int32, readable: Bool, writable: Bool, adding: Bool = false) throws(SystemError) {
        var event = epoll_event()
        // EPOLLRDHUP only with EPOLLIN: a half-closed peer would otherwise keep the level-triggered
        // loop spinning while its last call waits for a commit. EPOLLHUP/EPOLLERR always come.
        var mask: UInt32 = 0
        if readable { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if writable { mask |= EPOLLOUT.rawValue }
        event.events = mask
        event.data.fd = fd
        try Sys.retrying("epoll_ctl") { epoll_ctl(epollFD, adding ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event) }
    }

    /// Removes `fd` before it is closed.
    func forget(_ fd: Int32) {
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
    }

    /// Waits for readiness up to `timeoutMilliseconds` (-1: forever). Blocks.
    func wait(timeoutMilliseconds: Int32) throws(SystemError) -> [Event] {
        let count = events.withUnsafeMutableBufferPointer { buffer in
            epoll_wait(epollFD, buffer.baseAddress, Int32(buffer.count), timeoutMilliseconds)
        }
        if count < 0 {
            if errno == EINTR { return [] }
            throw SystemError("epoll_wait")
        }
        return (0..<Int(count)).map { index in
            let event = events[index]
            let mask = event.events
            return Event(
                fd: event.data.fd,
                readable: mask & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0,
                writable: mask & EPOLLOUT.rawValue != 0,
                hangup: mask & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0)
        }
    }

    /// Wakes the loop. Thread-safe and non-blocking.
    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Clears the wake counter (loop thread).
    func drainWake() {
        var counter: UInt64 = 0
        _ = Glibc.read(wakeFD, &counter, 8)
    }

    /// Reads pending signals; returns whether SIGTERM or SIGINT arrived (loop thread).
    func takeTerminationSignal() -> Int32? {
        var info = signalfd_siginfo()
        let size = MemoryLayout<signalfd_siginfo>.size
        guard Glibc.read(signalFD, &info, size) == size else { return nil }
        return Int32(info.ssi_signo)
    }
}
