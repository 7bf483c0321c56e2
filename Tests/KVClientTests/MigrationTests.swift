import FoundationEssentials
import KVValues
import Synchronization
import Testing

@testable import KVClient

// Fixtures are kept inline, one per shipped version, as they were written by that version.

// MARK: seed 000: a watermark template, v1 (pointSize, no version) → v2 (relativeSize, margin)

enum Anchor: String, Codable, DecodableWithFallback {
    case topLeading, top, topTrailing, center, bottomLeading, bottom, bottomTrailing
    static let decodingFallback = Anchor.bottomTrailing
}

/// Version 1, as shipped: text size in points on a 1080-pixel canvas, no margin, no version.
struct WatermarkTemplateV1: VersionedValue {
    static let schemaVersion = 1
    var id: UUID?
    var name: String
    var text: String
    var fontName: String?
    var pointSize: Double?
    var opacity: Double?
    var anchor: Anchor?
}

/// Version 2: size relative to the shorter side, and a margin.
struct WatermarkTemplate: VersionedValue, Equatable {
    typealias Previous = WatermarkTemplateV1
    static let schemaVersion = 2
    var id: UUID
    var name: String
    var text: String
    var fontName: String
    var relativeSize: Double
    var opacity: Double
    var anchor: Anchor
    var margin: Double

    static func relativeSize(fromLegacyPoints points: Double) -> Double { points / 1080 }

    init(
        id: UUID = UUID(), name: String, text: String, fontName: String = "System", relativeSize: Double,
        opacity: Double = 0.8, anchor: Anchor = .bottomTrailing,
        margin: Double = 0.04
    ) {
        (self.id, self.name, self.text, self.fontName) = (id, name, text, fontName)
        (self.relativeSize, self.opacity, self.anchor, self.margin) = (relativeSize, opacity, anchor, margin)
    }

    init(migrating old: WatermarkTemplateV1) {
        self.init(
            id: old.id ?? UUID(), name: old.name, text: old.text, fontName: old.fontName ?? "System",
            relativeSize: Self.relativeSize(fromLegacyPoints: old.pointSize ?? 48), opacity: old.opacity ?? 0.8,
            anchor: old.anchor ?? .bottomTrailing)
    }

    private enum CodingKeys: String, CodingKey { case id, name, text, fontName, relativeSize, opacity, anchor, margin }

    /// New fields are optional with defaults; `relativeSize` is required, so a v1 object without
    /// a version fails here and is read as v1 instead.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try c.decodeIfPresent(UUID.self, forKey: .id) ?? UUID(),
            name: try c.decode(String.self, forKey: .name), text: try c.decode(String.self, forKey: .text),
            fontName: try c.decodeIfPresent(String.self, forKey: .fontName) ?? "System",
            relativeSize: try c.decode(Double.self, forKey: .relativeSize),
            opacity: try c.decodeIfPresent(Double.self, forKey: .opacity) ?? 0.8,
            anchor: try c.decodeIfPresent(Anchor.self, forKey: .anchor) ?? .bottomTrailing,
            margin: try c.decodeIfPresent(Double.self, forKey: .margin) ?? 0.04)
    }
}

// MARK: seed 002: the habit tracker's HabitItem, v0.1 (JSONEncoder defaults, no version) → v2

struct HabitItemV1: VersionedValue {
    static let schemaVersion = 1
    var id: UUID
    let name: String
    var started: Date
    var timesDone: Int
    var lastDone: Date
    var daysBetweenCompletions: Double
}

struct Habit: VersionedValue, Equatable {
    typealias Previous = HabitItemV1
    static let schemaVersion = 2
    var id: UUID
    var name: String
    var started: Date
    var lastDone: Date?
    var timesDone: Int
    var everyDays: Double

    init(id: UUID, name: String, started: Date, lastDone: Date?, timesDone: Int, everyDays: Double) {
        (self.id, self.name, self.started, self.lastDone, self.timesDone, self.everyDays) = (
            id, name, started, lastDone, timesDone, everyDays
        )
    }

    init(migrating old: HabitItemV1) {
        self.init(
            id: old.id, name: old.name, started: old.started, lastDone: old.timesDone > 0 ? old.lastDone : nil,
            timesDone: old.timesDone, everyDays: old.daysBetweenCompletions)
    }
}

/// Seed 002's v0.1 JSON, verbatim (as `JSONEncoder().encode(items)` wrote it).
let habitsV01JSON = """
    [
     {
     "id":"5D52B636-030A-4571-8B6E-2117AFD69304",
     "timesDone":2,
     "daysBetweenCompletions":1,
     "name":"Dishes",
     "lastDone":687916240.08548605,
     "started":687741044.36479199
     },
     {
     "id":"26D89BA0-D3FA-49CF-BB01-249A19E90871",
     "timesDone":4,
     "daysBetweenCompletions":1,
     "name":"Bed",
     "lastDone":688060851.81663799,
     "started":687702031.59694302
     },
     {
     "id":"C73234ED-3FA9-4B91-AC24-42E7391E3BE1",
     "timesDone":10,
     "daysBetweenCompletions":0.5,
     "name":"Eating ",
     "lastDone":688108866.69676399,
     "started":687702494.12051105
     },
     {
     "id":"0940450A-2A5E-4B11-B049-9B33F9C01F7D",
     "timesDone":6,
     "daysBetweenCompletions":0.5,
     "name":"Brush teeth",
     "lastDone":688110048.34211302,
     "started":687702045.01338601
     },
     {
     "id":"FA6556A8-17A8-4556-8690-9522A5B22856",
     "timesDone":4,
     "daysBetweenCompletions":1,
     "name":"Write code",
     "lastDone":688108275.33836806,
     "started":687702594.956689
     },
     {
     "id":"DA2A1F85-1274-4C58-B411-D6FF9B2A2AAF",
     "timesDone":0,
     "daysBetweenCompletions":7,
     "name":"Walk exercise",
     "lastDone":687702620.82404804,
     "started":687702620.82411301
     },
     {
     "id":"155D50A7-1403-47C6-AFCA-12DB13270A55",
     "timesDone":1,
     "daysBetweenCompletions":7,
     "name":"Bins out",
     "lastDone":687879744.60854602,
     "started":687702107.33206701
     },
     {
     "id":"86FE01B9-4716-4C2C-B768-1AC8E3B03DDB",
     "timesDone":1,
     "daysBetweenCompletions":7,
     "name":"Roomba kitchen",
     "lastDone":687916244.61723006,
     "started":687702077.16412401
     },
     {
     "id":"EEA3D2CD-3717-49DD-B5E2-924956F41189",
     "timesDone":2,
     "daysBetweenCompletions":7,
     "name":"Washing",
     "lastDone":688115581.30661595,
     "started":687702096.33233297
     }
    ]
    """

/// Typed JSON text as a stored value.
func stored(_ text: String) throws -> Value {
    try Value(typedJSONText: Array(text.utf8))
}

/// Collects diagnostics of a suite made for decoding only (it never connects).
final class DiagnosticLog: Sendable {
    let entries = Mutex<[KVDiagnostic]>([])
    var all: [KVDiagnostic] { entries.withLock { $0 } }
    func suite(arguments: [String] = []) -> KVDefaults {
        let configuration = KVDefaults.Configuration(
            socketPath: "/nonexistent/kvd.sock", environment: [:], arguments: arguments, autostart: false,
            loadTimeout: 0.5, diagnostics: { [self] diagnostic in self.entries.withLock { $0.append(diagnostic) } })
        return KVDefaults(suiteName: "com.example.decoding", configuration: configuration)!
    }
}

@Suite struct MigrationTests {
    /// Seed 000's fixture: a missing version, a renamed field with a changed meaning, a missing
    /// field with a default, a malformed element, an unknown enum value.
    @Test func seed000TemplatesDecodeAcrossVersionsSkippingTheBrokenOne() throws {
        let value = try stored(
            """
            [
              { "name": "Shop", "text": "@myshop", "pointSize": 54, "anchor": "bottomTrailing" },
              { "name": "Broken", "text": 42 },
              { "name": "Future", "text": "hi", "schemaVersion": 2, "relativeSize": 0.03, "anchor": "diagonal" }
            ]
            """)
        let log = DiagnosticLog()
        let templates = try #require(
            log.suite().decode([WatermarkTemplate].self, value, source: .suite, key: "templates"))
        #expect(templates.count == 2)
        #expect(abs(templates[0].relativeSize - 54.0 / 1080.0) < 0.0001)
        #expect(templates[0].margin == 0.04)
        #expect(templates[0].fontName == "System")
        #expect(templates[1].name == "Future")
        #expect(templates[1].anchor == .bottomTrailing)
        // The unknown "diagonal" is reported too: a save of the fallback would lose it.
        #expect(log.all.map(\.kind) == [.skippedElement(index: 1), .notRead(path: "$[2].anchor")])
        #expect(log.all.first?.message.contains("stays stored") == true)
    }

    @Test func storedCurrentVersionDecodesAsCurrent() throws {
        let value = try stored(
            #"{"schemaVersion": 2, "name": "A", "text": "t", "relativeSize": 0.1, "margin": 0.2, "anchor": "top"}"#)
        let template = try #require(
            DiagnosticLog().suite().decode(WatermarkTemplate.self, value, source: .suite, key: "t"))
        #expect(template.relativeSize == 0.1)
        #expect(template.margin == 0.2)
        #expect(template.anchor == .top)
    }

    /// An older version stored with its number is decoded as that version, even if the current
    /// type could also read it: the number decides, not the shape.
    @Test func storedOlderVersionIsDecodedAsThatVersionAndMigrated() throws {
        let value = try stored(
            #"{"schemaVersion": 1, "name": "A", "text": "t", "pointSize": 108, "relativeSize": 0.9}"#)
        let template = try #require(
            DiagnosticLog().suite().decode(WatermarkTemplate.self, value, source: .suite, key: "t"))
        #expect(template.relativeSize == 0.1)
    }

    @Test func encoderAlwaysWritesTheCurrentVersion() throws {
        let template = WatermarkTemplate(name: "A", text: "t", relativeSize: 0.05, anchor: .center)
        let node = try NodeEncoder().encode([template])
        guard case .array(let elements) = node, case .object(let members) = elements.first else {
            Issue.record("not an array of objects: \(node)")
            return
        }
        #expect(members["schemaVersion"] == .integer(2))
        #expect(members["anchor"] == .string("center"))
        #expect(members["pointSize"] == nil)
        let back = try #require(
            DiagnosticLog().suite().decode([WatermarkTemplate].self, try node.value(), source: .suite, key: "t"))
        #expect(back == [template])
    }

    @Test func newerVersionReadsAsTheDefaultAndIsReported() throws {
        let value = try stored(#"{"schemaVersion": 3, "name": "A", "text": "t", "relativeSize": 0.1, "shadow": true}"#)
        let log = DiagnosticLog()
        #expect(log.suite().decode(WatermarkTemplate.self, value, source: .suite, key: "t") == nil)
        #expect(log.all.map(\.kind) == [.newerSchema(stored: 3, known: 2)])
        let report = KVReadReport(
            findings: KVDefaults.typedRead(WatermarkTemplate.self, value, argument: false).findings.map(\.visible))
        #expect(report.newerVersion == 3 && report.readDefault)
    }

    @Test func newerElementsOfAnArrayAreSkippedAndKeptForTheNextSave() throws {
        let value = try stored(
            """
            [{"schemaVersion": 3, "name": "New", "text": "t", "relativeSize": 0.1},
             {"schemaVersion": 2, "name": "Old", "text": "t", "relativeSize": 0.2},
             {"name": "Broken", "text": 42}]
            """)
        let log = DiagnosticLog()
        let templates = try #require(log.suite().decode([WatermarkTemplate].self, value, source: .suite, key: "t"))
        #expect(templates.map(\.name) == ["Old"])
        #expect(log.all.map(\.kind) == [.skippedElement(index: 0), .skippedElement(index: 2)])
        let kept = KVDefaults.typedRead([WatermarkTemplate].self, value, argument: false).findings.filter {
            $0.keep == .append
        }.compactMap(\.stored)
        #expect(kept.count == 2)
        #expect(
            try kept.map { try $0.value() } == [
                try stored(#"{"schemaVersion": 3, "name": "New", "text": "t", "relativeSize": 0.1}"#),
                try stored(#"{"name": "Broken", "text": 42}"#),
            ])
    }

    @Test func problemsOfOneStoredValueAreReportedOnce() throws {
        let value = try stored(#"[{"name": "Broken", "text": 42}]"#)
        let log = DiagnosticLog()
        let suite = log.suite()
        for _ in 0..<3 { _ = suite.decode([WatermarkTemplate].self, value, source: .suite, key: "t") }
        #expect(log.all.count == 1)
    }

    /// Seed 002: the v0.1 HabitItem array as typed JSON (plain JSON is valid typed JSON here).
    @Test func seed002HabitItemsAsTypedJSONMigrateToV2() throws {
        let habits = try #require(
            DiagnosticLog().suite().decode([Habit].self, try stored(habitsV01JSON), source: .suite, key: "Habits"))
        try checkSeed002(habits)
    }

    /// Seed 002 as the app stored it: `UserDefaults.standard.set(JSONEncoder().encode(items), forKey: "Habits")`.
    @Test func seed002HabitItemsAsADataBlobMigrateToV2() throws {
        let log = DiagnosticLog()
        let habits = try #require(
            log.suite().decode([Habit].self, .data(Data(habitsV01JSON.utf8)), source: .suite, key: "Habits"))
        try checkSeed002(habits)
        #expect(log.all.isEmpty)
    }

    private func checkSeed002(_ habits: [Habit]) throws {
        #expect(habits.count == 9)
        let dishes = habits[0]
        #expect(dishes.id == UUID(uuidString: "5D52B636-030A-4571-8B6E-2117AFD69304"))
        #expect(dishes.name == "Dishes")
        #expect(dishes.timesDone == 2)
        #expect(dishes.everyDays == 1)
        #expect(dishes.lastDone == Date(timeIntervalSinceReferenceDate: 687916240.08548605))
        #expect(dishes.started == Date(timeIntervalSinceReferenceDate: 687741044.36479199))
        #expect(RFC3339.format(dishes.started).hasPrefix("2022-10-17T"))
        #expect(habits[2].everyDays == 0.5)
        #expect(habits[5].name == "Walk exercise")
        #expect(habits[5].lastDone == nil, "never done: the migration drops v0.1's placeholder lastDone")
    }

    @Test func dataBlobOfASingleLegacyValueIsRead() throws {
        let json = #"{"name":"Shop","text":"@myshop","pointSize":27}"#
        let template = try #require(
            DiagnosticLog().suite().decode(WatermarkTemplate.self, .data(Data(json.utf8)), source: .suite, key: "t"))
        #expect(template.relativeSize == 27.0 / 1080.0)
    }

    @Test func nestedVersionedValuesMigrateToo() throws {
        struct Settings: Codable, Sendable {
            var templates: [WatermarkTemplate]
            var favorite: WatermarkTemplate
        }
        let value = try stored(
            #"{"templates": [{"name": "A", "text": "t", "pointSize": 10.8}], "favorite": {"name": "B", "text": "t", "pointSize": 21.6}}"#
        )
        let settings = try #require(DiagnosticLog().suite().decode(Settings.self, value, source: .suite, key: "s"))
        #expect(settings.templates[0].relativeSize == 0.01)
        #expect(settings.favorite.relativeSize == 0.02)
    }

    @Test func undecodableValueReadsAsNilAndSaysWhy() throws {
        let log = DiagnosticLog()
        #expect(log.suite().decode(WatermarkTemplate.self, .string("hello"), source: .suite, key: "t") == nil)
        #expect(log.all.map(\.kind) == [.undecodable])
        #expect(log.all.first?.message.contains("no version of WatermarkTemplate can read it") == true)
    }
}
