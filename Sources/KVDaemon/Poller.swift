import CLinux
import Glibc
import KVSystem

/// The event loop's readiness source: an epoll instance, an eventfd to wake it from other
/// threads, and a signalfd for SIGTERM/SIGINT; every call through the loop's ``SystemCalls``.
///
/// Only the loop thread calls ``wait(timeoutMilliseconds:)``, ``watch(_:readable:writable:adding:)``
/// and ``forget(_:)``; ``wake()`` may be called from any thread.
final class Poller: @unchecked Sendable {
    struct Event {
        var fd: Int32
        var readable: Bool
        var writable: Bool
        var hangup: Bool
    }

    /// The signals kvd handles; they must be blocked in every thread (see
    /// ``blockTerminationSignals(_:)``) and arrive through ``signalFD``. SIGTERM and SIGINT stop
    /// kvd; SIGHUP makes the system instance read its drop-in files again and stops a user's
    /// kvd.
    static let terminationSignals = [SIGTERM, SIGINT, SIGHUP]

    private let system: any SystemCalls
    private let epollFD: Int32
    /// Written by ``wake()``; readable means "look at the completion queue".
    let wakeFD: Int32
    /// Readable when SIGTERM, SIGINT or SIGHUP arrived.
    let signalFD: Int32
    @exclusivity(unchecked) private var events = [epoll_event](repeating: epoll_event(), count: 256)

    init(system: any SystemCalls) throws(SystemError) {
        self.system = system
        epollFD = try system.retrying("epoll_create1") { () throws(Errno) in try system.epollCreate() }
        wakeFD = try system.retrying("eventfd") { () throws(Errno) in try system.eventCounter() }
        signalFD = try system.retrying("signalfd") { () throws(Errno) in
            try system.signalDescriptor(for: Self.terminationSignals)
        }
        try watch(wakeFD, readable: true, writable: false, adding: true)
        try watch(signalFD, readable: true, writable: false, adding: true)
    }

    deinit {
        system.close(signalFD)
        system.close(wakeFD)
        system.close(epollFD)
    }

    /// Blocks SIGTERM and SIGINT in the calling thread and in threads it starts later, so they
    /// arrive only through ``signalFD``, and ignores SIGPIPE. Call first thing in `main`, before
    /// any thread starts.
    static func blockTerminationSignals(_ system: any SystemCalls) {
        system.blockSignals(terminationSignals)
        system.ignoreSignal(SIGPIPE)
    }

    /// Registers `fd` or changes its interest (level-triggered).
    func watch(_ fd: Int32, readable: Bool, writable: Bool, adding: Bool = false) throws(SystemError) {
        // EPOLLRDHUP only with EPOLLIN: a half-closed peer would otherwise keep the level-triggered
        // loop spinning while its last call waits for a commit. EPOLLHUP/EPOLLERR always come.
        var mask: UInt32 = 0
        if readable { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if writable { mask |= EPOLLOUT.rawValue }
        let operation = adding ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        try system.retrying("epoll_ctl") { () throws(Errno) in
            try system.epollControl(epollFD, operation, fd, events: mask)
        }
    }

    /// Removes `fd` before it is closed.
    func forget(_ fd: Int32) {
        _ = try? system.epollControl(epollFD, EPOLL_CTL_DEL, fd, events: 0)
    }

    /// Waits for readiness up to `timeoutMilliseconds` (-1: forever). Blocks. A wait
    /// interrupted by a signal returns no events.
    func wait(timeoutMilliseconds: Int32) throws(SystemError) -> [Event] {
        let outcome = events.withUnsafeMutableBufferPointer { buffer in
            Result { () throws(Errno) in
                try system.epollWait(epollFD, into: buffer, timeoutMilliseconds: timeoutMilliseconds)
            }
        }
        let count: Int
        switch outcome {
        case .success(let found): count = found
        case .failure(.interrupted): return []
        case .failure(let error): throw SystemError("epoll_wait", error)
        }
        return (0..<count).map { index in
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
        _ = try? withUnsafeBytes(of: &one) { bytes throws(Errno) in try system.write(wakeFD, bytes) }
    }

    /// Clears the wake counter (loop thread).
    func drainWake() {
        var counter: UInt64 = 0
        _ = try? withUnsafeMutableBytes(of: &counter) { buffer throws(Errno) in try system.read(wakeFD, into: buffer) }
    }

    /// Reads a pending signal; returns SIGTERM, SIGINT or SIGHUP if one arrived (loop thread).
    func takeTerminationSignal() -> Int32? {
        var info = signalfd_siginfo()
        let size = MemoryLayout<signalfd_siginfo>.size
        let count = try? withUnsafeMutableBytes(of: &info) { buffer throws(Errno) in
            try system.read(signalFD, into: buffer)
        }
        guard count == size else { return nil }
        return Int32(info.ssi_signo)
    }
}
