import Glibc
import KVStorage
import KVSystem
import Synchronization

/// A fault to inject into one call of a ``SimulatedFileSystem``.
struct InjectedFault: Sendable {
    var code: Int32
    /// Whether the failed call still took effect: a `write` wrote half its bytes, a sync made
    /// the data durable, a `rename` or `unlink` happened. Otherwise it did nothing (a failed
    /// sync leaves the data in the page cache, where a later sync may still write it).
    var tookEffect: Bool
}

/// A ``FileSystem`` in memory that models what a crash keeps: file data is durable only after
/// `fsync`/`fdatasync` of the file, folder entries (create, rename, unlink, mkdir) only after
/// `fsync` of the folder opened with `.directory`. It records every operation that changes the
/// disk (the crash points) and can fail any call with an errno. It has no symbolic links, so
/// ``OpenOptions/noFollow`` changes nothing here.
final class SimulatedFileSystem: FileSystem {
    struct Handle {
        var inode: Int
        var offset = 0
        var append: Bool
        var name: String
    }

    struct State {
        var model: DiskModel
        var operations: [DiskOperation] = []
        /// A readable line per operation, like `write kvd.wal 87 bytes at 120`.
        var labels: [String] = []
        var handles: [Int32: Handle] = [:]
        var nextDescriptor: Int32 = 3
        var nextInode: Int
        var locks: [Int: Int32] = [:]
        /// Calls that can fail, so far (open, write, fsync, fdatasync, truncate, rename, unlink, mkdir).
        var calls: [String] = []
        var inject: @Sendable (_ index: Int, _ operation: String, _ name: String) -> InjectedFault? = { _, _, _ in nil }
        /// The number of disk operations recorded before each injected fault.
        var faults: [Int] = []
        /// Owners and permissions set by ``setStatus(of:owner:permissions:)``, by inode; any
        /// other file or folder belongs to ``effectiveUserID`` with mode 0700 (folders) or 0600.
        var statuses: [Int: (owner: UInt32, permissions: UInt32)] = [:]
    }

    /// The user the simulated process runs as, who owns every file and folder unless a test
    /// says otherwise.
    let effectiveUserID: UInt32 = 1000

    let state: Mutex<State>
    /// The disk the simulation started from.
    let initial: Disk

    init(_ disk: Disk = .with(folders: ["/data"])) {
        initial = disk
        let highest = max(disk.folders.keys.max() ?? 1, disk.files.keys.max() ?? 1)
        state = Mutex(State(model: DiskModel(disk), nextInode: highest + 1))
    }

    /// Fails the calls `rule` picks (given the call's index among failable calls, its name and
    /// the file name). `rule` runs under the file system's lock and must not call it.
    func inject(_ rule: @escaping @Sendable (_ index: Int, _ operation: String, _ name: String) -> InjectedFault?) {
        state.withLock { $0.inject = rule }
    }

    /// Runs before every call that may change the disk, outside the lock: a scheduler's gate
    /// (``FoldScheduler``) that holds the calling thread until it may go on.
    let beforeCall = Mutex<(@Sendable () -> Void)?>(nil)

    private func pause() {
        if let gate = beforeCall.withLock({ $0 }) { gate() }
    }

    var operations: [DiskOperation] { state.withLock { $0.operations } }
    var operationCount: Int { state.withLock { $0.operations.count } }
    var labels: [String] { state.withLock { $0.labels } }
    var calls: [String] { state.withLock { $0.calls } }
    var model: DiskModel { state.withLock { $0.model } }
    /// The number of disk operations recorded before each injected fault.
    var faults: [Int] { state.withLock { $0.faults } }

    // MARK: FileSystem

    func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError) -> FileDescriptor {
        if options.contains(.write) { pause() }
        return try state.withLock { state throws(SystemError) in
            let (folder, name) = try Self.parent(of: path, in: state.model.current, operation: "open")
            let effect = Self.check(&state, "open", path)
            if let effect, !effect.tookEffect {
                throw SystemError("open", path: path, code: effect.code)
            }
            var inode = name == "." ? folder : state.model.current.folders[folder]?[name]
            if options.contains(.directory) {
                guard let found = inode else { throw SystemError("open", path: path, code: ENOENT) }
                guard state.model.current.folders[found] != nil else {
                    throw SystemError("open", path: path, code: ENOTDIR)
                }
            } else if let found = inode {
                if state.model.current.folders[found] != nil, options.contains(.write) {
                    throw SystemError("open", path: path, code: EISDIR)
                }
                if options.contains(.create), options.contains(.exclusive) {
                    throw SystemError("open", path: path, code: EEXIST)
                }
                if options.contains(.truncate), state.model.current.files[found]?.isEmpty == false {
                    Self.record(&state, .truncate(found, length: 0), "truncate \(name) to 0 (open)")
                }
            } else {
                guard options.contains(.create) else {
                    throw SystemError("open", path: path, code: ENOENT)
                }
                let created = state.nextInode
                state.nextInode += 1
                Self.record(
                    &state, .entries(folder: folder, .link(name, created), newFolder: nil, newFile: created),
                    "create \(name)")
                inode = created
            }
            if let effect { throw SystemError("open", path: path, code: effect.code) }
            let descriptor = state.nextDescriptor
            state.nextDescriptor += 1
            state.handles[descriptor] = Handle(inode: inode!, append: options.contains(.append), name: name)
            return FileDescriptor(rawValue: descriptor)
        }
    }

    func close(_ descriptor: FileDescriptor) {
        state.withLock { state in
            guard let handle = state.handles.removeValue(forKey: descriptor.rawValue) else { return }
            if state.locks[handle.inode] == descriptor.rawValue { state.locks[handle.inode] = nil }
        }
    }

    func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8] {
        try state.withLock { state throws(SystemError) in
            guard var handle = state.handles[descriptor.rawValue] else {
                throw SystemError("read", path: nil, code: EBADF)
            }
            guard let content = state.model.current.files[handle.inode] else {
                throw SystemError("read", path: handle.name, code: EISDIR)
            }
            let end = min(content.count, handle.offset + count)
            let chunk = handle.offset < end ? Array(content[handle.offset..<end]) : []
            handle.offset += chunk.count
            state.handles[descriptor.rawValue] = handle
            return chunk
        }
    }

    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError) {
        try write(descriptor, bytes, at: nil)
    }

    func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError) {
        try write(descriptor, bytes, at: Int(offset))
    }

    /// `write` at the descriptor's offset (or end, when appending), `pwrite` at `position`.
    private func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at position: Int?) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            guard var handle = state.handles[descriptor.rawValue] else {
                throw SystemError("write", path: nil, code: EBADF)
            }
            guard let content = state.model.current.files[handle.inode] else {
                throw SystemError("write", path: handle.name, code: EISDIR)
            }
            let effect = Self.check(&state, "write", handle.name)
            let keepOffset = handle.offset
            if handle.append { handle.offset = content.count }
            if let position { handle.offset = position }
            let written = effect.map { $0.tookEffect ? Array(bytes.prefix(bytes.count / 2)) : [] } ?? bytes
            if !written.isEmpty {
                Self.record(
                    &state, .write(handle.inode, offset: handle.offset, written),
                    "write \(handle.name) \(written.count) bytes at \(handle.offset)")
                handle.offset += written.count
            }
            if position != nil { handle.offset = keepOffset }  // pwrite leaves the offset alone
            state.handles[descriptor.rawValue] = handle
            if let effect { throw SystemError("write", path: handle.name, code: effect.code) }
        }
    }

    func fsync(_ descriptor: FileDescriptor) throws(SystemError) { try sync(descriptor, "fsync") }

    func fdatasync(_ descriptor: FileDescriptor) throws(SystemError) { try sync(descriptor, "fdatasync") }

    private func sync(_ descriptor: FileDescriptor, _ operation: String) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError(operation, path: nil, code: EBADF)
            }
            let effect = Self.check(&state, operation, handle.name)
            if effect?.tookEffect ?? true { Self.record(&state, .sync(handle.inode), "\(operation) \(handle.name)") }
            if let effect { throw SystemError(operation, path: handle.name, code: effect.code) }
        }
    }

    func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError("ftruncate", path: nil, code: EBADF)
            }
            if let effect = Self.check(&state, "truncate", handle.name) {
                throw SystemError("ftruncate", path: handle.name, code: effect.code)
            }
            Self.record(&state, .truncate(handle.inode, length: Int(length)), "truncate \(handle.name) to \(length)")
        }
    }

    /// Unlimited room. Not a failable call (it changes nothing), so it shifts no injected
    /// fault's index.
    func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 { .max }

    /// Extends the file with zeros, like `ftruncate` (durable only once synced); a fault leaves
    /// the file unchanged.
    func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError("fallocate", path: nil, code: EBADF)
            }
            if let effect = Self.check(&state, "preallocate", handle.name) {
                throw SystemError("fallocate", path: handle.name, code: effect.code)
            }
            guard (state.model.current.files[handle.inode]?.count ?? 0) < length else { return }
            Self.record(&state, .truncate(handle.inode, length: Int(length)), "preallocate \(handle.name) to \(length)")
        }
    }

    func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError("fstat", path: nil, code: EBADF)
            }
            return Int64(state.model.current.files[handle.inode]?.count ?? 0)
        }
    }

    /// A folder or a regular file (the simulated disk has nothing else), with the owner and
    /// permissions ``setStatus(of:owner:permissions:)`` gave it.
    func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus {
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError("fstat", path: nil, code: EBADF)
            }
            let content = state.model.current.files[handle.inode]
            let set = state.statuses[handle.inode] ?? (effectiveUserID, content == nil ? 0o700 : 0o600)
            return FileStatus(
                kind: content == nil ? .directory : .regular, size: Int64(content?.count ?? 0), owner: set.owner,
                permissions: set.permissions)
        }
    }

    /// Gives the file or folder at `path` (which must exist) another owner or permissions.
    func setStatus(of path: String, owner: UInt32, permissions: UInt32) {
        state.withLock { state in
            guard let inode = state.model.current.inode(at: path) else {
                preconditionFailure("no \(path) on the simulated disk")
            }
            state.statuses[inode] = (owner, permissions)
        }
    }

    func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError) {
        try state.withLock { state throws(SystemError) in
            guard let handle = state.handles[descriptor.rawValue] else {
                throw SystemError("flock", path: nil, code: EBADF)
            }
            if let holder = state.locks[handle.inode], holder != descriptor.rawValue {
                throw SystemError("flock", path: handle.name, code: EWOULDBLOCK)
            }
            state.locks[handle.inode] = descriptor.rawValue
        }
    }

    func rename(_ source: String, to destination: String) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            let (folder, from) = try Self.parent(of: source, in: state.model.current, operation: "rename")
            let (target, to) = try Self.parent(of: destination, in: state.model.current, operation: "rename")
            guard folder == target else { throw SystemError("rename", path: source, code: EXDEV) }
            guard let inode = state.model.current.folders[folder]?[from] else {
                throw SystemError("rename", path: source, code: ENOENT)
            }
            let effect = Self.check(&state, "rename", to)
            if effect?.tookEffect ?? true {
                Self.record(
                    &state, .entries(folder: folder, .rename(from, to, inode), newFolder: nil, newFile: nil),
                    "rename \(from) to \(to)")
            }
            if let effect { throw SystemError("rename", path: source, code: effect.code) }
        }
    }

    func unlink(_ path: String) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            let (folder, name) = try Self.parent(of: path, in: state.model.current, operation: "unlink")
            guard let inode = state.model.current.folders[folder]?[name] else {
                throw SystemError("unlink", path: path, code: ENOENT)
            }
            guard state.model.current.folders[inode] == nil else {
                throw SystemError("unlink", path: path, code: EISDIR)
            }
            let effect = Self.check(&state, "unlink", name)
            if effect?.tookEffect ?? true {
                Self.record(
                    &state, .entries(folder: folder, .remove(name), newFolder: nil, newFile: nil), "unlink \(name)")
            }
            if let effect { throw SystemError("unlink", path: path, code: effect.code) }
        }
    }

    func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError) {
        pause()
        try state.withLock { state throws(SystemError) in
            let (folder, name) = try Self.parent(of: path, in: state.model.current, operation: "mkdir")
            guard state.model.current.folders[folder]?[name] == nil else {
                throw SystemError("mkdir", path: path, code: EEXIST)
            }
            if let effect = Self.check(&state, "mkdir", name) {
                throw SystemError("mkdir", path: path, code: effect.code)
            }
            let created = state.nextInode
            state.nextInode += 1
            Self.record(
                &state, .entries(folder: folder, .link(name, created), newFolder: created, newFile: nil),
                "mkdir \(name)")
        }
    }

    func contentsOfDirectory(_ path: String) throws(SystemError) -> [String] {
        try state.withLock { state throws(SystemError) in
            guard let folder = state.model.current.inode(at: path) else {
                throw SystemError("opendir", path: path, code: ENOENT)
            }
            guard let entries = state.model.current.folders[folder] else {
                throw SystemError("opendir", path: path, code: ENOTDIR)
            }
            return Array(entries.keys)
        }
    }

    /// Really sleeps: a lock held on the simulated disk is held by another handle of this process.
    func sleep(microseconds: UInt32) { usleep(microseconds) }
    /// Nothing to give back: the simulated disk is no allocator.
    func releaseFreedMemory() {}

    // MARK: Helpers

    private static func parent(of path: String, in disk: Disk, operation: String) throws(SystemError) -> (
        Int, String
    ) {
        var parts = path.split(separator: "/").map(String.init)
        guard let name = parts.popLast() else { return (Disk.root, ".") }
        guard let folder = disk.inode(at: parts.joined(separator: "/")) else {
            throw SystemError(operation, path: path, code: ENOENT)
        }
        guard disk.folders[folder] != nil else {
            throw SystemError(operation, path: path, code: ENOTDIR)
        }
        return (folder, name)
    }

    /// Counts a failable call and returns the fault to inject, if any.
    private static func check(_ state: inout State, _ operation: String, _ path: String) -> InjectedFault? {
        let name = String(path.split(separator: "/").last ?? "")
        let index = state.calls.count
        state.calls.append("\(operation) \(name)")
        let fault = state.inject(index, operation, name)
        if fault != nil { state.faults.append(state.operations.count) }
        return fault
    }

    private static func record(_ state: inout State, _ operation: DiskOperation, _ label: String) {
        state.model.apply(operation)
        state.operations.append(operation)
        state.labels.append(label)
    }
}
