import FoundationEssentials
import KVValues
import Testing

@testable import KVCtl

@Suite struct ValueParserTests {
    @Test(arguments: [
        (["hello"], Value.string("hello")),
        (["-string", "-int"], .string("-int")),
        (["-5"], .string("-5")),
        (["-int", "42"], .integer(42)),
        (["-integer", "-9223372036854775808"], .integer(Int64.min)),
        (["-float", "1"], .real(1.0)),
        (["-float", "2.5e-3"], .real(0.0025)),
        (["-bool", "YES"], .bool(true)),
        (["-boolean", "no"], .bool(false)),
        (["-bool", "1"], .bool(true)),
        (["-bool", "False"], .bool(false)),
        (["-date", "2026-11-29T18:00:00+01:00"], .date(Date(timeIntervalSince1970: 1_795_971_600))),
        (["-data", "68690A"], .data(Data([0x68, 0x69, 0x0A]))),
        (["-data", ""], .data(Data())),
        (["-array", "a", "-int", "2", "-bool", "yes"], .array([.string("a"), .integer(2), .bool(true)])),
        (["-array"], .array([])),
        (["-dict", "k1", "v1", "k2", "-float", "3"], .dictionary(["k1": .string("v1"), "k2": .real(3)])),
        (["-dict", "-string", "-odd", "x"], .dictionary(["-odd": .string("x")])),
        (["--json", "{\"$data\": \"aGk=\"}"], .data(Data("hi".utf8))),
        (["--json", "[1, 1.0, {\"a\": true}]"], .array([.integer(1), .real(1), .dictionary(["a": .bool(true)])])),
    ])
    func everyTypeFlagMakesItsType(arguments: [String], expected: Value) throws {
        #expect(try ValueParser.parse(arguments) == .replace(expected))
    }

    @Test func addFlagsMakeAdditions() throws {
        #expect(try ValueParser.parse(["-array-add", "x", "-int", "1"]) == .arrayAdd([.string("x"), .integer(1)]))
        #expect(try ValueParser.parse(["-dict-add", "k", "-bool", "true"]) == .dictionaryAdd(["k": .bool(true)]))
    }

    @Test(arguments: [
        ([], "missing VALUE"),
        (["-int", "1.5"], "-int needs a whole number"),
        (["-int", "99999999999999999999"], "-int needs a whole number"),
        (["-int"], "-int needs a value after it"),
        (["-float", "nan"], "-float needs a finite number"),
        (["-float", "inf"], "-float needs a finite number"),
        (["-float", "x"], "-float needs a finite number"),
        (["-bool", "maybe"], "-bool needs true, false, yes, no, 1 or 0"),
        (["-date", "tomorrow"], "-date needs an RFC 3339 date-time"),
        (["-data", "abc"], "-data needs hex digits"),
        (["-data", "zz"], "-data needs hex digits"),
        (["-dict", "k"], "the key \"k\" needs a value"),
        (["-dict", "-int", "1"], "a dictionary key is a string"),
        (["-array", "-int", "x"], "-int needs a whole number"),
        (["-nope"], "unknown type flag -nope (to store a string that starts with '-', write -string -nope)"),
        (["-array", "a", "-nope"], "unknown type flag -nope"),
        (["a", "b"], "too many arguments: b"),
        (["-int", "1", "2"], "too many arguments: 2"),
        (["--json"], "--json needs a TYPED_JSON argument"),
        (["--json", "null"], "--json needs typed JSON"),
        (["--json", "{\"$foo\": 1}"], "unknown tag"),
    ])
    func badValuesAreUsageErrorsThatSayWhy(arguments: [String], expected: String) {
        let error = #expect(throws: UsageError.self) { try ValueParser.parse(arguments) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "no error")")
    }

    @Test func hexRoundTrips() {
        let bytes: [UInt8] = Array(0...255)
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
    }
}
