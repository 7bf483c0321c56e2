import KVClient
import Testing

/// `Value` is the type of observe's handler: an app names it with `import KVClient` alone.
@Suite struct ValueFromKVClientTests {
    @Test func valueIsNamedFromKVClientAloneAndDescribedAsPlainText() {
        let values: [Value] = [.string("dark"), .integer(42), .real(0.5), .bool(true), .array([.string("a"), .integer(1)])]
        #expect(values.map(\.description) == ["dark", "42", "0.5", "true", #"["a",1]"#])
        #expect("\(Value.string("dark"))" == "dark")
    }
}
