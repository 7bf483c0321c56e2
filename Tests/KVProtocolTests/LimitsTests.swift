import KVValues
import Testing

@testable import KVProtocol

/// The varlink parsers on both sides take every value the contract allows (512 levels) inside their
/// own framing, and the value rule itself is checked once.
@Suite struct ProtocolLimitsTests {
    static func nested(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
    }

    static func request(_ text: String) throws -> DefaultsRequest {
        try DefaultsRequest(call: VarlinkCall(message: Array(text.utf8)))
    }

    @Test(arguments: [510, 512])
    func setAndApplyTakeValuesAsDeepAsTheContractAllows(depth: Int) throws {
        let set = try Self.request(
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":\#(Self.nested(depth))}}"#)
        guard case .set(_, _, let value, _) = set else {
            Issue.record("not a Set: \(set)")
            return
        }
        #expect(JSONWriter().string(value.typedJSON) == Self.nested(depth))
        let apply = try Self.request(
            #"{"method":"io.kvd.Defaults.Apply","parameters":{"domain":"d","changes":[{"key":"k","value":\#(Self.nested(depth))}]}}"#
        )
        guard case .apply(_, let changes, _) = apply else {
            Issue.record("not an Apply: \(apply)")
            return
        }
        #expect(changes.first?.value == value)
    }

    /// A Set's value sits 2 levels deep in the call, 2 fewer than the parser allows: a value of
    /// 513 or 514 levels is read and refused by the value rule, with the rule's name. (Deeper
    /// JSON, or 513 levels in an Apply, is refused by the call parser itself.)
    @Test(arguments: [513, 514])
    func setOfAValueDeeperThan512LevelsIsAnInvalidValue(depth: Int) throws {
        let text =
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":\#(Self.nested(depth))}}"#
        #expect {
            try Self.request(text)
        } throws: { error in
            guard let reply = (error as? RequestError)?.reply else { return false }
            return reply.error == DefaultsInterface.Error.invalidValue
                && reply.parameters["reason"].map { "\($0)".contains("deeper than 512 levels") } == true
        }
        let apply =
            #"{"method":"io.kvd.Defaults.Apply","parameters":{"domain":"d","changes":[{"key":"k","value":\#(Self.nested(depth))}]}}"#
        #expect(throws: (any Error).self) { try Self.request(apply) }
    }

    /// What kvd sends for a domain holding a 512-deep value: the client's reply parser takes it.
    @Test func listAndWatchRepliesOfTheDeepestValueAreRead() throws {
        let list = #"{"parameters":{"values":{"k":\#(Self.nested(512))},"revision":1}}"#
        let watch =
            #"{"parameters":{"revision":1,"changes":[{"key":"k","value":\#(Self.nested(512))}],"initial":true},"continues":true}"#
        for text in [list, watch] {
            let reply = try VarlinkReply(message: Array(text.utf8))
            #expect(reply.error == nil)
        }
    }
}
