import Testing

@testable import KVValues

/// The contract's value rule (at most 512 levels) is checked on the value itself, whatever framing
/// carried it, so each framing's parser can allow its own levels on top.
@Suite struct ValueLimitsTests {
    static func nestedJSON(_ depth: Int) -> JSON {
        var json = JSON.integer(1)
        for _ in 0..<depth { json = .array([json]) }
        return json
    }

    @Test func typedJSONDeeperThan512LevelsIsRefusedWhateverParsedIt() throws {
        _ = try Value(typedJSON: Self.nestedJSON(512))
        #expect {
            try Value(typedJSON: Self.nestedJSON(513))
        } throws: { error in
            "\(error)".contains("512")
        }
    }

    /// A date, data or `$dict` wrapper is one or two levels of JSON: counted as such.
    @Test func taggedObjectsCountTheirJSONLevels() throws {
        var wrapped = JSON.object(["$dict": .object(["$k": .integer(1)])])  // two levels
        for _ in 0..<510 { wrapped = .array([wrapped]) }
        _ = try Value(typedJSON: wrapped)
        #expect(throws: ValueError.self) { try Value(typedJSON: .array([wrapped])) }
    }

    @Test func valueBuiltInCodeDeeperThan512LevelsFailsValidation() throws {
        var value = Value.integer(1)
        for _ in 0..<512 { value = .array([value]) }
        try value.validate()
        #expect(throws: ValueError.self) { try Value.array([value]).validate() }
    }
}
