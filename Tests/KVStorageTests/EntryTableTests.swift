import FoundationEssentials
import KVValues
import Testing

@testable import KVStorage

/// A domain's compact table of entries (values kept as typed JSON, one array of records, a
/// table of offsets) behaves as a dictionary of entries would, and stays compact.
@Suite struct EntryTableTests {
    /// A deterministic generator (xorshift64*), so a failure repeats.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 2_685_821_657_736_338_717
        }
        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    }

    static func randomValue(_ random: inout Generator, depth: Int = 0) -> Value {
        switch random.below(depth > 2 ? 6 : 8) {
        case 0: return .string(String(repeating: "é\"\\\n x", count: random.below(40)))
        case 1: return .integer(Int64(bitPattern: random.next()))
        case 2: return .real(Double(random.below(1_000_000)) / 8 - 7)
        case 3: return .bool(random.below(2) == 0)
        case 4: return .date(Date(timeIntervalSince1970: Double(random.below(4_000_000_000)) / 1000))
        case 5: return .data(Data((0..<random.below(20)).map { UInt8($0) }))
        case 6: return .array((0..<random.below(4)).map { _ in randomValue(&random, depth: depth + 1) })
        default:
            let names = ["a", "$b", "c\u{1}", "longer name"]
            return .dictionary(
                Dictionary(
                    (0..<random.below(4)).map { _ in (names[random.below(4)], randomValue(&random, depth: depth + 1)) },
                    uniquingKeysWith: { first, _ in first }))
        }
    }

    static func randomKey(_ random: inout Generator) -> Key {
        let index = random.below(300)
        // short keys, keys past a small string's 15 bytes, and one near the 1024-byte limit
        return index == 0
            ? key(String(repeating: "k", count: 1024))
            : key(index % 2 == 0 ? "k\(index)" : "a key of some length \(index)")
    }

    /// `table` holds exactly `expected`, read every way.
    static func check(_ table: EntryTable, _ expected: [Key: StoredEntry]) {
        #expect(table.count == expected.count)
        #expect(Set(table.keys) == Set(expected.keys))
        var seen = 0
        table.forEachEntry { key, entry in
            seen += 1
            #expect(expected[key] == entry, "\(key)")
        }
        #expect(seen == expected.count)
        for (key, entry) in expected {
            #expect(table.entry(key) == entry)
            #expect(table[key] == EntryInfo(revision: entry.revision, bytes: entry.bytes))
            guard case .value(let value) = entry.content else { continue }
            table.withValueJSON(key) { stored in
                guard case .value(let json, let revision) = stored else {
                    Issue.record("\(key): no typed JSON")
                    return
                }
                #expect(revision == entry.revision)
                #expect(Array(json) == JSONWriter(sortKeys: true).bytes(value.typedJSON))
            }
        }
    }

    @Test(arguments: [1, 2, 3])
    func tableAgreesWithADictionaryThroughRandomChanges(seed: UInt64) {
        var random = Generator(state: seed &* 0x9E37_79B9_7F4A_7C15)
        var table = EntryTable()
        var expected: [Key: StoredEntry] = [:]
        for step in 1...6000 {
            let key = Self.randomKey(&random)
            if random.below(4) == 0 {
                #expect(table.remove(key) == (expected.removeValue(forKey: key) != nil))
            } else {
                let value = Self.randomValue(&random)
                let entry = StoredEntry(
                    content: .value(value), revision: Int64(step), bytes: StoredEntry.measure(key.name, value))
                table.set(key, entry)
                expected[key] = entry
            }
            if step % 1000 == 0 { Self.check(table, expected) }
        }
        Self.check(table, expected)
        // the same entries put in another order make an equal table; another revision does not
        var other = EntryTable()
        for (key, entry) in expected.sorted(by: { $0.key > $1.key }) { other.set(key, entry) }
        #expect(other == table)
        if let (key, entry) = expected.first {
            other.set(key, StoredEntry(content: entry.content, revision: entry.revision + 1, bytes: entry.bytes))
            #expect(other != table)
        }
    }

    @Test func unreadableValueKeepsItsTextAndReason() {
        var table = EntryTable()
        let raw = Array(#"{"$date": "yesterday"}"#.utf8)
        let entry = StoredEntry(content: .unreadable(raw: raw, reason: "not a date ✗"), revision: 7, bytes: 40)
        table.set(key("bad"), entry)
        table.set(key("good"), StoredEntry(content: .value(.integer(1)), revision: 8, bytes: 10))
        Self.check(table, [key("bad"): entry, key("good"): table.entry(key("good"))!])
        table.withValueJSON(key("bad")) { stored in
            guard case .unreadable(let reason) = stored else {
                Issue.record("not unreadable")
                return
            }
            #expect(reason == "not a date ✗")
        }
        var texts: [String: ArraySlice<UInt8>] = [:]
        table.forEachStored { name, _, content, unreadable in texts[name] = unreadable ? content : nil }
        #expect(texts == ["bad": raw[...]])
    }

    @Test func copiesAreIndependent() {
        var table = EntryTable()
        table.set(key("a"), StoredEntry(content: .value(.string("one")), revision: 1, bytes: 8))
        let copy = table
        table.set(key("a"), StoredEntry(content: .value(.string("two")), revision: 2, bytes: 8))
        table.remove(key("a"))
        #expect(table.isEmpty)
        #expect(copy.entry(key("a"))?.content == .value(.string("one")))
    }

    /// 1,000 keys of 100-byte strings take about their bytes (a header of 21 bytes a record, a
    /// table of 4-byte slots at most three quarters full, a quarter of growth room), rewritten
    /// ten times too (the records are rewritten without garbage rather than grown); removing
    /// every key frees everything.
    @Test func footprintStaysNearTheEntriesBytes() {
        var table = EntryTable()
        let value = Value.string(String(repeating: "v", count: 100))
        for round in 1...10 {
            for index in 0..<1000 {
                let name = "p\(index)"
                table.set(
                    key(name),
                    StoredEntry(content: .value(value), revision: Int64(round), bytes: StoredEntry.measure(name, value))
                )
            }
            #expect(table.count == 1000)
            #expect(table.allocatedBytes <= 1000 * 180, "round \(round): \(table.allocatedBytes) bytes")
        }
        #expect(table.allocatedBytes >= 1000 * 125)
        for index in 0..<1000 { table.remove(key("p\(index)")) }
        #expect(table.isEmpty)
        #expect(table.allocatedBytes == 0)
    }
}

/// What a `Get` reply copies (``Store/withValueJSON(_:_:_:)``) is the typed JSON of the value
/// ``Store/get(_:_:)`` decodes, for every kind of value, as committed, as replayed from the
/// log and as read back from the domain file.
@Suite struct StoredJSONTests {
    static let values: [Value] = [
        .string("plain"), .string("\"quoted\"\n\u{1}é"), .integer(-42), .real(1.0), .real(-0.5e-300), .bool(false),
        .date(Date(timeIntervalSince1970: 1_700_000_000.25)), .data(Data([0, 255, 7])),
        .array([.integer(1), .array([]), .dictionary([:])]),
        .dictionary(["z": .integer(1), "a": .dictionary(["$x": .string("y")]), "m": .array([.bool(true)])]),
        // stored as the log record's bytes: in any other order than sorted, the check sees it
        .dictionary(Dictionary(uniqueKeysWithValues: (0..<8).map { ("m\($0)", Value.integer(Int64($0))) })),
    ]

    static func check(_ store: Store, _ app: Domain) {
        for (index, value) in values.enumerated() {
            let name = key("k\(index)")
            #expect(store.get(app, name) == .value(value, revision: Int64(index + 1)))
            store.withValueJSON(app, name) { found in
                guard case .value(let json, let revision) = found else {
                    Issue.record("k\(index): \(found)")
                    return
                }
                #expect(revision == Int64(index + 1))
                #expect(Array(json) == JSONWriter(sortKeys: true).bytes(value.typedJSON), "k\(index)")
                #expect((try? Value(typedJSONText: Array(json))) == value)
            }
        }
        store.withValueJSON(app, key("missing")) { found in
            if case .missing = found { return }
            Issue.record("missing: \(found)")
        }
    }

    @Test func storedJSONIsTheValuesTypedJSONAfterCommitReplayAndLoad() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("json")
        do {
            let store = try Store(directory: folder.state)
            for (index, value) in Self.values.enumerated() {
                _ = try store.commit(app, .set(key("k\(index)"), value, ifRevision: nil))
            }
            Self.check(store, app)
            store.abandon()  // as SIGKILL: the values only in the log
        }
        do {
            let store = try Store(directory: folder.state)  // replayed from the log
            Self.check(store, app)
            store.close()  // folds the log into the domain file
        }
        let store = try Store(directory: folder.state)  // read from the domain file
        defer { store.close() }
        Self.check(store, app)
    }
}
