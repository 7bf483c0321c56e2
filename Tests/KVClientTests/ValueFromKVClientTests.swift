import KVClient
import Synchronization
import Testing

/// `Value` is the type of observe's handler: an app names it with `import KVClient` alone.
@Suite struct ValueFromKVClientTests {
    @Test func valueIsNamedFromKVClientAloneAndDescribedAsPlainText() {
        let values: [Value] = [
            .string("dark"), .integer(42), .real(0.5), .bool(true), .array([.string("a"), .integer(1)]),
        ]
        #expect(values.map(\.description) == ["dark", "42", "0.5", "true", #"["a",1]"#])
        #expect("\(Value.string("dark"))" == "dark")
    }

    /// The README's observe example, and what it prints.
    @Test func theObserveExamplePrintsPlainValues() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.observe")
        let printed = Mutex<[String]>([])
        let token = defaults.observe("theme") { value in printed.withLock { $0.append(value?.description ?? "unset") } }
        defaults.set("dark", forKey: "theme")
        defaults.removeObject(forKey: "theme")
        #expect(eventually { printed.withLock { $0 } == ["dark", "unset"] }, "\(printed.withLock { $0 })")
        token.cancel()
    }
}
