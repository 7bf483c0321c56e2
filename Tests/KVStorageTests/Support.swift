import FoundationEssentials
import Glibc
import KVStorage
import KVSystem
import KVValues
import Synchronization

/// A fresh, uniquely named state folder under /tmp, removed (with its files) by ``remove()``.
struct TemporaryFolder {
    let path: String

    init() {
        var template = Array("/tmp/kvstorage-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    /// The state folder inside, not yet created (the store creates it).
    var state: String { path + "/state" }

    func file(_ name: String) -> String { state + "/" + name }

    func names() -> [String] {
        ((try? LinuxSystem().contentsOfDirectory(state)) ?? []).sorted()
    }

    func read(_ name: String) -> String? {
        guard let fd = try? LinuxSystem().open(file(name), [], permissions: 0) else { return nil }
        defer { LinuxSystem().close(fd) }
        var bytes: [UInt8] = []
        while let chunk = try? LinuxSystem().read(fd, upTo: 65536), !chunk.isEmpty { bytes += chunk }
        return String(decoding: bytes, as: UTF8.self)
    }

    func write(_ name: String, _ text: String) {
        _ = try? LinuxSystem().makeDirectory(state, permissions: 0o700)
        let fd = try! LinuxSystem().open(file(name), [.write, .create, .truncate], permissions: 0o600)
        try! LinuxSystem().write(fd, Array(text.utf8))
        LinuxSystem().close(fd)
    }

    func remove() {
        for folder in [state, path] {
            for name in (try? LinuxSystem().contentsOfDirectory(folder)) ?? [] {
                try? LinuxSystem().unlink(folder + "/" + name)
            }
            rmdir(folder)
        }
    }
}

/// A ``FileSystem`` over the real one that records every call, counts syncs and bytes written
/// per file name, and fails the calls `failure` picks with the errno it returns.
final class RecordingFileSystem: FileSystem {
    struct Counts: Sendable {
        var calls: [String] = []
        var paths: [Int32: String] = [:]
        var syncs = 0
        var bytesWritten: [String: Int] = [:]
        /// For each ``releaseFreedMemory()``, how many calls ``calls`` held then (not a call
        /// of its own there: it comes from the fold queue, at no fixed place among them).
        var releases: [Int] = []
    }

    let base = LinuxSystem()
    let counts = Mutex(Counts())
    /// Given an operation name and a file name, the errno to fail with, or nil.
    let failure = Mutex<@Sendable (String, String) -> Int32?>({ _, _ in nil })

    func fail(_ rule: @escaping @Sendable (String, String) -> Int32?) { failure.withLock { $0 = rule } }
    /// What ``availableBytes(_:)`` answers instead of the real file system's, if set.
    let available = Mutex<Int64?>(nil)

    /// Fails only the `index`-th checked call (counting from 0) with `EIO`.
    func failCall(_ index: Int) {
        let seen = Mutex(0)
        fail { _, _ in
            seen.withLock { count in
                defer { count += 1 }
                return count == index ? EIO : nil
            }
        }
    }

    var callCount: Int { counts.withLock { $0.calls.count } }

    /// Every checked call so far, like `preallocate kvd.wal`.
    var calls: [String] { counts.withLock { $0.calls } }

    var syncs: Int { counts.withLock { $0.syncs } }

    func bytesWritten(toFilesContaining part: String) -> Int {
        counts.withLock { $0.bytesWritten.filter { $0.key.contains(part) }.values.reduce(0, +) }
    }

    func resetCounts() {
        counts.withLock {
            $0.syncs = 0
            $0.bytesWritten = [:]
            $0.calls = []
            $0.releases = []
        }
    }

    private func name(_ fd: FileDescriptor) -> String { counts.withLock { $0.paths[fd.rawValue] ?? "?" } }

    private func check(_ operation: String, _ path: String) throws(SystemError) {
        let file = String(path.split(separator: "/").last ?? "")
        counts.withLock { $0.calls.append("\(operation) \(file)") }
        if let code = failure.withLock({ $0 })(operation, file) {
            throw SystemError(operation, path: path, code: code)
        }
    }

    func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError) -> FileDescriptor {
        try check("open", path)
        let fd = try base.open(path, options, permissions: permissions)
        counts.withLock { $0.paths[fd.rawValue] = path }
        return fd
    }

    func close(_ descriptor: FileDescriptor) { base.close(descriptor) }

    func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8] {
        try base.read(descriptor, upTo: count)
    }

    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError) {
        let path = name(descriptor)
        try check("write", path)
        counts.withLock { $0.bytesWritten[String(path.split(separator: "/").last ?? ""), default: 0] += bytes.count }
        try base.write(descriptor, bytes)
    }

    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError) {
        let path = name(descriptor)
        try check("write", path)
        counts.withLock { $0.bytesWritten[String(path.split(separator: "/").last ?? ""), default: 0] += bytes.count }
        try base.write(descriptor, bytes, at: offset)
    }

    func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
        if let available = available.withLock({ $0 }) { return available }
        return try base.availableBytes(descriptor)
    }

    func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        try check("preallocate", name(descriptor))
        try base.preallocate(descriptor, to: length)
    }

    func fsync(_ descriptor: FileDescriptor) throws(SystemError) {
        try check("fsync", name(descriptor))
        counts.withLock { $0.syncs += 1 }
        try base.fsync(descriptor)
    }

    func fdatasync(_ descriptor: FileDescriptor) throws(SystemError) {
        try check("fdatasync", name(descriptor))
        counts.withLock { $0.syncs += 1 }
        try base.fdatasync(descriptor)
    }

    func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        try check("truncate", name(descriptor))
        try base.truncate(descriptor, to: length)
    }

    func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 { try base.size(descriptor) }

    func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus { try base.status(descriptor) }

    var effectiveUserID: UInt32 { base.effectiveUserID }

    func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError) { try base.lockExclusively(descriptor) }

    func rename(_ source: String, to destination: String) throws(SystemError) {
        try check("rename", destination)
        try base.rename(source, to: destination)
    }

    func unlink(_ path: String) throws(SystemError) {
        try check("unlink", path)
        try base.unlink(path)
    }

    func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError) {
        try base.makeDirectory(path, permissions: permissions)
    }

    func contentsOfDirectory(_ path: String) throws(SystemError) -> [String] { try base.contentsOfDirectory(path) }
    func sleep(microseconds: UInt32) { base.sleep(microseconds: microseconds) }
    func releaseFreedMemory() {
        counts.withLock { $0.releases.append($0.calls.count) }
        base.releaseFreedMemory()
    }

    /// For each ``releaseFreedMemory()`` so far, how many calls ``calls`` held then.
    var releases: [Int] { counts.withLock { $0.releases } }
}

/// Collects what a store logs.
final class LogCollector: Sendable {
    let lines = Mutex<[(LogLevel, String)]>([])

    var callback: @Sendable (LogLevel, String) -> Void {
        { level, text in self.lines.withLock { $0.append((level, text)) } }
    }

    func messages(at level: LogLevel) -> [String] { lines.withLock { $0.filter { $0.0 == level }.map(\.1) } }
}

func domain(_ name: String) -> Domain { try! Domain(validating: name) }
func key(_ name: String) -> Key { try! Key(validating: name) }

/// Polls `condition` for up to `seconds`; whether it became true.
func waitUntil(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    for _ in 0..<Int(seconds * 1000) {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// Every disk a crash could leave, before each of `fileSystem`'s recorded operations and after
/// the last, in every way its unsynced data could reach the disk: `body` gets the number of
/// operations done before the crash, the last one's label, and the disk as a new simulated file
/// system. Returns how many disks it gave.
@discardableResult
func forEachCrashState(
    of fileSystem: SimulatedFileSystem, _ body: (_ point: Int, _ label: String, _ disk: SimulatedFileSystem) -> Void
) -> Int {
    var model = DiskModel(fileSystem.initial)
    var states = 0
    for point in 0...fileSystem.operations.count {
        if point > 0 { model.apply(fileSystem.operations[point - 1]) }
        for disk in model.crashStates() {
            states += 1
            body(point, point > 0 ? fileSystem.labels[point - 1] : "nothing", SimulatedFileSystem(disk))
        }
    }
    return states
}
