import KVValues

/// Fuzz target: the typed JSON parser (`Value(typedJSONText:)`) and the plain JSON parser under it.
///
/// Invariants beyond not crashing: whatever parses is written back and reads again as the same
/// JSON and the same value (parse → write → parse is exact, pretty or compact), and a value that
/// validates keeps validating.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTypedJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard let json = try? JSONParser.parse(input) else { return 0 }
    for writer in [JSONWriter(), JSONWriter(pretty: true)] {
        let text = writer.bytes(json)
        guard let again = try? JSONParser.parse(text) else { fail("written JSON does not parse: \(writer.string(json))") }
        guard again == json else { fail("JSON changed in a round trip: \(writer.string(json))") }
    }
    guard let value = try? Value(typedJSONText: input) else { return 0 }
    let typed = value.typedJSON
    guard let reread = try? Value(typedJSON: typed) else { fail("typedJSON of a value does not read back: \(JSONWriter().string(typed))") }
    guard reread == value else { fail("value changed in a round trip: \(JSONWriter().string(typed))") }
    guard let fromText = try? Value(typedJSONText: JSONWriter().bytes(typed)), fromText == value else {
        fail("written typed JSON does not read back as the same value: \(JSONWriter().string(typed))")
    }
    if (try? value.validate()) != nil, (try? reread.validate()) == nil { fail("a valid value became invalid in a round trip") }
    return 0
}
