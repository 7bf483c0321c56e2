import CLinux
import Glibc
import KVSystem
import Synchronization

/// A ``SystemCalls`` for tests: makes the real calls (``LinuxSystem``) except where a test has
/// planned a fault — a call fails with an ``Errno`` or moves fewer bytes — and counts every call.
/// It can also stand in for a listening socket whose connections are socket pairs
/// (``makeListener()``, ``connectPair()``), and run out of descriptors the way a process at its
/// `RLIMIT_NOFILE` does (``limitDescriptors(free:)``). Thread-safe.
///
/// ```swift
/// let system = FaultInjectingSystem()
/// system.inject(.fail(.interrupted), on: .read)         // the next read fails with EINTR
/// system.inject(.short(7), on: .send, times: .max)     // every send moves at most 7 bytes
/// ```
public final class FaultInjectingSystem: SystemCalls {
    /// The calls faults can be planned for.
    public enum Call: Hashable, Sendable { case read, write, send, accept, epollWait, epollControl, connect }

    /// What a planned fault does to one call.
    public enum Fault: Sendable, Equatable {
        /// The call fails with this errno, without doing anything.
        case fail(Errno)
        /// The call moves at most this many bytes (a short read or write).
        case short(Int)
    }

    private struct Planned: Hashable {
        var call: Call
        var fd: Int32?
    }

    private struct State {
        var faults: [Planned: [(fault: Fault, times: Int)]] = [:]
        var counts: [Call: Int] = [:]
        /// Descriptors that may still be opened; `nil`: no limit.
        var freeDescriptors: Int?
        /// The stand-in listener (an eventfd counting queued connections) and its queue.
        var listener: Int32 = -1
        var queued: [Int32] = []
        /// Who the peers of accepted connections are, in accept order (then the real answer).
        var peers: [PeerCredentials] = []
        /// Group names and ids that replace the real group database (empty: the real one).
        var groups: [String: UInt32] = [:]
        /// What to do just before the next call of a kind on a descriptor (``beforeNext(_:on:run:)``).
        var actions: [Planned: [@Sendable () -> Void]] = [:]
    }

    let real = LinuxSystem()
    private let state = Mutex(State())
    /// What paths fail or wait, and which path each directory descriptor stands for.
    private let paths = PathFaults()

    public init() {}

    deinit {
        state.withLock { state in
            for fd in state.queued { real.close(fd) }
            if state.listener >= 0 { real.close(state.listener) }
        }
    }

    // MARK: planning

    /// Plans `fault` for the next `times` calls of `call` (on `fd` only, if given; a fault for a
    /// descriptor comes before one for any). Faults planned for the same call come in order.
    public func inject(_ fault: Fault, on call: Call, fd: Int32? = nil, times: Int = 1) {
        state.withLock { $0.faults[Planned(call: call, fd: fd), default: []].append((fault, times)) }
    }

    /// Runs `action` just before the next `call` on `fd` (a read, write or send) is made, on the
    /// thread making it: a test steps in at an exact point of the code under test (another
    /// thread's work landing between two of its steps).
    public func beforeNext(_ call: Call, on fd: Int32, run action: @escaping @Sendable () -> Void) {
        state.withLock { $0.actions[Planned(call: call, fd: fd), default: []].append(action) }
    }

    /// From now on, opening a path that ends with `suffix`, or reading it as a link, fails with
    /// `errno` (`/root/.flatpak-info` with `EACCES`: a process that made itself not dumpable).
    public func failPaths(endingWith suffix: String, with errno: Errno) { paths.fail(endingWith: suffix, with: errno) }

    /// Opens of paths ending with `suffix` (of ``openDirectory(_:in:)`` and
    /// ``openRegularFile(_:in:)``) wait until ``releaseHeldPaths()``: a file system that does not
    /// answer (FUSE's daemon, a network server).
    public func holdPaths(endingWith suffix: String) { paths.hold(endingWith: suffix) }

    /// Lets every held open go on, and holds none from now on.
    public func releaseHeldPaths() { paths.release() }
    /// How many opens wait now (``holdPaths(endingWith:)``).
    public var heldOpens: Int { paths.heldOpens }

    /// Removes every planned fault.
    public func clearFaults() {
        state.withLock { $0.faults = [:] }
    }

    /// How many times `call` was made.
    public func count(_ call: Call) -> Int {
        state.withLock { $0.counts[call, default: 0] }
    }

    /// From now on, only `free` more descriptors may be opened (by `accept`, `open`, `socket`,
    /// `pipe2`, a pidfd) until some are closed, as in a process at its descriptor limit; `nil`
    /// lifts the limit. Past it, those calls fail with `EMFILE`.
    public func limitDescriptors(free: Int?) {
        state.withLock { $0.freeDescriptors = free }
    }

    /// The planned fault for this call, if any (and counts the call).
    private func fault(_ call: Call, _ fd: Int32?) -> Fault? {
        state.withLock { state in
            state.counts[call, default: 0] += 1
            for key in [Planned(call: call, fd: fd), Planned(call: call, fd: nil)] {
                guard var list = state.faults[key], !list.isEmpty else { continue }
                let fault = list[0].fault
                list[0].times -= 1
                if list[0].times <= 0 { list.removeFirst() }
                state.faults[key] = list
                return fault
            }
            return nil
        }
    }

    /// Takes one descriptor from the limit; `EMFILE` when none is left.
    private func takeDescriptor() throws(Errno) {
        try state.withLock { (state: inout State) throws(Errno) in
            guard let free = state.freeDescriptors else { return }
            guard free > 0 else { throw .tooManyOpenFiles }
            state.freeDescriptors = free - 1
        }
    }

    /// Runs a byte-moving call with the planned fault applied.
    private func transfer(_ call: Call, _ fd: Int32, count: Int, _ body: (Int) throws(Errno) -> Int) throws(Errno)
        -> Int
    {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            let key = Planned(call: call, fd: fd)
            guard var list = state.actions[key], !list.isEmpty else { return nil }
            let first = list.removeFirst()
            state.actions[key] = list.isEmpty ? nil : list
            return first
        }
        action?()
        switch fault(call, fd) {
        case .fail(let errno)?: throw errno
        case .short(let most)?: return try body(min(count, most))
        case nil: return try body(count)
        }
    }

    // MARK: a listener whose connections are socket pairs

    /// A stand-in listening descriptor: readable while connections made by ``connectPair()``
    /// wait, and ``accept(_:)`` on it hands out their daemon ends.
    public func makeListener() -> Int32 {
        let fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE))
        precondition(fd >= 0, "eventfd failed")
        state.withLock { $0.listener = fd }
        return fd
    }

    /// Queues a new connection on the listener; returns the client's end (blocking) and the end
    /// the daemon will accept (non-blocking).
    public func connectPair() -> (client: Int32, daemon: Int32) {
        var fds: [Int32] = [0, 0]
        precondition(
            socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &fds) == 0, "socketpair failed")
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        state.withLock { state in
            state.queued.append(fds[1])
            var one: UInt64 = 1
            _ = Glibc.write(state.listener, &one, 8)
        }
        return (fds[0], fds[1])
    }

    // MARK: SystemCalls

    public func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try transfer(.read, fd, count: buffer.count) { (count) throws(Errno) in
            try real.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    public func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try transfer(.write, fd, count: bytes.count) { (count) throws(Errno) in
            try real.write(fd, UnsafeRawBufferPointer(rebasing: bytes[..<count]))
        }
    }

    public func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try transfer(.send, fd, count: bytes.count) { (count) throws(Errno) in
            try real.send(fd, UnsafeRawBufferPointer(rebasing: bytes[..<count]))
        }
    }

    public func close(_ fd: Int32) {
        state.withLock { state in state.freeDescriptors = state.freeDescriptors.map { $0 + 1 } }
        paths.closed(fd)
        real.close(fd)
    }

    public func openReadOnly(_ path: String) throws(Errno) -> Int32 {
        try paths.failIfPlanned(path)
        try takeDescriptor()
        return try real.openReadOnly(path)
    }

    public func fileIdentity(_ name: String, in directory: Int32?) throws(Errno) -> FileIdentity {
        try paths.failIfPlanned(paths.path(name, in: directory))
        return try real.fileIdentity(name, in: directory)
    }

    public func openDirectory(_ path: String, in directory: Int32?) throws(Errno) -> Int32 {
        let full = paths.path(path, in: directory)
        paths.waitIfHeld(full)
        try paths.failIfPlanned(full)
        try takeDescriptor()
        let fd = try real.openDirectory(path, in: directory)
        paths.opened(fd, full)
        return fd
    }

    public func openRegularFile(_ name: String, in directory: Int32) throws(Errno) -> Int32? {
        paths.waitIfHeld(paths.path(name, in: directory))
        try paths.failIfPlanned(paths.path(name, in: directory))
        try takeDescriptor()
        return try real.openRegularFile(name, in: directory)
    }

    public func statusFlags(_ fd: Int32) throws(Errno) -> Int32 { try real.statusFlags(fd) }
    public func setStatusFlags(_ fd: Int32, _ flags: Int32) throws(Errno) { try real.setStatusFlags(fd, flags) }
    public func openDescriptors() -> [Int32] { real.openDescriptors() }

    public func socket(nonBlocking: Bool) throws(Errno) -> Int32 {
        try takeDescriptor()
        return try real.socket(nonBlocking: nonBlocking)
    }

    public func bind(_ fd: Int32, to address: UnixSocketAddress) throws(Errno) { try real.bind(fd, to: address) }
    public func listen(_ fd: Int32, backlog: Int32) throws(Errno) { try real.listen(fd, backlog: backlog) }

    public func connect(_ fd: Int32, to address: UnixSocketAddress) throws(Errno) {
        if case .fail(let errno)? = fault(.connect, fd) { throw errno }
        try real.connect(fd, to: address)
    }

    public func accept(_ listener: Int32) throws(Errno) -> Int32 {
        if case .fail(let errno)? = fault(.accept, listener) { throw errno }
        let standIn = state.withLock { $0.listener }
        guard listener == standIn else {
            try takeDescriptor()
            return try real.accept(listener)
        }
        var counter: UInt64 = 0
        guard Glibc.read(listener, &counter, 8) == 8 else { throw .wouldBlock }
        do {
            try takeDescriptor()
        } catch {
            _ = Glibc.write(listener, &counter, 8)  // still queued
            throw error
        }
        return state.withLock { $0.queued.removeFirst() }
    }

    public func shutdown(_ fd: Int32) throws(Errno) { try real.shutdown(fd) }
    public func epollCreate() throws(Errno) -> Int32 { try real.epollCreate() }

    /// A fault planned for `.epollControl` is matched by the descriptor watched, not the epoll one.
    public func epollControl(_ epoll: Int32, _ operation: Int32, _ fd: Int32, events: UInt32) throws(Errno) {
        if case .fail(let errno)? = fault(.epollControl, fd) { throw errno }
        try real.epollControl(epoll, operation, fd, events: events)
    }

    public func epollWait(
        _ epoll: Int32, into events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32
    ) throws(Errno) -> Int {
        if case .fail(let errno)? = fault(.epollWait, epoll) { throw errno }
        return try real.epollWait(epoll, into: events, timeoutMilliseconds: timeoutMilliseconds)
    }

    public func eventCounter() throws(Errno) -> Int32 { try real.eventCounter() }
    public func signalDescriptor(for signals: [Int32]) throws(Errno) -> Int32 {
        try real.signalDescriptor(for: signals)
    }
    public func inotifyInit() throws(Errno) -> Int32 { try real.inotifyInit() }
    public func inotifyAddWatch(_ fd: Int32, _ path: String, mask: UInt32) throws(Errno) -> Int32 {
        try real.inotifyAddWatch(fd, path, mask: mask)
    }
    public func blockSignals(_ signals: [Int32]) { real.blockSignals(signals) }
    public func ignoreSignal(_ signal: Int32) { real.ignoreSignal(signal) }
    public func status(_ path: String, followingLinks: Bool) throws(Errno) -> FileStatus {
        try real.status(path, followingLinks: followingLinks)
    }
    public func resolvedPath(_ path: String) throws(Errno) -> String { try real.resolvedPath(path) }
    public func linkTarget(_ path: String) throws(Errno) -> String? {
        try paths.failIfPlanned(path)
        return try real.linkTarget(path)
    }
    public func hasAccessControlList(_ path: String) -> Bool { real.hasAccessControlList(path) }
    public func changeOwner(_ descriptor: FileDescriptor, owner: UInt32, group: UInt32) throws(Errno) {
        try real.changeOwner(descriptor, owner: owner, group: group)
    }
    public func changePermissions(_ descriptor: FileDescriptor, _ permissions: UInt32) throws(Errno) {
        try real.changePermissions(descriptor, permissions)
    }
    public func setCreationMask(_ mask: UInt32) -> UInt32 { real.setCreationMask(mask) }
    /// A pipe takes two descriptors from the limit (``limitDescriptors(free:)``).
    public func makePipe() throws(Errno) -> (read: Int32, write: Int32) {
        try takeDescriptor()
        do { try takeDescriptor() } catch {
            state.withLock { state in state.freeDescriptors = state.freeDescriptors.map { $0 + 1 } }
            throw error
        }
        return try real.makePipe()
    }
    public func executablePath() -> String? { real.executablePath() }
    public func checkExecutable(_ path: String) throws(Errno) { try real.checkExecutable(path) }

    public func spawn(_ path: String, arguments: [String], environment: [String: String], standardError: Int32?)
        throws(Errno) -> pid_t
    {
        try real.spawn(path, arguments: arguments, environment: environment, standardError: standardError)
    }

    public func spawn(_ path: String, arguments: [String], input: Int32, output: Int32, error: Int32) throws(Errno)
        -> pid_t
    {
        try real.spawn(path, arguments: arguments, input: input, output: output, error: error)
    }

    public func waitForExit(_ process: pid_t, blocking: Bool) throws(Errno) -> Int32? {
        try real.waitForExit(process, blocking: blocking)
    }
    public func homeDirectory(ofUser uid: UInt32) -> String? { real.homeDirectory(ofUser: uid) }
    public func userName(ofUser uid: UInt32) -> String? { real.userName(ofUser: uid) }
    public func groups(ofUser uid: UInt32) -> Set<UInt32> { real.groups(ofUser: uid) }
    public func localTime(_ seconds: Int64) -> LocalTime { real.localTime(seconds) }
    public func isTerminal(_ fd: Int32) -> Bool { real.isTerminal(fd) }
    public var userID: UInt32 { real.userID }
    public var processID: Int32 { real.processID }
    public func processorSeconds() -> (user: Double, system: Double) { real.processorSeconds() }
    public func openLibrary(_ name: String) throws(LibraryError) -> SharedLibrary { try real.openLibrary(name) }
    public func symbol(_ name: String, in library: SharedLibrary) -> UnsafeMutableRawPointer? {
        real.symbol(name, in: library)
    }
    public func peerProcessDescriptor(_ fd: Int32) throws(Errno) -> Int32 {
        try takeDescriptor()
        return try real.peerProcessDescriptor(fd)
    }
    public func processDescriptor(_ pid: Int32) throws(Errno) -> Int32 {
        try takeDescriptor()
        return try real.processDescriptor(pid)
    }
    public func processIsRunning(_ pidfd: Int32) -> Bool { !paths.peersExited && real.processIsRunning(pidfd) }
    public func processCgroupID(_ pidfd: Int32) throws(Errno) -> UInt64? {
        if paths.peersExited { throw .noSuchProcess }
        return try real.processCgroupID(pidfd)
    }

    /// As the real one reads them, but each through this system's own call (and its faults).
    public func peerProcessFacts(pid: Int32, pidfd: Int32) -> PeerProcessFacts? {
        guard let program = (try? linkTarget("/proc/\(pid)/exe")).flatMap({ $0 }),
            let root = try? fileIdentity("/proc/\(pid)/root", in: nil),
            case .success(let id) = Result(catching: { () throws(Errno) in try processCgroupID(pidfd) })
        else { return nil }
        return PeerProcessFacts(program: program, root: root, cgroupID: id)
    }

    /// From now on every peer's process reads as exited once looked at (``processIsRunning(_:)``):
    /// the case of a pid that another process took meanwhile.
    public func pretendPeersExited() { paths.pretendExited() }

    public func peerCredentials(_ fd: Int32) throws(Errno) -> PeerCredentials {
        if let peer = state.withLock({ $0.peers.isEmpty ? nil : $0.peers.removeFirst() }) { return peer }
        return try real.peerCredentials(fd)
    }

    public func userID(named name: String) -> UInt32? { real.userID(named: name) }
    public func groupID(named name: String) -> UInt32? {
        let groups = state.withLock { $0.groups }
        return groups.isEmpty ? real.groupID(named: name) : groups[name]
    }

    /// The next connections' peers are these users, in order (a socket pair's peer is always
    /// this process): so the system instance's decisions can be tested for any uid. Their pids
    /// name no process kvd may look at: `/proc/PID` reads as absent (``PathFaults/failIfPlanned(_:)``), as
    /// another user's does for the system instance (`ProtectProc=invisible`), whatever process
    /// has that pid on the test's machine.
    public func pretendPeers(_ peers: [PeerCredentials], groups: [String: UInt32] = [:]) {
        state.withLock {
            $0.peers += peers
            $0.groups = groups
        }
        paths.pretend(pids: peers.map(\.pid))
    }
}
