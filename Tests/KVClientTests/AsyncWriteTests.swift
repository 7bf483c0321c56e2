import Glibc
import KVValues
import Synchronization
import Testing

@testable import KVClient

extension KVDefaults.Keys {
    fileprivate static let asyncVolume = Key<Int>("volume", default: 5)
}

/// An app's actor that saves a setting without blocking its executor.
private actor Editor {
    let defaults: KVDefaults
    init(_ defaults: KVDefaults) { self.defaults = defaults }

    /// An async write, what it reads back, then a blocking write.
    func saveTwice() async throws(KVDefaultsError) -> Int {
        try await defaults.setAsync(7, for: .asyncVolume)
        let readBack = defaults[.asyncVolume]
        try defaults.set(8, for: .asyncVolume)
        return readBack
    }
}

/// Async writes (`setAsync`, `writeAsync`): run on the suite's own write thread, in order with
/// the suite's blocking writes.
@Suite struct AsyncWriteTests {
    @Test func anAsyncWriteFromAnActorLandsAndIsReadBack() async throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.async")
        #expect(try await Editor(defaults).saveTwice() == 7)
        #expect(defaults[.asyncVolume] == 8, "the blocking write after the async one did not win")
        #expect(try daemon.connection().get(domain("com.example.async"), key("volume")).value == .integer(8))
        try await defaults.writeAsync("dark", forKey: "theme")
        #expect(defaults.string(forKey: "theme") == "dark")
        try await defaults.writeAsync(Any?.none, forKey: "theme")
        #expect(defaults.string(forKey: "theme") == nil)
    }

    @Test func anAsyncWriteThatFailsThrowsItsError() async throws {
        let defaults = try #require(KVDefaults(suiteName: "com.example.async", configuration: .inMemory()))
        defaults.set("huge", forKey: "volume")
        await #expect(throws: KVDefaultsError.self) { try await defaults.setAsync(7, for: .asyncVolume) }
        #expect(defaults.string(forKey: "volume") == "huge")
        await #expect(throws: KVDefaultsError.self) { try await defaults.writeAsync(Editor(defaults), forKey: "x") }
    }

    /// A blocking write waits for the async writes called before it, whatever thread each is on.
    @Test func aBlockingWriteLandsAfterTheAsyncWritesCalledBeforeIt() throws {
        let defaults = try #require(KVDefaults(suiteName: "com.example.async", configuration: .inMemory()))
        let done = Gate()
        defaults.writeQueue.submit {
            usleep(100_000)
            try? defaults.write(.integer(1), forKey: "order")
            done.open()
        }
        try defaults.write(.integer(2), forKey: "order")
        #expect(done.wait(seconds: 5))
        #expect(defaults.integer(forKey: "order") == 2, "the blocking write landed before the async one")
    }

    /// The observers of an async write run on the write thread, and one that writes there (a
    /// blocking write inside the async one) does not wait for itself.
    @Test func handlersOfAnAsyncWriteRunOnTheWriteThreadAndMayWrite() async throws {
        let defaults = try #require(KVDefaults(suiteName: "com.example.async", configuration: .inMemory()))
        let onWriteThread = Mutex<Bool?>(nil)
        let observation = defaults.observe("source") { _ in
            onWriteThread.withLock { $0 = defaults.writeQueue.isCurrent }
            defaults.set("echo", forKey: "echo")
        }
        try await defaults.writeAsync("x", forKey: "source")
        #expect(onWriteThread.withLock { $0 } == true)
        #expect(defaults.string(forKey: "echo") == "echo")
        withExtendedLifetime(observation) {}
    }
}
