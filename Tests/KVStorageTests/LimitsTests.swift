import FoundationEssentials
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// What the store acknowledges is always read back, and a domain it stored can always be served in
/// one reply.
@Suite struct StorageLimitsTests {
    /// `depth` nested arrays around `inner` (its typed JSON nests `depth` levels, plus the inner's).
    static func nested(_ depth: Int, _ inner: Value = .integer(1)) -> Value {
        var value = inner
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    /// Whether `error` is the store's refusal of a change too large for a reply, naming the limit.
    static func isTooLarge(_ error: StorageError) -> Bool {
        "\(error)".contains("\(16 << 20)")
    }

    /// A value two levels deeper in a log record than in a request.
    @Test(arguments: [510, 511, 512])
    func deepAcceptedValueAndTheWritesAfterItSurviveACrash(depth: Int) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let deep = domain("d")
        let other = domain("other")
        do {
            let store = try Store(directory: folder.state)
            #expect(try store.commit(deep, .set(key("deep"), Self.nested(depth), ifRevision: nil)).revision == 1)
            #expect(try store.commit(other, .set(key("k"), .string("acked"), ifRevision: nil)).revision == 2)
            store.abandon()  // as SIGKILL: no compaction
        }
        let logs = LogCollector()
        let store = try Store(directory: folder.state, log: logs.callback)
        defer { store.close() }
        #expect(store.get(deep, key("deep")) == .value(Self.nested(depth), revision: 1))
        #expect(store.get(other, key("k")) == .value(.string("acked"), revision: 2))
        #expect(store.revision == 2)
        #expect(
            logs.messages(at: .warning).isEmpty && logs.messages(at: .error).isEmpty, "\(logs.lines.withLock { $0 })")
        #expect(!folder.names().contains { $0.contains("unreadable") })
    }

    /// The contract: nesting deeper than 512 levels is invalid; the store refuses it, writes
    /// nothing, and names the rule.
    @Test func valueDeeperThan512LevelsIsRefusedAndNothingIsWritten() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect {
            try store.commit(domain("d"), .set(key("deep"), Self.nested(513), ifRevision: nil))
        } throws: { error in
            "\(error)".contains("512")
        }
        #expect(store.revision == 0)
        #expect(store.domains().isEmpty)
    }

    /// Canonical re-encoding grows a value (`1e15` is written `1000000000000000.0`); the store
    /// checks the encoded size, not the value's size in a request.
    @Test func valueWhoseEncodingOutgrowsAReplyIsRefusedAndLaterWritesSurvive() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("grows")
        // "1e15," in a request: 4.5 MB; encoded: 17.1 MB
        let big = Value.array(Array(repeating: .real(1e15), count: 900_000))
        do {
            let store = try Store(directory: folder.state)
            var refused = false
            do { _ = try store.commit(app, .set(key("big"), big, ifRevision: nil)) } catch {
                refused = Self.isTooLarge(error)
                #expect(refused, "\(error)")
            }
            #expect(refused, "a value whose typed JSON exceeds 16 MiB cannot be returned by Get; it must be refused")
            _ = try store.commit(domain("other"), .set(key("k"), .string("acked"), ifRevision: nil))
            store.abandon()
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(domain("other"), key("k")) == .value(.string("acked"), revision: store.revision))
        #expect(store.get(app, key("big")) == .missing)
    }

    /// Two 9 MiB strings make a domain that no List or Watch reply can carry; the second is
    /// refused, the first stays, and the domain stays servable.
    @Test func writeThatWouldMakeTheDomainUnservableIsRefused() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("big")
        let nine = String(repeating: "x", count: 9 << 20)
        let store = try Store(directory: folder.state)
        defer { store.close() }
        _ = try store.commit(app, .set(key("a"), .string(nine), ifRevision: nil))
        #expect(throws: StorageError.self) { try store.commit(app, .set(key("b"), .string(nine), ifRevision: nil)) }
        do { _ = try store.commit(app, .set(key("b"), .string(nine), ifRevision: nil)) } catch {
            #expect(Self.isTooLarge(error), "\(error)")
        }
        #expect(store.list(app)?.values.keys.map(\.name) == ["a"])
        // Replacing the value with one of the same size, and shrinking the domain, are accepted.
        _ = try store.commit(app, .set(key("a"), .string(String(repeating: "y", count: 9 << 20)), ifRevision: nil))
        _ = try store.commit(
            app,
            .apply([Change(key: key("a"), value: nil), Change(key: key("b"), value: .string(nine))], ifRevision: nil))
        #expect(store.list(app)?.values.keys.map(\.name) == ["b"])
        // Another domain has its own budget.
        _ = try store.commit(domain("big2"), .set(key("a"), .string(nine), ifRevision: nil))
    }

    /// An Apply is one Watch reply: its changes together must fit one too, even when the domain
    /// after it is small (the same key set twice keeps only the second value).
    @Test func applyWhoseChangesOutgrowAWatchReplyIsRefused() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        let nine = Value.string(String(repeating: "x", count: 9 << 20))
        let changes = [Change(key: key("k"), value: nine), Change(key: key("k"), value: nine)]
        #expect {
            try store.commit(domain("twice"), .apply(changes, ifRevision: nil))
        } throws: { error in
            Self.isTooLarge(error as! StorageError)
        }
        #expect(store.revision == 0)
    }

    /// The domain file is at most 16 times the domain's budget (plus its envelope), whatever
    /// the values' shapes: so a domain within the budget is within the file reader's limit.
    @Test func domainFileStaysWithinSixteenTimesTheBudget() {
        func entry(_ value: Value, _ name: String) -> (String, StoredEntry) {
            (name, StoredEntry(content: .value(value), revision: Int64.max, bytes: StoredEntry.measure(name, value)))
        }
        let shapes: [[(String, StoredEntry)]] = [
            [entry(Self.nested(512, .array([])), "deep")],
            [entry(.array(Array(repeating: Self.nested(6), count: 2000)), "boundary")],
            [entry(.array(Array(repeating: .array([.array([.array([])])]), count: 3000)), "brackets")],
            (0..<3000).map { entry(.integer(0), "\($0)") },
            [
                entry(
                    .dictionary(
                        Dictionary(
                            uniqueKeysWithValues: (0..<2000).map {
                                ("\($0)", Value.dictionary(["a": .array([.integer(1)])]))
                            })), "dicts")
            ],
            [entry(.array(Array(repeating: .date(Date(timeIntervalSince1970: 0)), count: 500)), "dates")],
        ]
        for shape in shapes {
            var state = DomainState(revision: Int64.max)
            for (name, stored) in shape { _ = state.load(try? Key(validating: name), name: name, stored) }
            let file = DomainFile.encode(domain(String(repeating: "d", count: 255)), state)
            #expect(
                file.count <= 16 * state.budgetBytes + 1024,
                "\(shape.first!.0): \(file.count) bytes for a budget of \(state.budgetBytes)")
        }
        #expect(StorageFormat.maxDomainFileBytes >= 16 * Limits.domainBytes + 1024)
    }

    /// The budget the store keeps as it goes (a few additions a write) is what measuring every
    /// entry gives, after each kind of change, after a replay of the log, and after loading
    /// the domain file.
    @Test func budgetKeptPerWriteMatchesTheEntries() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("budget")
        func measured(_ store: Store) -> Int? {
            guard let snapshot = store.list(app) else { return nil }
            return snapshot.values.reduce(0) {
                $0 + DomainBudget.cost(entryBytes: StoredEntry.measure($1.key.name, $1.value))
            }
        }
        let steps: [Mutation] = [
            .set(key("a"), .string("one"), ifRevision: nil),
            .set(key("a"), .array([.real(1e15), .date(Date(timeIntervalSince1970: 1))]), ifRevision: nil),
            .set(key("quote\""), .dictionary(["$x": .integer(-1)]), ifRevision: nil),
            .apply(
                [
                    Change(key: key("b"), value: .bool(true)), Change(key: key("b"), value: .string("twice")),
                    Change(key: key("a"), value: nil),
                ], ifRevision: nil),
            .delete(key("quote\"")),
            .apply(
                [
                    Change(key: key("c"), value: .data(Data([1, 2, 3]))), Change(key: key("c"), value: nil),
                    Change(key: key("d"), value: .integer(4)),
                ], ifRevision: nil),
        ]
        do {
            let store = try Store(directory: folder.state, options: StoreOptions(compactionLogBytes: 1 << 30))
            for step in steps {
                _ = try store.commit(app, step)
                #expect(store.list(app)?.budgetBytes == measured(store), "after \(step)")
            }
            store.abandon()
        }
        do {
            let store = try Store(directory: folder.state)  // replays the log
            #expect(store.list(app)?.budgetBytes == measured(store))
            store.close()  // compacts
        }
        let store = try Store(directory: folder.state)  // loads the domain file
        defer { store.close() }
        #expect(store.list(app)?.budgetBytes == measured(store))
        _ = try store.commit(app, .deleteDomain)
        #expect(store.list(app) == nil)
    }
}
