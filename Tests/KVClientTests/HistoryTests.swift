import KVClient
import KVValues
import Testing

/// `history(for:)` of a typed key against the real kvd: old values decode through the version
/// chain; one that cannot be decoded comes back raw and is reported.
@Suite struct TypedHistoryTests {
    static let note = KVDefaults.Key<Note>("note", default: Note(title: "none"))

    @Test func oldValuesDecodeThroughTheVersionChainAndTheRestComeBackRaw() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let suite = daemon.suite("com.example.notes", log: log)
        let connection = try daemon.connection()
        let name = key("note")
        let app = domain("com.example.notes")
        // version 1, as 1.0 wrote it
        try connection.set(app, name, .dictionary(["title": .string("a"), "body": .string("old")]))
        try suite.set(Note(title: "b", text: "new"), for: Self.note)
        try connection.set(app, name, .string("garbage"))
        try connection.delete(app, name)
        let entries = try suite.history(for: Self.note)
        #expect(entries.count == 4)
        guard entries.count == 4 else { return }
        guard case .removed = entries[0].content else {
            Issue.record("newest: \(entries[0].content)")
            return
        }
        guard case .raw(.string("garbage"), _) = entries[1].content else {
            Issue.record("raw: \(entries[1].content)")
            return
        }
        guard case .value(let new) = entries[2].content, case .value(let old) = entries[3].content else {
            Issue.record("\(entries)")
            return
        }
        #expect(new == Note(title: "b", text: "new"))
        #expect(old == Note(title: "a", text: "old"), "version 1 migrated")
        #expect(
            entries.map(\.revision) == entries.map(\.revision).sorted(by: >) && entries.allSatisfy { $0.time != nil })
        #expect(
            log.all.contains {
                $0.key == "note" && $0.kind == .undecodable && $0.message.contains("revision \(entries[1].revision)")
            }, "\(log.all)")
        daemon.stop()
    }
}

/// Secrets from Swift: a key marked to keep no history, and forgetting.
@Suite struct SecretHistoryTests {
    static let token = KVDefaults.Key<String>("token", default: "")
    static let theme = KVDefaults.Key<String>("theme", default: "light")

    @Test func aTokenMarkedToKeepNoHistoryHasNoneAndForgettingRemovesTheRest() throws {
        let daemon = try RealDaemon()
        defer { daemon.stop() }
        let suite = daemon.suite("com.example.secrets")
        try suite.set("before", for: Self.token)
        try suite.setKeepsHistory(false, for: Self.token)
        try suite.set("s3cret", for: Self.token)
        try suite.set("s3cret-2", for: Self.token)
        #expect(try suite.history(for: Self.token).isEmpty)
        try suite.set("dark", for: Self.theme)
        try suite.set("dim", for: Self.theme)
        #expect(try suite.history(for: Self.theme).count == 2)
        try suite.forgetHistory(of: Self.theme)
        let left = try suite.history(for: Self.theme)
        #expect(left.count == 1 && left.first?.time == nil, "only the current value, of no known time: \(left)")
        try suite.setKeepsHistory(true, for: Self.token)
        try suite.set("kept", for: Self.token)
        #expect(try suite.history(for: Self.token).count == 1)
    }
}
