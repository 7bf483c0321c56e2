import KVProtocol
import KVSystem
import KVValues
import Testing

@testable import KVClient

@Suite struct ClientErrorTests {
    /// kvd's error replies are decoded once, here, into cases; kvctl and KVDefaults match cases and
    /// never compare error names.
    @Test(arguments: [
        (
            DefaultsInterface.Error.notFound, ["domain": JSON.string("com.a"), "key": .string("x")],
            ClientError.notFound(domain: "com.a", key: "x")
        ),
        (DefaultsInterface.Error.notFound, ["domain": .string("com.a")], .notFound(domain: "com.a", key: nil)),
        (DefaultsInterface.Error.revisionMismatch, ["revision": .integer(9)], .revisionMismatch(current: 9)),
        (
            DefaultsInterface.Error.invalidName, ["name": .string("a/b"), "reason": .string("bad byte")],
            .invalidName(name: "a/b", reason: "bad byte")
        ),
        (DefaultsInterface.Error.invalidValue, ["reason": .string("null")], .invalidValue(reason: "null")),
        (
            DefaultsInterface.Error.storageFailure, ["reason": .string("disk full")],
            .storageFailure(reason: "disk full")
        ),
        (DefaultsInterface.Error.tooLarge, ["limit": .integer(100)], .tooLarge(limit: 100)),
        (
            DefaultsInterface.Error.unreadableValue,
            ["domain": .string("com.a"), "key": .string("x"), "reason": .string("not a date")],
            .unreadableValue(domain: "com.a", key: "x", reason: "not a date")
        ),
        (
            ServiceInterface.Error.methodNotFound, ["method": .string("io.kvd.Defaults.ListAll")],
            .methodNotFound(method: "io.kvd.Defaults.ListAll")
        ),
        (ServiceInterface.Error.permissionDenied, [:], .permissionDenied),
        (
            DefaultsInterface.Error.keyLocked, ["domain": .string("com.a"), "key": .string("x")],
            .keyLocked(domain: "com.a", key: "x")
        ),
        ("com.other.Weird", ["a": .integer(1)], .remote(name: "com.other.Weird", parameters: ["a": .integer(1)])),
    ])
    func errorRepliesAreDecodedIntoCases(name: String, parameters: [String: JSON], expected: ClientError) {
        let decoded = ClientError(errorReply: VarlinkReply.failure(name, parameters))
        #expect(decoded == expected)
        #expect(decoded.isErrorReply)
    }

    @Test(arguments: [
        (
            DefaultsInterface.Error.notFound, ["domain": JSON.string("com.a"), "key": .string("x")],
            "no key \"x\" in domain \"com.a\""
        ),
        (DefaultsInterface.Error.notFound, ["domain": .string("com.a")], "no domain \"com.a\""),
        (
            DefaultsInterface.Error.revisionMismatch, ["revision": .integer(9)],
            "the value changed meanwhile (now at revision 9); read it again and retry"
        ),
        (
            DefaultsInterface.Error.invalidName, ["name": .string("a/b"), "reason": .string("bad byte")],
            "invalid name \"a/b\": bad byte"
        ),
        (DefaultsInterface.Error.invalidValue, ["reason": .string("null")], "invalid value: null"),
        (
            DefaultsInterface.Error.storageFailure, ["reason": .string("disk full")],
            "kvd could not store the change, so nothing changed: disk full"
        ),
        (
            DefaultsInterface.Error.unreadableValue,
            ["domain": .string("com.a"), "key": .string("x"), "reason": .string("not a date")],
            "the stored value of \"x\" in com.a cannot be read (not a date); kvd keeps it as it is. Replace it with `kvctl set com.a x ...` or remove it with `kvctl delete com.a x`"
        ),
        (
            DefaultsInterface.Error.tooLarge, ["limit": .integer(100)],
            "the request, or the domain after it, is larger than kvd's limit of 100 bytes (one message); store less under one key, or in one domain"
        ),
        (
            ServiceInterface.Error.methodNotFound, ["method": .string("io.kvd.Defaults.Nope")],
            "kvd does not implement io.kvd.Defaults.Nope (is kvd older than this client?)"
        ),
        (
            ServiceInterface.Error.invalidParameter, ["parameter": .string("key")],
            "kvd refused the parameter \"key\" (is kvd a different version than this client?)"
        ),
        (
            ServiceInterface.Error.permissionDenied, [:],
            "permission denied: only root and members of group kvd-admin may change the system instance"
        ),
        ("com.other.Weird", ["a": .integer(1)], "kvd replied with the error com.other.Weird {\"a\":1}"),
    ])
    func everyRemoteErrorReadsAsOneLine(name: String, parameters: [String: JSON], expected: String) {
        #expect(ClientError(errorReply: VarlinkReply.failure(name, parameters)).description == expected)
    }

    @Test func connectionErrorsSayWhatToDo() {
        #expect(ClientError.connectionClosed.description.contains("journalctl"))
        #expect(ClientError.cannotStart(path: "/s", reason: "r").description == "cannot start kvd for /s: r")
        let failed = ClientError.connectionFailed(SystemError("read", .connectionAborted))
        #expect(
            failed.description == "the connection to kvd failed (read: Software caused connection abort); try again")
        #expect(failed.isConnectionLost && ClientError.connectionClosed.isConnectionLost && !failed.isErrorReply)
    }
}
