import Glibc
import KVProtocol
import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVClient
@testable import KVConnection

@Suite struct ConnectionTests {
    let domain = try! Domain(validating: "com.example.test")
    let key = try! Key(validating: "theme")

    @Test func getSendsTheCallAndDecodesValueAndRevision() throws {
        let server = FakeVarlinkServer { _ in
            [VarlinkReply(parameters: ["value": .string("dark"), "revision": .integer(42)])]
        }
        let connection = try Connection(socketPath: server.path)
        let (value, revision) = try connection.get(domain, key)
        #expect(value == .string("dark"))
        #expect(revision == 42)
        #expect(server.received == [DefaultsRequest.get(domain, key).call])
    }

    @Test func typedValuesComeBackTyped() throws {
        let server = FakeVarlinkServer { _ in
            [
                VarlinkReply(parameters: [
                    "values": .object(["when": .object(["$date": .string("2026-11-29T17:00:00Z")]), "n": .real(1)]),
                    "revision": .integer(3),
                ])
            ]
        }
        let listing = try Connection(socketPath: server.path).list(domain)
        #expect(listing.revision == 3 && listing.unreadable.isEmpty)
        #expect(listing.values[try Key(validating: "n")] == .real(1))
        #expect(listing.values[try Key(validating: "when")]?.typeName == "date")
    }

    @Test func errorReplyBecomesRemoteErrorWithReadableText() throws {
        let server = FakeVarlinkServer { _ in
            [
                .failure(
                    DefaultsInterface.Error.notFound, ["domain": .string("com.example.test"), "key": .string("theme")])
            ]
        }
        let connection = try Connection(socketPath: server.path)
        let error = #expect(throws: ClientError.self) { try connection.get(domain, key) }
        #expect(error == .notFound(domain: "com.example.test", key: "theme"))
        #expect(error?.description == "no key \"theme\" in domain \"com.example.test\"")
    }

    @Test func pipelinedCallsGetTheirRepliesInOrder() throws {
        let server = FakeVarlinkServer { call in
            guard case .string(let name)? = call.parameters["key"] else { return nil }
            return [VarlinkReply(parameters: ["revision": .integer(Int64(name.count))])]
        }
        let connection = try Connection(socketPath: server.path)
        let keys = try ["a", "bb", "ccc"].map { try Key(validating: $0) }
        let results = connection.callPipelined(keys.map { .delete(domain, $0) })
        let revisions = try results.map { try Decode.revision(try $0.get()) }
        // The fake answers each call with the length of its key: the replies are in call order.
        #expect(revisions == [1, 2, 3])
        #expect(server.received.count == 3)
    }

    @Test func oneErrorInAPipelineFailsOnlyItsOwnCall() throws {
        let server = FakeVarlinkServer { call in
            call.parameters["key"] == .string("bad")
                ? [.failure(DefaultsInterface.Error.invalidValue, ["reason": .string("no")])]
                : [VarlinkReply(parameters: ["revision": .integer(1)])]
        }
        let connection = try Connection(socketPath: server.path)
        let results = connection.callPipelined(
            try ["ok", "bad", "ok"].map { .delete(domain, try Key(validating: $0)) })
        #expect((try? results[0].get()) != nil)
        #expect((try? results[1].get()) == nil)
        #expect((try? results[2].get()) != nil)
    }

    @Test func closedConnectionFailsEveryPendingCall() throws {
        let server = FakeVarlinkServer { _ in nil }
        let connection = try Connection(socketPath: server.path)
        let results = connection.callPipelined([.domains, .domains])
        for result in results {
            #expect(throws: ClientError.connectionClosed) { try result.get() }
        }
    }

    @Test func watchStreamsUntilTheCallbackStops() throws {
        let server = FakeVarlinkServer { call in
            guard call.more else { return [.failure(ServiceInterface.Error.expectedMore)] }
            return (0..<3).map { index in
                VarlinkReply(
                    parameters: [
                        "revision": .integer(Int64(10 + index)), "initial": .bool(index == 0),
                        "changes": .array([.object(["key": .string("theme"), "value": .integer(Int64(index))])]),
                    ], continues: true)
            } + [
                VarlinkReply(
                    parameters: [
                        "revision": .integer(13), "initial": .bool(false),
                        "changes": .array([.object(["key": .string("theme")])]),
                    ], continues: true)
            ]
        }
        let connection = try Connection(socketPath: server.path)
        var events: [WatchEvent] = []
        try connection.watch(domain, key) { event in
            events.append(event)
            return events.count < 4
        }
        #expect(events.map(\.revision) == [10, 11, 12, 13])
        #expect(events.map(\.initial) == [true, false, false, false])
        #expect(events[1].changes == [Change(key: key, value: .integer(1))])
        #expect(events[3].changes == [Change(key: key, value: nil)])
        #expect(throws: ClientError.connectionClosed) { try connection.domains() }
    }

    @Test func cannotConnectNamesTheSocketAndWhatToDo() {
        let path = "/tmp/kvclient-test-nobody-\(getpid()).sock"
        let error = #expect(throws: ClientError.self) { try Connection(socketPath: path) }
        let text = error?.description ?? ""
        #expect(text.contains(path))
        #expect(text.contains("No such file or directory"))
        #expect(text.contains("systemctl --user start kvd.socket"))
    }

    @Test func overlongSocketPathIsRefusedByName() {
        let path = "/tmp/" + String(repeating: "x", count: 200)
        let error = #expect(throws: ClientError.self) { try Connection(socketPath: path) }
        #expect(error?.description.contains("1 to 107 bytes") == true)
    }

    /// The client's system calls go through its seam too: short writes and `EINTR` are absorbed, a
    /// reset connection reads as closed, another failure is named.
    @Test func transientErrorsAreAbsorbedAndAResetReadsAsClosed() throws {
        let system = FaultInjectingSystem()
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let connection = Connection(descriptor: fds[0], socketPath: "a socket pair", system: system)
        let reply = VarlinkReply(parameters: ["domains": .array([.string("com.a")])]).encoded()
        #expect(send(fds[1], reply, reply.count, 0) == reply.count)
        system.inject(.short(5), on: .send, times: 1000)
        system.inject(.fail(.interrupted), on: .send)
        system.inject(.fail(.interrupted), on: .read, times: 2)
        #expect(try connection.domains().map(\.name) == ["com.a"])
        let call = DefaultsRequest.domains.call.encoded()
        var received = [UInt8](repeating: 0, count: 256)
        #expect(
            Array(received[..<max(0, recv(fds[1], &received, received.count, 0))]) == call, "the call arrived damaged")

        system.inject(.fail(.ioError), on: .read)
        #expect(throws: ClientError.connectionFailed(SystemError("read", .ioError))) { try connection.domains() }
        system.inject(.fail(.connectionReset), on: .read)
        #expect(throws: ClientError.connectionClosed) { try connection.domains() }
    }
}
