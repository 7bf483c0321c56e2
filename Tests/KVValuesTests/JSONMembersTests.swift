import Testing

@testable import KVValues

/// ``JSONParser/parseMembers(_:limits:inner:)`` is the daemon's path for every call: it must
/// accept and refuse exactly what ``JSONParser/parse(_:limits:)`` does, with the same errors.
@Suite struct JSONMembersTests {
    static let inputs: [String] = [
        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"a.b","key":"k"}}"#,
        #"{"parameters":{"b":1,"a":[1,{"x":null}]},"method":"m","oneway":true}"#,
        #" { "parameters" : null , "method" : "m" } "#,
        #"{"parameters":"text"}"#,
        #"{}"#,
        #"{"parameters":{}}"#,
        #"{"a":1,"a":2}"#,
        #"{"parameters":{"k":1},"parameters":{"k":1}}"#,
        #"{"parameters":5,"parameters":{"k":1}}"#,
        #"{"parameters":{"k":1},"parameters":5}"#,
        #"{"parameters":{"k":1,"k":2}}"#,
        #"{"a":1}x"#,
        #"{"a":1"#,
        #"{"a" 1}"#,
        #"{"a":1,}"#,
        #"[1,2]"#,
        #"[1,"#,
        #""just a string""#,
        #"{"parameters":{"deep":[[[[[[1]]]]]]}}"#,
        #"{"\u0061":"\ud83d\ude00"}"#,
        "{\"a\":\"\u{1}\"}",
        // more than 16 members: the duplicate check switches from a search to a set
        "{" + (0..<20).map { "\"m\($0)\":\($0)" }.joined(separator: ",") + ",\"m3\":0}",
        "{" + (0..<20).map { "\"m\($0)\":\($0)" }.joined(separator: ",") + "}",
    ]

    @Test(arguments: inputs)
    func parseMembersAgreesWithParse(input: String) throws {
        let bytes = Array(input.utf8)
        let limits = JSONLimits(maxDepth: 5, maxBytes: 1 << 20)
        let general = Result { () throws(JSONSyntaxError) in try JSONParser.parse(bytes, limits: limits) }
        let ordered = Result { () throws(JSONSyntaxError) in
            try JSONParser.parseMembers(bytes, limits: limits, inner: "parameters")
        }
        switch (general, ordered) {
        case (.failure(let expected), .failure(let got)):
            #expect(got == expected)
        case (.success(.object(var members)), .success(let split?)):
            if let inner = split.inner {
                #expect(members.removeValue(forKey: "parameters") == .object(inner.dictionary))
            }
            #expect(split.members.dictionary == members)
            #expect(split.members.pairs.count == members.count)
        case (.success(let json), .success(nil)):
            #expect(json.typeName != "object")
        default:
            Issue.record("parse and parseMembers disagree: \(general) / \(ordered)")
        }
    }

    @Test func membersKeepTheirOrderAndCompareWithoutIt() throws {
        let split = try #require(try JSONParser.parseMembers(Array(#"{"z":1,"a":2,"m":3}"#.utf8), inner: "parameters"))
        #expect(split.members.pairs.map(\.name) == ["z", "a", "m"])
        #expect(split.members == ["a": .integer(2), "m": .integer(3), "z": .integer(1)])
        #expect(split.members["a"] == .integer(2))
        #expect(split.members["missing"] == nil)
    }

    /// writeString checks 8 bytes at a time for bytes to escape; compare it with the
    /// byte-by-byte rule on strings with each special byte at every position.
    @Test func stringsAreEscapedWhereverTheSpecialByteFalls() throws {
        for special: UInt8 in [0x00, 0x01, 0x0A, 0x1F, 0x20, 0x22, 0x5C, 0x7F, 0x21, 0x5B, 0x5D] {
            for length in [1, 7, 8, 9, 16, 17, 31] {
                for position in 0..<length {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = special
                    let text = String(decoding: bytes, as: UTF8.self)
                    var out: [UInt8] = []
                    JSONWriter.writeString(text, into: &out)
                    #expect(try JSONParser.parse(out) == .string(text))
                    let escaped = special < 0x20 || special == 0x22 || special == 0x5C
                    #expect(
                        out.count == length + 2
                            + (escaped ? (special == 0x0A || special == 0x22 || special == 0x5C ? 1 : 5) : 0),
                        "byte \(special) at \(position) of \(length)")
                }
            }
        }
        var out: [UInt8] = []
        JSONWriter.writeString("héllo wörld, ünïcode ✓ \u{80}\u{FF}", into: &out)
        #expect(try JSONParser.parse(out) == .string("héllo wörld, ünïcode ✓ \u{80}\u{FF}"))
    }

    @Test(arguments: [Int64.min, -1, 0, 7, 10, 1_000_000_007, Int64.max])
    func integersAreWrittenAsTheirDecimalText(number: Int64) {
        var out: [UInt8] = []
        JSONWriter.writeInteger(number, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == String(number))
    }
}
