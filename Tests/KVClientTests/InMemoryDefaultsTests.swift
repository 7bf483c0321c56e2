import Foundation
import KVValues
import Synchronization
import Testing

@testable import KVClient

private struct MemoNoteV1: VersionedValue {
    static let schemaVersion = 1
    var text: String
}

private struct MemoNote: VersionedValue, Equatable {
    typealias Previous = MemoNoteV1
    static let schemaVersion = 2
    var text: String
    var pinned: Bool
    init(text: String, pinned: Bool) {
        self.text = text
        self.pinned = pinned
    }
    init(migrating old: MemoNoteV1) { self.init(text: old.text, pinned: false) }
}

extension KVDefaults.Keys {
    fileprivate static let memoNotes = Key<[MemoNote]>("notes", default: [])
    fileprivate static let size = Key<Double>("size", default: 12)
}

/// ``KVMemoryStore``: the whole KVDefaults API with no kvd and no socket (an app's unit tests).
@Suite struct InMemoryDefaultsTests {
    private func suite(
        _ store: KVMemoryStore = KVMemoryStore(), _ name: String = "com.example.test", log: DiagnosticLog? = nil
    ) -> KVDefaults {
        KVDefaults(
            suiteName: name,
            configuration: .inMemory(
                store, diagnostics: { diagnostic in log?.entries.withLock { $0.append(diagnostic) } }))!
    }

    @Test func aSuiteStartsEmptyAndNeedsNoDaemon() throws {
        let log = DiagnosticLog()
        let defaults = suite(log: log)
        #expect(defaults.string(forKey: "theme") == nil && defaults[.size] == 12)
        defaults.set("dark", forKey: "theme")
        try defaults.set(14.5, for: .size)
        #expect(defaults.string(forKey: "theme") == "dark" && defaults[.size] == 14.5)
        #expect(defaults.synchronize())
        #expect(log.all.isEmpty, "an in-memory suite reported \(log.all)")
        #expect(suite()[.size] == 12, "a new store starts empty")
    }

    @Test func versionedValuesMigrateAndSavesKeepWhatWasNotRead() throws {
        let store = KVMemoryStore()
        let defaults = suite(store)
        defaults.set([["text": "old note"]], forKey: "notes")  // as version 1 of the app stored it
        #expect(defaults[.memoNotes] == [MemoNote(text: "old note", pinned: false)])
        try defaults.set([MemoNote(text: "new", pinned: true)], for: .memoNotes)
        #expect(defaults.array(forKey: "notes")?.count == 1 && defaults[.memoNotes].first?.pinned == true)

        defaults.set([["text": "from a newer app", "pinned": true, "schemaVersion": 3]], forKey: "notes")
        #expect(defaults[.memoNotes].isEmpty && defaults.read(.memoNotes).report.newerVersion == 3)
        #expect(throws: KVDefaultsError.self) {
            try defaults.set([MemoNote(text: "x", pinned: false)], for: .memoNotes)
        }
        #expect(defaults.read(.memoNotes).report.newerVersion == 3, "a refused save changed the stored value")
    }

    @Test func suitesOnOneStoreSeeEachOthersWritesBeforeTheWriteReturns() throws {
        let store = KVMemoryStore()
        let app = suite(store)
        let widget = suite(store)
        #expect(widget.string(forKey: "theme") == nil)  // starts its cache
        let counter = ChangeCounter(widget)
        let seen = Gate()
        let observation = widget.observe("theme") { if $0 == .string("dark") { seen.open() } }
        defer { observation.cancel() }
        app.set("dark", forKey: "theme")
        #expect(widget.string(forKey: "theme") == "dark" && seen.opened && counter.value == 1)
        app.removeObject(forKey: "theme")
        #expect(widget.string(forKey: "theme") == nil && counter.value == 2)
        #expect(store.domainNames.isEmpty)
    }

    @Test func conditionalWritesBatchesPersistentDomainsAndHistoryFollowTheContract() throws {
        let store = KVMemoryStore()
        let defaults = suite(store)
        try defaults.apply { batch in
            batch.write(.integer(1), forKey: "a")
            batch.write(.integer(2), forKey: "b")
        }
        defaults.setPersistentDomain(["p": 1], forName: "com.example.other")
        #expect(defaults.persistentDomain(forName: "com.example.other")?["p"] as? Int == 1)
        #expect(store.domainNames == ["com.example.other", "com.example.test"])
        let direct: any SettingsBackend = store
        let revision = try direct.get(domain("com.example.test"), key("a")).revision
        #expect(throws: ClientError.revisionMismatch(current: revision)) {
            try direct.set(domain("com.example.test"), key("a"), .integer(9), ifRevision: revision - 1)
        }
        #expect(throws: ClientError.notFound(domain: "com.example.test", key: "zz")) {
            try direct.delete(domain("com.example.test"), key("zz"))
        }
        try defaults.set(13, for: .size)
        try defaults.set(15, for: .size)
        #expect(
            try defaults.history(for: .size).compactMap { if case .value(let size) = $0.content { size } else { nil } }
                == [15, 13])
        defaults.removePersistentDomain(forName: "com.example.test")
        #expect(defaults.integer(forKey: "a") == 0 && defaults[.size] == 12)
    }

    @Test func theArgumentDomainIsEmptyUnlessGiven() {
        let plain = suite()
        #expect(plain.volatileDomain(forName: KVDefaults.argumentDomain).isEmpty)
        let given = KVDefaults(
            suiteName: "com.example.test", configuration: .inMemory(arguments: ["app", "-theme", "dark"]))!
        #expect(given.string(forKey: "theme") == "dark")
    }
}
