import Foundation
import KVValues
import Testing

@testable import KVClient

/// Typed keys: arrays decode leniently also behind an optional key and inside arrays, and a
/// `DecodableWithFallback` fallback reaches the diagnostics handler.
@Suite(.serialized) struct TypedKeyLeniencyTests {
    enum Mood: String, Codable, Sendable, DecodableWithFallback {
        case calm, busy, unknown
        static let decodingFallback = Mood.unknown
    }

    static let optionalList = KVDefaults.Key<[Int]?>("optionalList", default: nil)
    static let grid = KVDefaults.Key<[[Int]]>("grid", default: [])
    static let moods = KVDefaults.Key<[Mood]>("moods", default: [])

    @Test func anOptionalArrayKeySkipsTheElementItCannotReadAndReportsIt() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.lenient", log: log)
        try defaults.write(.array([.integer(1), .string("two"), .integer(3)]), forKey: "optionalList")
        #expect(defaults[Self.optionalList] == [1, 3])
        #expect(log.all.contains { $0.kind == .skippedElement(index: 1) })
    }

    @Test func anArrayInsideAnArraySkipsOnlyTheInnerElement() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.nested", log: log)
        try defaults.write(
            .array([.array([.integer(1), .bool(true), .integer(2)]), .array([.integer(3)])]), forKey: "grid")
        #expect(defaults[Self.grid] == [[1, 2], [3]])
        #expect(log.all.contains { $0.kind == .notRead(path: "$[0][1]") }, "\(log.all)")
    }

    @Test func aFallbackCaseIsReportedToTheDiagnosticsHandler() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.fallback", log: log)
        try defaults.write(.array([.string("calm"), .string("ecstatic")]), forKey: "moods")
        #expect(defaults[Self.moods] == [.calm, .unknown])
        #expect(
            log.all.contains { $0.key == "moods" && $0.message.contains("\"ecstatic\" is not a case of Mood") },
            "\(log.all)")
    }
}
