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
        let name = key("note"), app = domain("com.example.notes")
        try connection.set(app, name, .dictionary(["title": .string("a"), "body": .string("old")]))  // version 1, as 1.0 wrote it
        try suite.set(Note(title: "b", text: "new"), for: Self.note)
        try connection.set(app, name, .string("garbage"))
        try connection.delete(app, name)
        let entries = try suite.history(for: Self.note)
        #expect(entries.count == 4)
        guard entries.count == 4 else { return }
        guard case .removed = entries[0].content else { Issue.record("newest: \(entries[0].content)"); return }
        guard case .raw(.string("garbage"), _) = entries[1].content else { Issue.record("raw: \(entries[1].content)"); return }
        guard case .value(let new) = entries[2].content, case .value(let old) = entries[3].content else { Issue.record("\(entries)"); return }
        #expect(new == Note(title: "b", text: "new"))
        #expect(old == Note(title: "a", text: "old"), "version 1 migrated")
        #expect(entries.map(\.revision) == entries.map(\.revision).sorted(by: >) && entries.allSatisfy { $0.time != nil })
        #expect(log.all.contains { $0.key == "note" && $0.kind == .undecodable && $0.message.contains("revision \(entries[1].revision)") }, "\(log.all)")
        daemon.stop()
    }
}
