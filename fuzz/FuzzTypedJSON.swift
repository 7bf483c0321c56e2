import KVValues

/// Fuzz target: the typed JSON parser (`Value(typedJSONText:)`) and the plain JSON parser under it.
///
/// Invariants beyond not crashing: whatever parses is written back and reads again as the same
/// JSON and the same value (parse → write → parse is exact, compact, pretty, or pretty down to
/// a level as domain files are), and every value read from JSON validates (the depth counted
/// while reading and the one ``Value/validate()`` counts are the same rule).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTypedJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard let json = try? JSONParser.parse(input) else { return 0 }
    for writer in [JSONWriter(), JSONWriter(pretty: true), JSONWriter(pretty: true, maxIndentedLevel: 2)] {
        let text = writer.bytes(json)
        guard let again = try? JSONParser.parse(text) else {
            fail("written JSON does not parse: \(writer.string(json))")
        }
        guard again == json else { fail("JSON changed in a round trip: \(writer.string(json))") }
    }
    guard let value = try? Value(typedJSONText: input) else { return 0 }
    let typed = value.typedJSON
    guard let reread = try? Value(typedJSON: typed) else {
        fail("typedJSON of a value does not read back: \(JSONWriter().string(typed))")
    }
    guard reread == value else { fail("value changed in a round trip: \(JSONWriter().string(typed))") }
    guard let fromText = try? Value(typedJSONText: JSONWriter().bytes(typed)), fromText == value else {
        fail("written typed JSON does not read back as the same value: \(JSONWriter().string(typed))")
    }
    do { try value.validate() } catch {
        fail("a value read from typed JSON does not validate (\(error)): \(JSONWriter().string(typed))")
    }
    return 0
}
