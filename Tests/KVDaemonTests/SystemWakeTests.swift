import KVTestSupport
import KVValues
import Synchronization
import Testing

@testable import KVDaemon

/// The loop's wake-up and the system layer's updates, stepped through the ``Poller`` seam: the
/// loop clears its wake-up before it takes the mirror's updates, so an update the mirror's
/// thread queues while the loop is between those two steps is taken in the same pass, or has a
/// wake-up left for the next. The other order stranded it: the wake-up was cleared after the
/// take, and the update (and every later one) waited for some unrelated event.
@Suite struct SystemWakeTests {
    /// A system layer the test feeds, in the place of the ``SystemMirror``'s thread: each update
    /// is queued, then the loop is woken, as the mirror does.
    final class FedUpdates: SystemUpdateSource, @unchecked Sendable {
        private let queued = Mutex<[SystemLayer.Update]>([])
        /// Updates pushed so far.
        let pushed = Atomic<Int>(0)
        /// Wakes the loop (set once the loop is made).
        var wake: @Sendable () -> Void = {}

        func start(waitingAtMost timeout: Duration) {}
        func stop() {}

        func takeUpdates() -> [SystemLayer.Update] {
            queued.withLock { updates in
                defer { updates = [] }
                return updates
            }
        }

        func push(_ update: SystemLayer.Update) {
            queued.withLock { $0.append(update) }
            pushed.add(1, ordering: .relaxed)
            wake()
        }
    }

    @Test func anUpdateQueuedAsTheLoopClearsItsWakeUpIsNotStranded() throws {
        let updates = FedUpdates()
        let loop = try EventLoopTests.Loop(systemUpdates: updates)
        let poller = loop.server.poller
        updates.wake = { poller.wake() }
        let domain = try Domain(validating: "d")
        let key = try Key(validating: "k")
        let watcher = loop.connect()
        watcher.send(#"{"method":"io.kvd.Defaults.Watch","parameters":{"domain":"d"},"more":true}"#)
        loop.run("the watch did not begin") { watcher.replies.count == 1 }

        // The mirror's thread queues an update (and wakes the loop) just as the loop reads its
        // eventfd to clear the wake-up: the step between the take and the clearing, whichever
        // comes first.
        loop.system.beforeNext(.read, on: poller.wakeFD) {
            updates.push(.values(domain, [Change(key: key, value: .string("system"))], revision: 1))
        }
        poller.wake()
        _ = try loop.server.runPass(maxWait: 0)
        try #require(updates.pushed.load(ordering: .relaxed) == 1, "the pass did not clear its wake-up")
        let applied = loop.server.handler.layer.layer(domain)?.values[key] == .string("system")
        let wakeLeft = try poller.wait(timeoutMilliseconds: 0).contains { $0.fd == poller.wakeFD }
        #expect(
            applied || wakeLeft,
            "the update was neither applied in that pass nor left a wake-up: the loop would sleep on it")
        loop.run("the watcher did not hear of the update") { watcher.replies.count == 2 }
        #expect(watcher.replies.last?.contains(#""source":"system""#) == true, "\(watcher.replies)")
    }
}
