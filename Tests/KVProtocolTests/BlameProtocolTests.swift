import KVValues
import Testing

@testable import KVProtocol

/// Who made a change, on the wire: `Blame` is parsed at the edge and is an admin's call on the
/// system instance; a watch reply's writer reads back as sent, and one a reader cannot read is
/// unknown, never a reason to drop the change.
@Suite struct BlameProtocolTests {
    static func call(_ text: String) throws -> DefaultsRequest {
        try DefaultsRequest(call: VarlinkCall(message: Array(text.utf8)))
    }

    @Test func blameIsParsedAtTheEdgeAndIsPrivileged() throws {
        let request = try Self.call(#"{"method":"io.kvd.Defaults.Blame","parameters":{"domain":"com.example.a"}}"#)
        #expect(request == .blame(try Domain(validating: "com.example.a"), nil))
        #expect(request.isPrivileged && !request.isWrite)
        let sent = request.call.encoded().dropLast()  // without its NUL
        #expect(try DefaultsRequest(call: VarlinkCall(message: Array(sent))) == request, "the client's call reads back")
        #expect(throws: RequestError.self) {
            try Self.call(#"{"method":"io.kvd.Defaults.Blame","parameters":{"domain":"bad domain!"}}"#)
        }
    }

    @Test func aWatchReplysWriterReadsBackAndAnUnreadableOneIsUnknown() throws {
        let writer = Writer(uid: 1000, pid: 42, program: "/usr/bin/gsettings", app: "org.gnome.Settings")
        let sent = WatchReply(revision: 5, changes: [], initial: false, writer: writer)
        let read = try WatchReply(decoding: try VarlinkReply(message: sent.reply.encoded().dropLast()))
        #expect(read.writer == writer)
        var odd = sent.reply
        odd.parameterMembers.pairs.removeAll { $0.name == "writer" }
        odd.parameterMembers.pairs.append((name: "writer", value: .object(["pid": .string("x")])))
        let tolerated = try WatchReply(decoding: try VarlinkReply(message: odd.encoded().dropLast()))
        #expect(tolerated.writer == nil && tolerated.revision == 5)
    }
}
