import FoundationEssentials
import KVValues
import Testing
@testable import KVCtl

@Suite struct FormatTests {
    @Test(arguments: [
        (Value.string("hello world"), "hello world"),
        (.string(""), ""),
        (.integer(-3), "-3"),
        (.real(1), "1.0"),
        (.real(0.25), "0.25"),
        (.real(5e20), "5e+20"),
        (.bool(true), "true"),
        (.bool(false), "false"),
        (.date(Date(timeIntervalSince1970: 1_795_971_600.25)), "2026-11-29T17:00:00.250Z"),
        (.data(Data([0xDE, 0xAD, 0x01])), "dead01"),
        (.array([.integer(1), .string("a")]), "[\n  1,\n  \"a\"\n]"),
        (.dictionary(["b": .real(2), "a": .date(Date(timeIntervalSince1970: 0))]), "{\n  \"a\": {\n    \"$date\": \"1970-01-01T00:00:00.000Z\"\n  },\n  \"b\": 2.0\n}"),
    ])
    func plainOutputPerType(value: Value, expected: String) {
        #expect(Format.plain(value) == expected)
    }

    @Test func jsonOutputIsTypedJSONOnOneLine() {
        #expect(Format.json(.real(1)) == "1.0")
        #expect(Format.json(.string("a\nb")) == "\"a\\nb\"")
        #expect(Format.json(.data(Data("hi".utf8))) == "{\"$data\":\"aGk=\"}")
    }

    @Test func domainWithDollarKeysIsWrapped() throws {
        let values = [try Key(validating: "$x"): Value.integer(1)]
        #expect(Format.domain(values, pretty: false) == "{\"$dict\":{\"$x\":1}}")
    }

    @Test func watchLinesShowValuesAndRemovals() throws {
        let event = WatchEventFixture.event
        #expect(Format.watchLines(event, json: false) == ["a = \"x\"", "b removed"])
        #expect(
            Format.watchLines(event, json: true) == [
                "{\"initial\":true,\"key\":\"a\",\"revision\":7,\"value\":\"x\"}",
                "{\"initial\":true,\"key\":\"b\",\"revision\":7}",
            ])
    }

    @Test func namesAreOneALineOrAJSONArray() {
        #expect(Format.names(["a", "b"], json: false) == "a\nb\n")
        #expect(Format.names(["a", "b"], json: true) == "[\"a\",\"b\"]\n")
        #expect(Format.names([], json: false) == "")
    }
}

import KVClient
import KVProtocol

enum WatchEventFixture {
    static let event = WatchEvent(
        revision: 7,
        changes: [Change(key: try! Key(validating: "b"), value: nil), Change(key: try! Key(validating: "a"), value: .string("x"))],
        initial: true)
}
