import Glibc
import KVSystem
import KVTestSupport
import Synchronization
import Testing

@testable import KVDaemon

/// Looking into a peer's own root off the loop: a root whose file system never answers delays
/// only its own connection, for no longer than the patience, and holds at most a few threads.
@Suite struct RootLookupsTests {
    let system = LinuxSystem()

    /// `count` connections of this process to a fresh listener, accepted, each begun as a peer
    /// whose root is not kvd's (a pretended own root), through `faulty`; the caller closes them.
    func lookups(_ count: Int, _ faulty: FaultInjectingSystem) throws -> [(fd: Int32, lookup: PeerProcess.RootLookup)] {
        let path = "/tmp/kvd-lookups-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let listening = try system.listenUnix(path, nonBlocking: false)
        defer {
            system.close(listening)
            unlink(path)
        }
        let elsewhere = RootView(root: FileIdentity(device: 0, inode: 0))
        var cgroups = CgroupNames(hierarchy: nil)
        return try (0..<count).map { _ in
            let client = try system.connectUnix(path)
            defer { system.close(client) }
            let accepted = try system.accept(listening)
            guard
                case .lookingInRoot(let lookup) = try PeerProcess.begin(
                    accepted, system: faulty, ownRoot: elsewhere, cgroups: &cgroups)
            else { throw Errno.noSuchFileOrDirectory }
            return (accepted, lookup)
        }
    }

    /// Waits (up to 10 s) until `condition` holds.
    func wait(_ what: Comment, until condition: () -> Bool) {
        let end = ContinuousClock.now + .seconds(10)
        while !condition() && ContinuousClock.now < end { usleep(1000) }
        #expect(condition(), what)
    }

    @Test func aRootThatNeverAnswersDelaysItsConnectionsOnlyForThePatience() throws {
        let faulty = FaultInjectingSystem()
        faulty.holdPaths(endingWith: "/root/.flatpak-info")
        let wakes = Atomic<Int>(0)
        let lookups = RootLookups(
            system: faulty, patience: .milliseconds(500), threadsPerUID: 2, maxThreads: 8,
            wake: { wakes.add(1, ordering: .relaxed) })
        let connections = try self.lookups(3, faulty)
        defer { for (fd, _) in connections { system.close(fd) } }
        let started = ContinuousClock.now
        for (id, connection) in connections.enumerated() {
            lookups.start(connection.lookup, connection: id, now: started)
        }
        wait("two threads for the uid, each stuck in the root") { faulty.heldOpens == 2 }
        #expect(lookups.load.threads == 2 && lookups.load.queued == 1, "\(lookups.load)")
        #expect(lookups.takeIdentified(now: started + .milliseconds(499)).isEmpty, "patience has not run out")
        #expect(lookups.millisecondsToNextDeadline(now: started) == 501)

        let given = lookups.takeIdentified(now: started + .milliseconds(500))
        #expect(given.map(\.connection).sorted() == [0, 1, 2] && given.allSatisfy(\.tookTooLong))
        for outcome in given {
            let peer = try outcome.peer.get()
            #expect(!peer.isConfirmed && peer.program == nil && peer.credentials.pid == getpid(), "unidentified")
        }
        #expect(lookups.isEmpty && lookups.millisecondsToNextDeadline() == nil)
        #expect(lookups.load.queued == 0, "the lookup that never began is dropped, its descriptors closed")

        // The file system answers at last: the stuck threads end, their results dropped.
        faulty.releaseHeldPaths()
        wait("the threads end") { lookups.load.threads == 0 }
        #expect(lookups.load.abandoned == 0)
        #expect(lookups.takeIdentified().isEmpty, "nothing comes back for a connection given up on")
        #expect(wakes.load(ordering: .relaxed) == 0)
    }

    @Test func aLookupThatAnswersIdentifiesItsPeerAndWakesTheLoop() throws {
        let faulty = FaultInjectingSystem()
        let wakes = Atomic<Int>(0)
        let lookups = RootLookups(system: faulty, patience: .seconds(30), wake: { wakes.add(1, ordering: .relaxed) })
        let connections = try self.lookups(2, faulty)
        defer { for (fd, _) in connections { system.close(fd) } }
        lookups.start(connections[0].lookup, connection: 7)
        var given: [RootLookups.Outcome] = []
        wait("the peer is found") {
            given += lookups.takeIdentified()
            return !given.isEmpty
        }
        #expect(given.count == 1 && given[0].connection == 7 && !given[0].tookTooLong)
        let peer = try given[0].peer.get()
        #expect(peer.isConfirmed && peer.program == system.executablePath(), "\(peer)")
        #expect(wakes.load(ordering: .relaxed) >= 1)

        // A connection that closes first: its result never comes.
        faulty.holdPaths(endingWith: "/root/.flatpak-info")
        lookups.start(connections[1].lookup, connection: 8)
        wait("its thread is in the root") { faulty.heldOpens == 1 }
        lookups.cancel(8)
        faulty.releaseHeldPaths()
        wait("the thread ends") { lookups.load.threads == 0 }
        #expect(lookups.takeIdentified().isEmpty && lookups.isEmpty && lookups.load.abandoned == 0)
    }

    /// At most `maxThreads` in all: past it, a lookup waits for a thread that is done.
    @Test func lookupsPastTheThreadCapWaitForAThreadThatIsDone() throws {
        let faulty = FaultInjectingSystem()
        faulty.holdPaths(endingWith: "/root/.flatpak-info")
        let lookups = RootLookups(system: faulty, patience: .seconds(30), threadsPerUID: 4, maxThreads: 1, wake: {})
        let connections = try self.lookups(3, faulty)
        defer { for (fd, _) in connections { system.close(fd) } }
        for (id, connection) in connections.enumerated() { lookups.start(connection.lookup, connection: id) }
        wait("one thread, stuck") { faulty.heldOpens == 1 }
        #expect(lookups.load.threads == 1 && lookups.load.queued == 2, "\(lookups.load)")
        faulty.releaseHeldPaths()
        var given: [RootLookups.Outcome] = []
        wait("every peer is found, one after another") {
            given += lookups.takeIdentified()
            return given.count == 3
        }
        #expect(given.map(\.connection) == [0, 1, 2], "in accept order")
        #expect(given.allSatisfy { (try? $0.peer.get())?.isConfirmed == true })
        wait("the thread ends") { lookups.load.threads == 0 }
    }
}
