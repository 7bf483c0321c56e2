import Glibc
import KVProtocol
import KVValues
import Testing
@testable import KVClient

@Suite struct ConnectionTests {
    let domain = try! Domain(validating: "com.example.test")
    let key = try! Key(validating: "theme")

    @Test func getSendsTheCallAndDecodesValueAndRevision() throws {
        let server = FakeServer { _ in [VarlinkReply(parameters: ["value": .string("dark"), "revision": .integer(42)])] }
        let connection = try Connection(socketPath: server.path)
        let (value, revision) = try connection.get(domain, key)
        #expect(value == .string("dark"))
        #expect(revision == 42)
        #expect(server.received == [DefaultsRequest.get(domain, key).call])
    }

    @Test func typedValuesComeBackTyped() throws {
        let server = FakeServer { _ in
            [VarlinkReply(parameters: ["values": .object(["when": .object(["$date": .string("2026-11-29T17:00:00Z")]), "n": .real(1)]), "revision": .integer(3)])]
        }
        let listing = try Connection(socketPath: server.path).list(domain)
        #expect(listing.revision == 3 && listing.unreadable.isEmpty)
        #expect(listing.values[try Key(validating: "n")] == .real(1))
        #expect(listing.values[try Key(validating: "when")]?.typeName == "date")
    }

    @Test func errorReplyBecomesRemoteErrorWithReadableText() throws {
        let server = FakeServer { _ in
            [.failure(DefaultsInterface.Error.notFound, ["domain": .string("com.example.test"), "key": .string("theme")])]
        }
        let connection = try Connection(socketPath: server.path)
        let error = #expect(throws: ClientError.self) { try connection.get(domain, key) }
        #expect(error?.remoteName == DefaultsInterface.Error.notFound)
        #expect(error?.description == "no key \"theme\" in domain \"com.example.test\"")
    }

    @Test func pipelinedCallsGetTheirRepliesInOrder() throws {
        let server = FakeServer { call in
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
        let server = FakeServer { call in
            call.parameters["key"] == .string("bad")
                ? [.failure(DefaultsInterface.Error.invalidValue, ["reason": .string("no")])]
                : [VarlinkReply(parameters: ["revision": .integer(1)])]
        }
        let connection = try Connection(socketPath: server.path)
        let results = connection.callPipelined(try ["ok", "bad", "ok"].map { .delete(domain, try Key(validating: $0)) })
        #expect((try? results[0].get()) != nil)
        #expect((try? results[1].get()) == nil)
        #expect((try? results[2].get()) != nil)
    }

    @Test func closedConnectionFailsEveryPendingCall() throws {
        let server = FakeServer { _ in nil }
        let connection = try Connection(socketPath: server.path)
        let results = connection.callPipelined([.domains, .domains])
        for result in results {
            #expect(throws: ClientError.connectionClosed) { try result.get() }
        }
    }

    @Test func watchStreamsUntilTheCallbackStops() throws {
        let server = FakeServer { call in
            guard call.more else { return [.failure(ServiceInterface.Error.expectedMore)] }
            return (0..<3).map { index in
                VarlinkReply(
                    parameters: [
                        "revision": .integer(Int64(10 + index)), "initial": .bool(index == 0),
                        "changes": .array([.object(["key": .string("theme"), "value": .integer(Int64(index))])]),
                    ], continues: true)
            } + [VarlinkReply(parameters: ["revision": .integer(13), "initial": .bool(false), "changes": .array([.object(["key": .string("theme")])])], continues: true)]
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
}
