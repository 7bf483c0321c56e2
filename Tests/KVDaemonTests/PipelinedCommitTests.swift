import Foundation
import Glibc
import KVStorage
import KVSystem
import Synchronization
import Testing

@testable import KVDaemon

/// The group commit's pipeline: writes that arrive together are synced on the store's commit queue
/// while the event loop goes on, so a read is answered during the writers' sync, and still never
/// sees a write before it is durable.
@Suite struct PipelinedCommitTests {
    /// The real disk, but `fdatasync` waits while the gate is shut (at most ``longestWait``, so
    /// that a loop blocked in the sync fails the test instead of hanging it).
    final class GatedDisk: FileSystem {
        private let real = LinuxSystem()
        private let gate = Mutex(Gate())
        static let longestWait: Duration = .seconds(2)

        struct Gate {
            var shut = false
            /// A sync is waiting at the gate now.
            var waiting = false
        }

        func shut() { gate.withLock { $0.shut = true } }
        func open() { gate.withLock { $0.shut = false } }
        var isWaiting: Bool { gate.withLock { $0.waiting } }

        func fdatasync(_ descriptor: FileDescriptor) throws(SystemError) {
            let deadline = ContinuousClock.now + Self.longestWait
            while gate.withLock({ gate in
                gate.waiting = gate.shut
                return gate.shut
            }), ContinuousClock.now < deadline {
                real.sleep(microseconds: 1_000)
            }
            gate.withLock { $0.waiting = false }
            try real.fdatasync(descriptor)
        }

        func open(_ path: String, _ options: OpenOptions, permissions: UInt32) throws(SystemError) -> FileDescriptor {
            try real.open(path, options, permissions: permissions)
        }
        func close(_ descriptor: FileDescriptor) { real.close(descriptor) }
        func read(_ descriptor: FileDescriptor, upTo count: Int) throws(SystemError) -> [UInt8] {
            try real.read(descriptor, upTo: count)
        }
        func write(_ descriptor: FileDescriptor, _ bytes: [UInt8]) throws(SystemError) {
            try real.write(descriptor, bytes)
        }
        func write(_ descriptor: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(SystemError) {
            try real.write(descriptor, bytes, at: offset)
        }
        func availableBytes(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 {
            try real.availableBytes(descriptor)
        }
        func preallocate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
            try real.preallocate(descriptor, to: length)
        }
        func fsync(_ descriptor: FileDescriptor) throws(SystemError) { try real.fsync(descriptor) }
        func truncate(_ descriptor: FileDescriptor, to length: Int64) throws(SystemError) {
            try real.truncate(descriptor, to: length)
        }
        func size(_ descriptor: FileDescriptor) throws(SystemError) -> Int64 { try real.size(descriptor) }
        func status(_ descriptor: FileDescriptor) throws(SystemError) -> FileStatus { try real.status(descriptor) }
        var effectiveUserID: UInt32 { real.effectiveUserID }
        func lockExclusively(_ descriptor: FileDescriptor) throws(SystemError) {
            try real.lockExclusively(descriptor)
        }
        func rename(_ source: String, to destination: String) throws(SystemError) {
            try real.rename(source, to: destination)
        }
        func unlink(_ path: String) throws(SystemError) { try real.unlink(path) }
        func makeDirectory(_ path: String, permissions: UInt32) throws(SystemError) {
            try real.makeDirectory(path, permissions: permissions)
        }
        func contentsOfDirectory(_ path: String) throws(SystemError) -> [String] {
            try real.contentsOfDirectory(path)
        }
        func sleep(microseconds: UInt32) { real.sleep(microseconds: microseconds) }
        func releaseFreedMemory() { real.releaseFreedMemory() }
    }

    static func set(_ value: String) -> String {
        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":"\#(value)"}}"#
    }

    /// Two writers in one pass: their batch waits in its sync on the commit queue while the loop
    /// answers another client's Get — with the value from before the batch, which is not durable
    /// yet — and the writers are answered once the sync returns. (Were the batch committed on the
    /// loop's thread, the loop would sit in the sync and the Get would wait for it.)
    @Test func aReadIsAnsweredDuringTheWritersSyncAndSeesOnlyWhatIsDurable() throws {
        let disk = GatedDisk()
        let loop = try EventLoopTests.Loop(disk: disk)
        let (first, second, reader) = (loop.connect(), loop.connect(), loop.connect())
        first.send(Self.set("before"))
        loop.run("the first Set was not answered") { first.replies.count == 1 }

        disk.shut()
        first.send(Self.set("one"))
        second.send(Self.set("two"))
        loop.run("the two writers' batch did not reach its sync on the commit queue") { disk.isWaiting }
        reader.send(EventLoopTests.get)
        loop.run("the Get waited for the writers' sync") { reader.replies.count == 1 }
        #expect(disk.isWaiting, "the sync was over before the Get was answered")
        #expect(reader.replies.first?.contains(#""before""#) == true, "\(reader.replies)")
        #expect(first.replies.count == 1 && second.replies.isEmpty, "a write was acknowledged before its sync")

        disk.open()
        loop.run("the writers were not answered after their sync") {
            first.replies.count == 2 && second.replies.count == 1
        }
        reader.send(EventLoopTests.get)
        loop.run("the second Get was not answered") { reader.replies.count == 2 }
        let last = reader.replies.last ?? ""
        #expect(last.contains(#""one""#) || last.contains(#""two""#), "\(reader.replies)")
    }
}
