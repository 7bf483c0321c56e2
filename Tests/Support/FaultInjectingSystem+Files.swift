import KVSystem

/// The file calls of ``FaultInjectingSystem``: the real ones (``LinuxSystem``), no faults (the
/// storage tests have their own simulated disk for those).
extension FaultInjectingSystem {
    public func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError)
        -> FileDescriptor
    {
        try real.open(path, options, permissions: permissions)
    }
    public func close(_ descriptor: FileDescriptor) { real.close(descriptor) }
    public func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8] {
        try real.read(descriptor, upTo: count)
    }
    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError) {
        try real.write(descriptor, bytes)
    }
    public func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError) {
        try real.write(descriptor, bytes, at: offset)
    }
    public func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        try real.preallocate(descriptor, to: length)
    }
    public func fsync(_ descriptor: FileDescriptor) throws(SystemError) { try real.fsync(descriptor) }
    public func fdatasync(_ descriptor: FileDescriptor) throws(SystemError) { try real.fdatasync(descriptor) }
    public func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
        try real.availableBytes(descriptor)
    }
    public func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
        try real.truncate(descriptor, to: length)
    }
    public func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 { try real.size(descriptor) }
    public func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus { try real.status(descriptor) }
    public var effectiveUserID: UInt32 { real.effectiveUserID }
    public func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError) {
        try real.lockExclusively(descriptor)
    }
    public func rename(_ source: String, to destination: String) throws(SystemError) {
        try real.rename(source, to: destination)
    }
    public func unlink(_ path: String) throws(SystemError) { try real.unlink(path) }
    public func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError) {
        try real.makeDirectory(path, permissions: permissions)
    }
    public func contentsOfDirectory(_ path: String) throws(SystemError) -> [String] {
        try real.contentsOfDirectory(path)
    }
    public func sleep(microseconds: UInt32) { real.sleep(microseconds: microseconds) }
    public func releaseFreedMemory() { real.releaseFreedMemory() }
}
