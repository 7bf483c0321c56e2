import Foundation
import Glibc
import KVSystem
import KVTestSupport
import Testing

@testable import KVDaemon

/// Who history records as a change's writer, over the event loop: the peer is identified when
/// kvd accepts it (its reach and its program), from its own process only.
@Suite struct PeerWriterTests {
    static let set = #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.w","key":"k","value":1}}"#
    static let blame = #"{"method":"io.kvd.Defaults.Blame","parameters":{"domain":"com.example.w"}}"#

    /// A loop with a writing client and a reader accepted (and identified), nothing sent yet.
    static func accepted() throws -> (EventLoopTests.Loop, EventLoopTests.Client, reader: EventLoopTests.Client) {
        let loop = try EventLoopTests.Loop()
        let (client, reader) = (loop.connect(), loop.connect())
        loop.run("the connections were not accepted") { loop.server.table.connections.count == 2 }
        return (loop, client, reader)
    }

    /// The writer of the one change Blame names, as `reader` gets it (JSON text).
    static func blamedWriter(_ loop: EventLoopTests.Loop, _ reader: EventLoopTests.Client) -> String {
        reader.send(blame)
        loop.run("Blame was not answered") { reader.replies.count == 1 }
        return reader.replies.last ?? ""
    }

    @Test func aConnectionThatWritesLaterIsNamedByItsProgram() throws {
        let (loop, client, reader) = try Self.accepted()
        for _ in 0..<3 { _ = try loop.server.runPass(maxWait: 5) }  // it waits before it writes
        client.send(Self.set)
        loop.run("the Set was not answered") { client.replies.count == 1 }
        let reply = Self.blamedWriter(loop, reader)
        let program = try #require(LinuxSystem().executablePath())
        #expect(reply.contains(#""program":"\#(program)""#), "\(reply)")
        #expect(reply.contains(#""pid":\#(getpid())"#) && reply.contains(#""uid":\#(getuid())"#), "\(reply)")
    }

    /// The process that connected was running when kvd accepted it, and is gone at its first
    /// write (here: its pidfd reads as exited, as when its pid went to another process): the
    /// change is recorded as the process kvd accepted, with the program it read then.
    @Test func aProcessGoneBeforeItsFirstWriteIsNamedAsAccepted() throws {
        let (loop, client, reader) = try Self.accepted()
        loop.system.pretendPeersExited()
        client.send(Self.set)
        loop.run("the Set was not answered") { client.replies.count == 1 }
        #expect(client.replies.first?.contains("revision") == true, "served as accepted: \(client.replies)")
        let reply = Self.blamedWriter(loop, reader)
        let program = try #require(LinuxSystem().executablePath())
        #expect(reply.contains(#""program":"\#(program)""#) && reply.contains(#""pid":\#(getpid())"#), "\(reply)")
    }

    /// The program is read once per connection, at accept: a later write of the process, gone
    /// by then, is still named as the first was.
    @Test func theProgramIsReadOncePerConnection() throws {
        let (loop, client, reader) = try Self.accepted()
        client.send(Self.set)
        loop.run("the Set was not answered") { client.replies.count == 1 }
        loop.system.pretendPeersExited()
        client.send(Self.set.replacingOccurrences(of: #""value":1"#, with: #""value":2"#))
        loop.run("the second Set was not answered") { client.replies.count == 2 }
        let program = try #require(LinuxSystem().executablePath())
        #expect(Self.blamedWriter(loop, reader).contains(#""program":"\#(program)""#))
    }
}
