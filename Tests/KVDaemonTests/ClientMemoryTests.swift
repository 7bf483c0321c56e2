import Glibc
import KVProtocol
import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVDaemon

/// What clients hold in kvd, as ``ClientMemory`` counts it, and the option that bounds it.
@Suite struct ClientMemoryTests {
    /// A shared watch reply is charged once however many watchers hold it, stays charged until
    /// the last one has sent or dropped it, and leaves in order between a watcher's own replies.
    @Test func aSharedReplyIsChargedOnceAndKeepsItsPlaceInTheOutput() throws {
        let memory = ClientMemory(budget: 1 << 30)
        let pairs = [try SocketPair(), try SocketPair()]
        let watchers = pairs.enumerated().map {
            ClientConnection(id: $0.offset, fd: $0.element.near, memory: memory, system: system)
        }
        let shared = SharedReply([UInt8](repeating: UInt8(ascii: "s"), count: SharedReply.minimumShared) + [0])
        for watcher in watchers {
            watcher.send(writing: { $0 += Array("first".utf8) + [0] })
            watcher.send(shared: shared)
            watcher.send(writing: { $0 += Array("last".utf8) + [0] })
            watcher.recharge()
        }
        let own = memory.total - shared.bytes.count
        #expect(
            own >= 0 && own < shared.bytes.count,
            "the shared reply was charged \(memory.total / shared.bytes.count) times")
        #expect(watchers[0].pendingOutput == 6 + shared.bytes.count + 5)
        try watchers[0].flush()
        let received = pairs[0].received()
        #expect(received == Array("first".utf8) + [0] + shared.bytes + Array("last".utf8) + [0])
        #expect(watchers[0].pendingOutput == 0)
        #expect(memory.total >= shared.bytes.count, "released while another watcher still holds it")
        watchers[1].releaseMemory()
        watchers[0].releaseMemory()
        #expect(memory.total == 0, "\(memory.total) bytes still charged after both let go")
    }

    /// Small watch replies are copied into each output, not queued one by one.
    @Test func aSmallSharedReplyIsCopied() throws {
        let memory = ClientMemory(budget: 1 << 30)
        let pair = try SocketPair()
        let watcher = ClientConnection(id: 0, fd: pair.near, memory: memory, system: system)
        watcher.send(shared: SharedReply(Array("small".utf8) + [0]))
        watcher.recharge()
        #expect(watcher.output == Array("small".utf8) + [0])
        #expect(memory.total == watcher.output.capacity)
    }

    @Test func theBudgetOptionTakesSizesOfAtLeastOneMebibyte() throws {
        let environment = ["HOME": "/home/u"]
        func budget(_ text: String) throws(UsageError) -> Int? {
            guard
                case .run(let options) = try DaemonOptions.parse(
                    ["--max-client-memory", text], environment: environment)
            else { return nil }
            return options.maxClientMemory
        }
        #expect(try budget("1048576") == 1 << 20)
        #expect(try budget("2048K") == 2 << 20)
        #expect(try budget("64M") == 64 << 20)
        #expect(try budget("1g") == 1 << 30)
        guard case .run(let defaults) = try DaemonOptions.parse([], environment: environment) else {
            Issue.record("no options given must mean run")
            return
        }
        #expect(defaults.maxClientMemory == 256 << 20)
        for bad in ["", "1000", "12X", "-5M", "M", "99999999999999999999G"] {
            #expect(throws: UsageError.self, "\(bad.debugDescription)") { try budget(bad) }
        }
        #expect(DaemonOptions.usage.contains("--max-client-memory"))
    }
}
