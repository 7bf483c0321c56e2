import FoundationEssentials
import KVTestSupport
import Testing

@testable import KVValues

@Suite struct TypedJSONTests {
    static let samples: [Value] = [
        .string("héllo \"quoted\" \n\u{1}"),
        .integer(Int64.min), .integer(Int64.max), .integer(0),
        .real(1.0), .real(-0.5), .real(1e-300), .real(123456789.125), .real(5e20),
        .bool(true), .bool(false),
        .date(Date(timeIntervalSince1970: 1_795_971_600.25)),
        .date(Date(timeIntervalSinceReferenceDate: 687916240.08548605)),
        .date(Date(timeIntervalSince1970: -1_000_000_000.123456)),
        .data(Data([0, 1, 2, 255])), .data(Data()),
        .array([]), .array([.integer(1), .real(1.0), .string("1")]),
        .dictionary([:]), .dictionary(["$weird": .bool(true), "plain": .integer(2)]),
        .dictionary(["nested": .dictionary(["$date": .string("not a date")])]),
    ]

    @Test(arguments: samples)
    func everyTypeRoundTripsExactly(value: Value) throws {
        let text = JSONWriter().bytes(value.typedJSON)
        let back = try Value(typedJSONText: text)
        #expect(back == value)
        #expect(back.typeName == value.typeName)
    }

    @Test func integerAndRealStayApart() throws {
        #expect(try Value(typedJSONText: Array("1".utf8)) == .integer(1))
        #expect(try Value(typedJSONText: Array("1.0".utf8)) == .real(1.0))
        #expect(try Value(typedJSONText: Array("1e2".utf8)) == .real(100))
        #expect(JSONWriter().string(Value.real(3).typedJSON) == "3.0")
    }

    @Test(arguments: [
        ("null", "null is not a value"),
        ("{\"$date\": \"yesterday\"}", "RFC 3339"),
        ("{\"$data\": \"***\"}", "base64"),
        ("{\"$foo\": 1}", "unknown tag"),
        ("{\"$date\": \"2026-01-01T00:00:00Z\", \"x\": 1}", "exactly one of"),
        ("[1, {\"a\": null}]", "$[1].a"),
        ("99999999999999999999", "signed 64-bit"),
        ("1e999", "out of range"),
        ("{\"a\":1,\"a\":2}", "duplicate"),
        ("\"\\ud800\"", "surrogate"),
        ("[1,]", "unexpected character"),
    ])
    func invalidInputSaysWhereAndWhy(input: String, expected: String) {
        do {
            _ = try Value(typedJSONText: Array(input.utf8))
            Issue.record("accepted \(input)")
        } catch {
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: ValueError.self) { try Value(typedJSONText: [0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func nestingIsBounded() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: ValueError.self) { try Value(typedJSONText: Array(deep.utf8)) }
        let ok = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        _ = try Value(typedJSONText: Array(ok.utf8))
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(throws: ValueError.self) { try Value(typedJSONText: Array(tooDeep.utf8)) }
    }

    @Test func sizeIsBounded() {
        let big = Array(repeating: UInt8(ascii: " "), count: 100) + Array("1".utf8)
        #expect(throws: ValueError.self) { try Value(typedJSONText: big, limits: JSONLimits(maxBytes: 50)) }
    }

    @Test func datesAcceptOffsetsAndWriteUTC() throws {
        let date = try #require(RFC3339.parse("2026-11-29T18:00:00.250+01:00"))
        #expect(RFC3339.format(date) == "2026-11-29T17:00:00.250Z")
        #expect(RFC3339.parse("2026-02-30T00:00:00Z") == nil)
        #expect(RFC3339.parse("2026-11-29 17:00:00") == nil)
    }

    @Test func nonFiniteRealsAndFarDatesAreInvalid() {
        #expect(throws: ValueError.self) { try Value.real(.infinity).validate() }
        #expect(throws: ValueError.self) { try Value.array([.real(.nan)]).validate() }
        #expect(throws: ValueError.self) { try Value.date(Date(timeIntervalSince1970: 1e15)).validate() }
    }
}

@Suite struct NameTests {
    @Test(arguments: ["com.example.habits", "NSGlobalDomain", "a", "A-Z_0.9", String(repeating: "a", count: 255)])
    func validDomainsAreAcceptedAsGiven(name: String) throws {
        #expect(try Domain(validating: name).name == name)
    }

    @Test(arguments: ["ключ with spaces/and:colons", "k", "$dollar", String(repeating: "k", count: 1024)])
    func validKeysAreAcceptedAsGiven(name: String) throws {
        #expect(try Key(validating: name).name == name)
    }

    @Test(arguments: ["", ".hidden", "-flag", "a/b", "a b", "dömain", String(repeating: "a", count: 256)])
    func invalidDomainsNameTheRule(name: String) {
        #expect(throws: NameError.self) { try Domain(validating: name) }
    }

    /// A name shaped like kvd's copy of an unreadable file is refused at the edge, with the rule,
    /// instead of by the store on every Set.
    @Test(arguments: [
        "com.x.unreadable-20261129T181320Z", "com.x.unreadable-20261129T181320Z-2",
        "a.unreadable-x.unreadable-20261129T181320Z", "x.unreadable-20261129T181320Z.more",
    ])
    func namesShapedLikeBackupsAreRefusedWithTheRule(name: String) {
        #expect {
            try Domain(validating: name)
        } throws: { error in
            (error as? NameError)?.reason.contains(".unreadable-") == true
        }
    }

    @Test(arguments: [
        "com.x.unreadable-2026112XT181320Z", "com.x.unreadable-20261129T181320", "unreadable-20261129T181320Z",
    ])
    func namesThatOnlyResembleBackupsAreAccepted(name: String) throws {
        #expect(try Domain(validating: name).name == name)
    }

    @Test func invalidKeys() {
        #expect(throws: NameError.self) { try Key(validating: "") }
        #expect(throws: NameError.self) { try Key(validating: "a\u{0}b") }
        #expect(throws: NameError.self) { try Key(validating: String(repeating: "k", count: 1025)) }
    }
}

@Suite struct DateFormatTests {
    @Test func everyDateReadsBackToTheBitWithTheFewestDigits() throws {
        var generator = SeededGenerator.forTest()
        for _ in 0..<20_000 {
            let interval = Double.random(in: -63_000_000_000...252_000_000_000, using: &generator)
            let date = Date(timeIntervalSinceReferenceDate: interval)
            let text = RFC3339.format(date)
            #expect(RFC3339.parse(text) == date, "\(interval) → \(text)")
        }
    }

    @Test func aClockDateIsWrittenWithAboutMicrosecondDigits() throws {
        let date = Date(timeIntervalSinceReferenceDate: 786_139_978.157_002_8)
        let text = RFC3339.format(date)
        #expect(RFC3339.parse(text) == date)
        let fraction = text.split(separator: ".").last!.dropLast()
        #expect(fraction.count <= 8, "\(text)")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_795_971_600.25)) == "2026-11-29T17:00:00.250Z")
    }
}

@Suite struct RFC3339RangeTests {
    /// A date outside 0001–9999 is written as the nearest end, never trapping on an `Int64(Double)`
    /// overflow.
    @Test func datesOutsideTheRangeAreWrittenAsTheNearestEndInsteadOfTrapping() {
        #expect(RFC3339.format(Date(timeIntervalSinceReferenceDate: 1e20)) == "9999-12-31T23:59:59.999Z")
        #expect(RFC3339.format(Date(timeIntervalSinceReferenceDate: 1e308)) == "9999-12-31T23:59:59.999Z")
        #expect(RFC3339.format(Date(timeIntervalSinceReferenceDate: -1e20)) == "0001-01-01T00:00:00.000Z")
        #expect(RFC3339.format(Date(timeIntervalSinceReferenceDate: .infinity)) == "9999-12-31T23:59:59.999Z")
        #expect(RFC3339.format(Date(timeIntervalSinceReferenceDate: .nan)) == "0001-01-01T00:00:00.000Z")
    }
}
