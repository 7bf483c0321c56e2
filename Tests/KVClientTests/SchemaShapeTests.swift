import FoundationEssentials
import KVValues
import Testing
@testable import KVClient

// Issue 18's five shapes of silent loss, each with the fixture a real app would have left.

enum Priority: String, Codable, Sendable, DecodableWithFallback {
    case low, normal, high
    static let decodingFallback = Priority.normal
}

/// The notebook app's note, version 1, shipped without a version field.
struct NoteV1: VersionedValue, Equatable {
    static let schemaVersion = 1
    var title: String
    var body: String
}

/// Version 2: `body` renamed `text` and made optional; a priority.
struct Note: VersionedValue, Equatable {
    typealias Previous = NoteV1
    static let schemaVersion = 2
    var title: String
    var text: String?
    var priority: Priority?

    init(title: String, text: String? = nil, priority: Priority? = nil) {
        (self.title, self.text, self.priority) = (title, text, priority)
    }

    init(migrating old: NoteV1) { self.init(title: old.title, text: old.body) }
}

struct Notebook: Codable, Sendable, Equatable {
    var name: String
    var notes: [Note]
}

extension KVDefaults.Keys {
    static let notebook = Key<Notebook>("notebook", default: Notebook(name: "", notes: []))
    static let note = Key<Note>("note", default: Note(title: ""))
    static let notes = Key<[Note]>("notes", default: [])
    static let notesV1 = Key<[NoteV1]>("notes", default: [])
}

enum ShapeFixture {
    /// Shape 1: a notebook whose second note is damaged (a number for a title).
    static let nestedDamage = """
        {"name": "Home", "notes": [
          {"schemaVersion": 2, "title": "Milk", "text": "2 litres"},
          {"schemaVersion": 2, "title": 42, "text": "damaged"},
          {"schemaVersion": 2, "title": "Bread", "text": "rye"}]}
        """
    /// Shape 2: a notebook whose second note was written by version 3 of the app.
    static let nestedNewer = """
        {"name": "Home", "notes": [
          {"schemaVersion": 2, "title": "Milk", "text": "2 litres"},
          {"schemaVersion": 3, "title": "Plan", "checklist": ["a", "b"]},
          {"schemaVersion": 2, "title": "Bread", "text": "rye"}]}
        """
    /// Shape 3: version 1's note as `JSONEncoder` wrote it into a data value: no version.
    static let unversionedV1 = #"{"title":"Groceries","body":"precious text"}"#
    /// Shape 4: a note list where a newer app set a priority this one does not know.
    static let unknownCase = """
        [{"schemaVersion": 2, "title": "Taxes", "text": "due", "priority": "urgent"},
         {"schemaVersion": 2, "title": "Milk", "priority": "low"}]
        """
    /// Shape 5: a note list written by version 2, met by version 1 after a downgrade.
    static let newerList = """
        [{"schemaVersion": 2, "title": "Milk", "text": "2 litres"},
         {"schemaVersion": 2, "title": "Bread", "priority": "high"}]
        """
}

/// Each test: the fixture stored in a real kvd, read, one field changed, saved; what was stored
/// and not understood must still be stored afterwards (the save kept it, or refused).
@Suite(.serialized) struct SchemaShapeTests {
    let domainName = "com.example.notes"

    func store(_ daemon: RealDaemon, _ name: String, _ value: Value) throws {
        try daemon.connection().set(domain(domainName), key(name), value)
    }

    func storedNow(_ daemon: RealDaemon, _ name: String) throws -> Value {
        try daemon.connection().get(domain(domainName), key(name)).value
    }

    @Test func shape1NestedDamageNeitherWipesTheValueNorIsOverwritten() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        let original = try stored(ShapeFixture.nestedDamage)
        try store(daemon, "notebook", original)
        var notebook = defaults[.notebook]
        #expect(notebook.notes.map(\.title) == ["Milk", "Bread"], "one damaged note must not take the others with it")
        notebook.name = "Kitchen"
        try? defaults.set(notebook, for: .notebook)
        guard case .dictionary(let members) = try storedNow(daemon, "notebook"), case .array(let notes)? = members["notes"] else {
            Issue.record("the notebook is no longer stored as one")
            return
        }
        #expect(notes.count == 3, "three notes stored before the save, \(notes.count) after")
        #expect(notes.contains(try stored(#"{"schemaVersion": 2, "title": 42, "text": "damaged"}"#)), "the damaged note is kept as it was")
    }

    @Test func shape2ANewerNestedVersionIsNotOverwritten() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notebook", try stored(ShapeFixture.nestedNewer))
        var notebook = defaults[.notebook]
        #expect(notebook.notes.map(\.title) == ["Milk", "Bread"])
        if notebook.notes.isEmpty { notebook.name = "Kitchen" } else { notebook.notes[0].text = "1 litre" }
        try? defaults.set(notebook, for: .notebook)
        guard case .dictionary(let members) = try storedNow(daemon, "notebook"), case .array(let notes)? = members["notes"] else {
            Issue.record("the notebook is no longer stored as one")
            return
        }
        #expect(notes.contains(try stored(#"{"schemaVersion": 3, "title": "Plan", "checklist": ["a", "b"]}"#)), "the v3 note survives the save")
    }

    @Test func shape3AnUnversionedOldValueIsNotMisreadAsTheCurrentOne() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "note", .data(Data(ShapeFixture.unversionedV1.utf8)))
        var note = defaults[.note]
        #expect(note.text == "precious text", "v1's body is v2's text")
        note.title = "Shopping"
        try? defaults.set(note, for: .note)
        let after = try storedNow(daemon, "note")
        #expect(JSONWriter(sortKeys: true).string(after.typedJSON).contains("precious text") || after == .data(Data(ShapeFixture.unversionedV1.utf8)),
                "the text survives the save: \(after)")
    }

    @Test func shape4AnUnknownEnumCaseIsNotWrittenBackAsTheFallback() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notes", try stored(ShapeFixture.unknownCase))
        var notes = defaults[.notes]
        #expect(notes.map(\.priority) == [.normal, .low], "the app sees the fallback")
        notes[1].text = "2 litres"
        try? defaults.set(notes, for: .notes)
        guard case .array(let elements) = try storedNow(daemon, "notes"), case .dictionary(let first)? = elements.first else {
            Issue.record("not stored as a list")
            return
        }
        #expect(first["priority"] == .string("urgent"), "stored after the save: \(first["priority"].map(String.init(describing:)) ?? "nothing")")
    }

    @Test func shape5ADowngradedAppDoesNotAddToAListItCannotShow() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        let original = try stored(ShapeFixture.newerList)
        try store(daemon, "notes", original)
        var notes = defaults[.notesV1]
        #expect(notes.isEmpty)
        notes.append(NoteV1(title: "Eggs", body: "six"))
        #expect(throws: KVDefaultsError.self, "a list the app shows as empty is not written to") {
            try defaults.set(notes, for: .notesV1)
        }
        #expect(try storedNow(daemon, "notes") == original)
    }
}
