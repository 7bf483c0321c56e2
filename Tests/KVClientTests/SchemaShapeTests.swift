import FoundationEssentials
import KVValues
import Testing

@testable import KVClient

// The five shapes of silent loss, each with the fixture a real app would have left.

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

/// Version 2 with the priority kept through a round trip.
struct Task: VersionedValue, Equatable {
    static let schemaVersion = 2
    var title: String
    var text: String?
    @KeepsUnknownCase var priority: Priority = .normal
}

struct CoveredNotebook: Codable, Sendable, Equatable {
    var name: String
    var notes: [Note]
    var cover: Priority
}

extension KVDefaults.Keys {
    static let tasks = Key<[Task]>("notes", default: [])
    static let coveredNotebook = Key<CoveredNotebook>(
        "notebook", default: CoveredNotebook(name: "", notes: [], cover: .normal))
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
        guard case .dictionary(let members) = try storedNow(daemon, "notebook"),
            case .array(let notes)? = members["notes"]
        else {
            Issue.record("the notebook is no longer stored as one")
            return
        }
        #expect(notes.count == 3, "three notes stored before the save, \(notes.count) after")
        #expect(
            notes.contains(try stored(#"{"schemaVersion": 2, "title": 42, "text": "damaged"}"#)),
            "the damaged note is kept as it was")
        #expect(try storedNow(daemon, "notebook") == original, "a plain save refused: nothing changed")
        let reading = defaults.read(.notebook)
        #expect(
            reading.report.findings.map(\.path) == ["$.notes[1]"] && reading.report.findings.first?.kind == .undecodable
        )
        #expect(
            reading.report.findings.first?.message.contains("found an integer (42) at $.notes[1].title") == true,
            "\(reading.report)")

        // Asked to keep it: the damaged note is appended to the notes, the rest is the app's.
        try defaults.set(notebook, for: .notebook, unread: .keep)
        let kept = try storedNow(daemon, "notebook")
        guard case .dictionary(let after) = kept, case .array(let keptNotes)? = after["notes"] else {
            Issue.record("the kept notebook is not a dictionary with a notes array: \(kept)")
            return
        }
        #expect(after["name"] == .string("Kitchen"))
        let damaged = try stored(#"{"schemaVersion": 2, "title": 42, "text": "damaged"}"#)
        #expect(keptNotes.count == 3 && keptNotes[2] == damaged)
        #expect(defaults.read(.notebook).value.notes.map(\.title) == ["Milk", "Bread"])
    }

    @Test func shape2ANewerNestedVersionIsNotOverwritten() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notebook", try stored(ShapeFixture.nestedNewer))
        var notebook = defaults[.notebook]
        #expect(notebook.notes.map(\.title) == ["Milk", "Bread"])
        if notebook.notes.isEmpty { notebook.name = "Kitchen" } else { notebook.notes[0].text = "1 litre" }
        try? defaults.set(notebook, for: .notebook)
        guard case .dictionary(let members) = try storedNow(daemon, "notebook"),
            case .array(let notes)? = members["notes"]
        else {
            Issue.record("the notebook is no longer stored as one")
            return
        }
        #expect(
            notes.contains(try stored(#"{"schemaVersion": 3, "title": "Plan", "checklist": ["a", "b"]}"#)),
            "the v3 note survives the save")
        let reading = defaults.read(.notebook)
        #expect(reading.report.newerVersion == 3, "the downgrade is visible")
        #expect(reading.report.findings.first?.path == "$.notes[1]")
        let error = #expect(throws: KVDefaultsError.self) { try defaults.set(notebook, for: .notebook) }
        if case .wouldLoseStoredData(let key, let report)? = error {
            #expect(key == "notebook" && report.newerVersion == 3)
            #expect(
                error?.description.contains("a newer version of the app (schema version 3) wrote it") == true,
                "\(error!)")
        } else {
            Issue.record("not refused as would-lose-stored-data: \(String(describing: error))")
        }
        #expect(try storedNow(daemon, "notebook") == (try stored(ShapeFixture.nestedNewer)))
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
        #expect(
            JSONWriter(sortKeys: true).string(after.typedJSON).contains("precious text")
                || after == .data(Data(ShapeFixture.unversionedV1.utf8)),
            "the text survives the save: \(after)")
        #expect(
            after == (try stored(#"{"schemaVersion": 2, "title": "Shopping", "text": "precious text"}"#)),
            "read cleanly as v1, saved as v2")
        #expect(defaults.read(.note).report.isClean)
    }

    /// The same blob with a member neither version reads: no version reads it cleanly, so the
    /// read is reported and a save refuses.
    @Test func shape3AnUnversionedValueNoVersionReadsWholeIsReportedAndKept() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        let blob = Value.data(Data(#"{"title":"Groceries","body":"precious text","colour":"red"}"#.utf8))
        try store(daemon, "note", blob)
        let reading = defaults.read(.note)
        #expect(reading.value.text == "precious text", "the version that leaves least unread: v1")
        #expect(reading.report.findings.map(\.path) == ["$.colour"] && reading.report.findings.first?.kind == .unread)
        #expect(throws: KVDefaultsError.self) { try defaults.set(reading.value, for: .note) }
        #expect(throws: KVDefaultsError.self, "inside a migrated value, nothing can be placed by name") {
            try defaults.set(reading.value, for: .note, unread: .keep)
        }
        #expect(try storedNow(daemon, "note") == blob)
    }

    @Test func shape4AnUnknownEnumCaseIsNotWrittenBackAsTheFallback() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notes", try stored(ShapeFixture.unknownCase))
        var notes = defaults[.notes]
        #expect(notes.map(\.priority) == [.normal, .low], "the app sees the fallback")
        notes[1].text = "2 litres"
        try? defaults.set(notes, for: .notes)
        guard case .array(let elements) = try storedNow(daemon, "notes"), case .dictionary(let first)? = elements.first
        else {
            Issue.record("not stored as a list")
            return
        }
        #expect(
            first["priority"] == .string("urgent"),
            "stored after the save: \(first["priority"].map(String.init(describing:)) ?? "nothing")")
        let finding = defaults.read(.notes).report.findings.first
        #expect(finding?.path == "$[0].priority" && finding?.kind == .unknownCase(raw: "urgent", kept: false))
        #expect(throws: KVDefaultsError.self, "inside an element, the raw value has no provable place") {
            try defaults.set(notes, for: .notes, unread: .keep)
        }
    }

    /// With `@KeepsUnknownCase` the unknown case makes the round trip, element or not.
    @Test func shape4AKeptUnknownCaseIsWrittenBackUnchangedUntilTheAppSetsIt() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notes", try stored(ShapeFixture.unknownCase))
        let reading = defaults.read(.tasks)
        var tasks = reading.value
        #expect(tasks.map(\.priority) == [.normal, .low])
        #expect(tasks[0].$priority.unknownRawValue == "urgent")
        #expect(
            reading.report.isClean && reading.report.findings.map(\.kind) == [.unknownCase(raw: "urgent", kept: true)])
        tasks[1].text = "2 litres"
        try defaults.set(tasks, for: .tasks)
        let saved = try storedNow(daemon, "notes")
        guard case .array(let elements) = saved, elements.count == 2, case .dictionary(let first) = elements[0],
            case .dictionary(let second) = elements[1]
        else {
            Issue.record("the saved tasks are not two dictionaries: \(saved)")
            return
        }
        #expect(first["priority"] == .string("urgent") && second["text"] == .string("2 litres"))
        tasks[0].priority = .high
        try defaults.set(tasks, for: .tasks)
        let resaved = try storedNow(daemon, "notes")
        guard case .array(let changed) = resaved, case .dictionary(let task)? = changed.first else {
            Issue.record("the saved tasks are not an array of dictionaries: \(resaved)")
            return
        }
        #expect(task["priority"] == .string("high"), "set by the app: the app's case")
    }

    /// An enum read as its fallback in a member reached by name is put back by `.keep`.
    @Test func aFallbackAtAStablePlaceIsPutBackByKeep() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(domainName, log: DiagnosticLog())
        try store(daemon, "notebook", try stored(#"{"name": "Home", "notes": [], "cover": "tartan", "owner": "ann"}"#))
        var book = defaults[.coveredNotebook]
        #expect(book.cover == .normal)
        #expect(throws: KVDefaultsError.self) { try defaults.set(book, for: .coveredNotebook) }
        book.name = "Kitchen"
        try defaults.set(book, for: .coveredNotebook, unread: .keep)
        #expect(
            try storedNow(daemon, "notebook")
                == (try stored(#"{"name": "Kitchen", "notes": [], "cover": "tartan", "owner": "ann"}"#)),
            "the unknown case and the unknown member are back where they were")
        book.cover = .high
        try defaults.set(book, for: .coveredNotebook, unread: .keep)
        #expect(
            try storedNow(daemon, "notebook")
                == (try stored(#"{"name": "Kitchen", "notes": [], "cover": "high", "owner": "ann"}"#)))
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
        let reading = defaults.read(.notesV1)
        #expect(
            reading.report.newerVersion == 2 && reading.value.isEmpty && !reading.report.readDefault,
            "the app can tell the list is not empty but newer")
    }
}
