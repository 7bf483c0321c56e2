import FoundationEssentials
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// In a hand-edited domain file, a bad value or key costs only that key; it is kept verbatim and
/// written back, never dropped.
@Suite struct HandEditedFileTests {
    static func envelope(_ values: String, revisions: String = "{}") -> String {
        """
        {"format": "kvd-domain", "formatVersion": 1, "domain": "com.example.hand", "revision": 5,
         "savedAt": "2026-11-29T17:00:00.000Z", "values": \(values), "revisions": \(revisions)}
        """
    }

    static let app = domain("com.example.hand")

    /// Opens the folder, checks `good` reads back as 1, writes another key (so the file is
    /// rewritten at close) and returns the file's text after the rewrite, and the store's
    /// unreadable keys before it.
    static func loadAndRewrite(_ folder: TemporaryFolder, logs: LogCollector = LogCollector()) throws -> (
        text: String, unreadable: Set<String>
    ) {
        let store = try Store(directory: folder.state, log: logs.callback)
        #expect(store.get(app, key("good")) == .value(.integer(1), revision: 5))
        let unreadable = Set(store.list(app)?.unreadable.keys.map(\.name) ?? [])
        _ = try store.commit(app, .set(key("new"), .bool(true), ifRevision: nil))
        store.close()
        return (try #require(folder.read("com.example.hand.json")), unreadable)
    }

    @Test(arguments: [
        ("an empty key", #"{"good": 1, "": "empty name"}"#, #""": "empty name""#),
        (
            "a key over 1024 bytes", #"{"good": 1, "\#(String(repeating: "k", count: 1025))": "long name"}"#,
            #""long name""#
        ),
    ])
    func keyNoRequestCanNameIsKeptVerbatim(_ what: String, values: String, kept: String) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("com.example.hand.json", Self.envelope(values))
        let logs = LogCollector()
        let (text, _) = try Self.loadAndRewrite(folder, logs: logs)
        #expect(text.contains(kept), "\(what) is written back at the rewrite:\n\(text.prefix(600))")
        #expect(logs.messages(at: .warning).contains { $0.contains("kept") }, "\(logs.lines.withLock { $0 })")
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(Self.app, key("new")) == .value(.bool(true), revision: 6))
    }

    @Test func integerOutOfRangeCostsOnlyItsKey() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write(
            "com.example.hand.json",
            Self.envelope(#"{"good": 1, "huge": 18446744073709551615}"#, revisions: #"{"good": 5, "huge": 4}"#))
        let (text, unreadable) = try Self.loadAndRewrite(folder)
        #expect(unreadable == ["huge"])
        #expect(text.contains("18446744073709551615"))
        #expect(!folder.names().contains { $0.contains("unreadable") }, "the file as a whole was readable")
    }

    /// A key given twice is read as the last (as JSON readers commonly do); the rewrite keeps
    /// only that one, so the file is copied aside first.
    @Test func duplicateKeyCostsNothingElseAndBothTextsAreKept() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let original = Self.envelope(#"{"good": 1, "twice": "first", "twice": "second"}"#)
        folder.write("com.example.hand.json", original)
        let logs = LogCollector()
        let (text, unreadable) = try Self.loadAndRewrite(folder, logs: logs)
        #expect(unreadable.isEmpty)
        #expect(text.contains(#""twice": "second""#) && !text.contains("first"))
        #expect(logs.messages(at: .warning).contains { $0.contains("twice") && $0.contains("copied") })
        let backups = folder.names().filter { $0.hasPrefix("com.example.hand.unreadable-") }
        #expect(backups.count == 1, "the text the rewrite cannot keep (the first \"twice\") is kept in a copy")
        #expect(backups.first.flatMap(folder.read) == original)
    }

    /// Without any write, the file is still rewritten at the next compaction, so the copy is
    /// made once, not at every start.
    @Test func fileWithADuplicateKeyIsCopiedOnce() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("com.example.hand.json", Self.envelope(#"{"good": 1, "twice": 1, "twice": 2}"#))
        for _ in 0..<3 { try Store(directory: folder.state).close() }
        #expect(folder.names().filter { $0.hasPrefix("com.example.hand.unreadable-") }.count == 1)
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(Self.app, key("twice")) == .value(.integer(2), revision: 5))
    }

    @Test func byteOrderMarkIsSkipped() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("com.example.hand.json", "\u{FEFF}" + Self.envelope(#"{"good": 1}"#))
        let (text, unreadable) = try Self.loadAndRewrite(folder)
        #expect(unreadable.isEmpty)
        #expect(text.hasPrefix("{"))
        #expect(!folder.names().contains { $0.contains("unreadable") })
    }

    @Test func badValueInAVersion0FileCostsOnlyItsKey() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("com.example.v0.json", #"{"good": 1, "huge": -99999999999999999999, "nulled": null}"#)
        let store = try Store(directory: folder.state)
        defer { store.close() }
        let app = domain("com.example.v0")
        #expect(store.get(app, key("good")) == .value(.integer(1), revision: 1))
        #expect(Set(store.list(app)?.unreadable.keys.map(\.name) ?? []) == ["huge", "nulled"])
    }
}
