import Glibc
import KVSystem
import KVTestSupport
import Testing

/// What ``SystemCalls``' policies do about each error, for every conformer.
@Suite struct PolicyTests {
    @Test func readAvailableRetriesEINTRAndReadsEAGAINAsNothingNow() throws {
        let system = FaultInjectingSystem()
        let pair = try SocketPair()
        var buffer = [UInt8](repeating: 0, count: 16)
        let nothing = try buffer.withUnsafeMutableBytes { try system.readAvailable(pair.near, into: $0) }
        #expect(nothing == nil)
        #expect(send(pair.far, "abc", 3, 0) == 3)
        system.inject(.fail(.interrupted), on: .read, times: 2)
        let count = try buffer.withUnsafeMutableBytes { try system.readAvailable(pair.near, into: $0) }
        #expect(count == 3 && Array(buffer[..<3]) == Array("abc".utf8))
        #expect(system.count(.read) == 4, "two interrupted reads, one that read, one that found nothing")
        system.inject(.fail(.connectionReset), on: .read)
        #expect(throws: SystemError("read", .connectionReset)) {
            try buffer.withUnsafeMutableBytes { try system.readAvailable(pair.near, into: $0) }
        }
    }

    @Test func sendAvailableReadsAFullSocketAsZeroAndSendAllFinishesShortWrites() throws {
        let system = FaultInjectingSystem()
        let pair = try SocketPair()
        system.inject(.fail(.wouldBlock), on: .send)
        #expect(try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try system.sendAvailable(pair.near, $0) } == 0)
        system.inject(.short(3), on: .send, times: 10)
        system.inject(.fail(.interrupted), on: .send)
        let bytes = Array("twelve bytes".utf8)
        try LinuxSystem().setStatusFlags(pair.near, try LinuxSystem().statusFlags(pair.near) & ~O_NONBLOCK)
        try bytes.withUnsafeBytes { try system.sendAll(pair.near, $0) }
        var received = [UInt8](repeating: 0, count: 32)
        let count = recv(pair.far, &received, received.count, 0)
        #expect(Array(received[..<max(0, count)]) == bytes)
    }

    @Test func acceptWaitingSkipsAbortedConnectionsAndSaysWhenNoneWaits() throws {
        let system = FaultInjectingSystem()
        let listener = system.makeListener()
        #expect(try system.acceptWaiting(listener) == nil)
        let (client, _) = system.connectPair()
        defer { close(client) }
        system.inject(.fail(.connectionAborted), on: .accept)
        system.inject(.fail(.interrupted), on: .accept)
        let accepted = try #require(try system.acceptWaiting(listener))
        close(accepted)
        system.inject(.fail(.tooManyOpenFiles), on: .accept)
        #expect(throws: SystemError("accept4", .tooManyOpenFiles)) { try system.acceptWaiting(listener) }
    }

    @Test func aSocketPathThatCannotBeAnAddressIsRefusedByName() {
        for path in ["", "/tmp/a\u{0}b", "/tmp/" + String(repeating: "x", count: 200)] {
            let error = #expect(throws: SystemError.self) { try LinuxSystem().connectUnix(path) }
            #expect(
                error?.errno == .nameTooLong && error?.description.contains("1 to 107 bytes") == true,
                "\(String(describing: error))")
        }
    }

    @Test func makeDirectoriesCreatesMissingParentsAndKeepsExistingOnes() throws {
        let root = "/tmp/kvd-policy-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { for path in [root + "/a/b", root + "/a", root] { rmdir(path) } }
        try LinuxSystem().makeDirectories(root + "/a/b", permissions: 0o700)
        try LinuxSystem().makeDirectories(root + "/a/b", permissions: 0o700)
        let status = try LinuxSystem().status(root + "/a/b", followingLinks: false)
        #expect(status.kind == .directory && status.permissions & 0o077 == 0)
    }

    @Test func errnoNamesTheValuesTheCodeActsOn() {
        #expect(Errno.interrupted.rawValue == EINTR && Errno.wouldBlock.rawValue == EWOULDBLOCK)
        #expect(Errno.tooManyOpenFiles.description == "Too many open files")
        #expect(Errno.noSuchFileOrDirectory.meansNobodyListens && Errno.connectionRefused.meansNobodyListens)
        #expect(!Errno.permissionDenied.meansNobodyListens)
        #expect(SystemError("connect", .connectionRefused).description == "connect: Connection refused")
    }
}
