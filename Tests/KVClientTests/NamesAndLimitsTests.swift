import FoundationEssentials
import KVValues
import Synchronization
import Testing

@testable import KVClient

/// Names and sizes kvd refuses are refused on the client's side too: a suite name with the
/// diagnostic that names the rule, and a memory store with kvd's own limits
/// (docs/reference/names-and-limits.md).
@Suite struct NamesAndLimitsTests {
    @Test(arguments: ["a/b", "", "has space", String(repeating: "a", count: 300)])
    func anInvalidSuiteNameIsReportedAsAnInvalidName(_ name: String) {
        let log = DiagnosticLog()
        let configuration = KVDefaults.Configuration.inMemory(diagnostics: { diagnostic in
            log.entries.withLock { $0.append(diagnostic) }
        })
        #expect(KVDefaults(suiteName: name, configuration: configuration) == nil)
        #expect(log.all.map(\.kind) == [.invalidName], "\(log.all)")
        #expect(log.all.first?.domain == name)
    }

    private static let tooLarge = KVDefaultsError.client(.tooLarge(limit: Int64(Limits.messageBytes)))

    private func suite(_ store: KVMemoryStore = KVMemoryStore(), log: DiagnosticLog = DiagnosticLog()) -> KVDefaults {
        KVDefaults(
            suiteName: "com.example.limits",
            configuration: .inMemory(
                store, diagnostics: { diagnostic in log.entries.withLock { $0.append(diagnostic) } })
        )!
    }

    @Test func aMemoryStoreRefusesAValueKvdRefuses() throws {
        let log = DiagnosticLog()
        let defaults = suite(log: log)
        let huge = Data(count: 17 << 20)
        #expect(throws: Self.tooLarge) { try defaults.write(.data(huge), forKey: "blob") }
        #expect(defaults.data(forKey: "blob") == nil, "a refused write was stored")
        defaults.set(huge, forKey: "blob")
        #expect(log.all.map(\.kind) == [.writeFailed], "\(log.all)")
        #expect(defaults.data(forKey: "blob") == nil)
        try defaults.write(.data(Data(count: 1 << 20)), forKey: "blob")
        #expect(defaults.data(forKey: "blob")?.count == 1 << 20)
    }

    @Test func aMemoryStoreRefusesADomainThatOutgrowsOneReply() throws {
        let store = KVMemoryStore()
        let defaults = suite(store)
        let piece = Value.string(String(repeating: "x", count: 6 << 20))
        try defaults.write(piece, forKey: "one")
        try defaults.write(piece, forKey: "two")
        #expect(throws: Self.tooLarge) { try defaults.write(piece, forKey: "three") }
        #expect(throws: Self.tooLarge) {
            try defaults.apply { batch in batch.write(piece, forKey: "three") }
        }
        let stored = defaults.value(forKey: "three") != nil  // not in the expectation: 6 MiB printed
        #expect(!stored, "a refused write was stored")
        // a write that does not grow the domain is taken, as kvd takes it
        try defaults.write(.string("small"), forKey: "one")
        try defaults.write(piece, forKey: "three")
    }
}
