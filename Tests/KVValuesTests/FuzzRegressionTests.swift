import FoundationEssentials
import KVTestSupport
import Testing

@testable import KVValues

/// Inputs found by the fuzz targets in `fuzz/` (see `make fuzz`), kept so the defects stay fixed.
@Suite struct FuzzRegressionTests {
    /// fuzz typed-json: `.999999` seconds rounded the Double up to year 10000, which was then
    /// written as `10000-01-01T00:00:00.000Z`, a text no reader accepts.
    @Test(arguments: [
        "9999-12-31T23:59:59.999999Z",
        "9999-12-31T23:59:59-00:01",
        "0001-01-01T00:00:00+00:01",
    ])
    func datesOutsideTheYears0001To9999AreRefused(text: String) {
        #expect(RFC3339.parse(text) == nil)
        #expect(throws: ValueError.self) { try Value(typedJSONText: Array(#"{"$date":"\#(text)"}"#.utf8)) }
    }

    @Test func everyDateThatParsesIsWrittenBackAsTheSameDate() throws {
        for text in [
            "9999-12-31T23:59:59.998Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59+00:00",
            "0001-01-01T00:59:00+00:59",
        ] {
            let date = try #require(RFC3339.parse(text), "\(text)")
            #expect(RFC3339.parse(RFC3339.format(date)) == date, "\(text)")
        }
    }

    /// fuzz domain-file: with two bad members, the error named whichever came first in the
    /// dictionary's hash order, so the same file gave different messages after a write and load.
    @Test func theSameBadDictionaryAlwaysGetsTheSameError() throws {
        let text = #"{"b":{"$nope":0},"a":{"$date":"2022-11-2/T17:00:00/250Z"},"c":{"d":null},"e":1}"#
        var messages: Set<String> = []
        var generator = SeededGenerator.forTest()
        for _ in 0..<50 {
            let json = try JSONParser.parse(text)
            guard case .object(let members) = json else {
                Issue.record("the test document did not parse as an object: \(json)")
                return
            }
            // Copies built in other orders and capacities iterate in other orders.
            var copy: [String: JSON] = [:]
            for name in members.keys.shuffled(using: &generator) { copy[name] = members[name] }
            do { _ = try Value(typedJSON: .object(copy)) } catch { messages.insert(error.description) }
        }
        #expect(messages.count == 1, "\(messages)")
        #expect(messages.first?.hasPrefix("at $.a:") == true, "\(messages)")
    }
}
