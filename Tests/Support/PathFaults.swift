import Glibc
import KVSystem
import Synchronization

/// ``FaultInjectingSystem``'s faults by path and process: paths that fail (by how they end), paths
/// whose open waits as on a file system that does not answer, the pretended peers' `/proc`
/// folders (absent) and processes (exited), and the path each directory descriptor stands for, so that a name opened in it
/// (`openat`) is matched as its whole path. Thread-safe.
final class PathFaults: Sendable {
    private struct State {
        /// Paths, by how they end, whose open and link read fail, and how (``fail(endingWith:with:)``).
        var faults: [(suffix: String, errno: Errno)] = []
        /// Paths, by how they end, whose open waits until ``release()`` (``hold(endingWith:)``).
        var held: [String] = []
        /// How many opens wait so.
        var waiting = 0
        /// The pids of every peer pretended: no such process is there to read.
        var pretendedPIDs: Set<Int32> = []
        /// Whether every pidfd's process reads as exited (its pid then may name another).
        var peersExited = false
        /// The path each directory descriptor of `openDirectory` names, until it is closed.
        var directories: [Int32: String] = [:]
    }

    private let state = Mutex(State())

    func fail(endingWith suffix: String, with errno: Errno) {
        state.withLock { $0.faults.append((suffix, errno)) }
    }

    func hold(endingWith suffix: String) {
        state.withLock { $0.held.append(suffix) }
    }

    func release() {
        state.withLock { $0.held = [] }
    }

    var heldOpens: Int { state.withLock { $0.waiting } }

    var peersExited: Bool { state.withLock { $0.peersExited } }

    func pretendExited() {
        state.withLock { $0.peersExited = true }
    }

    func pretend(pids: [Int32]) {
        state.withLock { $0.pretendedPIDs.formUnion(pids) }
    }

    /// The directory descriptor `fd` stands for `path` (until ``closed(_:)``).
    func opened(_ fd: Int32, _ path: String) {
        state.withLock { $0.directories[fd] = path }
    }

    func closed(_ fd: Int32) {
        state.withLock { _ = $0.directories.removeValue(forKey: fd) }
    }

    /// The path `name` of `directory` stands for: the directory's own as it was opened
    /// (``opened(_:_:)``), then `name`; `name` itself when `directory` is nil.
    func path(_ name: String, in directory: Int32?) -> String {
        directory.map { fd in state.withLock { $0.directories[fd] ?? "?" } + "/" + name } ?? name
    }

    /// Waits while `path` is held (``hold(endingWith:)``).
    func waitIfHeld(_ path: String) {
        func isHeld() -> Bool { state.withLock { state in state.held.contains { path.hasSuffix($0) } } }
        guard isHeld() else { return }
        state.withLock { $0.waiting += 1 }
        while isHeld() { usleep(1000) }
        state.withLock { $0.waiting -= 1 }
    }

    /// Throws the fault planned for `path` (``fail(endingWith:with:)``), else `ENOENT` for a path
    /// under `/proc/PID/` of a pretended peer's pid.
    func failIfPlanned(_ path: String) throws(Errno) {
        if let fault = state.withLock({ $0.faults.first { path.hasSuffix($0.suffix) } }) { throw fault.errno }
        guard path.hasPrefix("/proc/") else { return }
        let pid = path.utf8.dropFirst(6).prefix { $0 != UInt8(ascii: "/") }
        guard let pid = Int32(String(decoding: pid, as: UTF8.self)) else { return }
        if state.withLock({ $0.pretendedPIDs.contains(pid) }) { throw .noSuchFileOrDirectory }
    }
}
