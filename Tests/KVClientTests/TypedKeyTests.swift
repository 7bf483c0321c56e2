import Foundation
import Glibc
import KVValues
import Synchronization
import Testing

@testable import KVClient

extension KVDefaults.Keys {
    static let fontSize = Key<Int>("fontSize", default: 12)
    static let showHidden = Key<Bool>("showHidden", default: false)
    static let ratio = Key<Double>("ratio", default: 1)
    static let label = Key<String>("label", default: "")
}

/// Typed keys read what `kvctl set` stores (a string unless told otherwise) as the getters do.
@Suite(.serialized) struct TypedKeyTests {
    @Test func typedKeysConvertLikeTheGetters() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.convert", log: log)
        try defaults.write("20", forKey: "fontSize")
        try defaults.write("YES", forKey: "showHidden")
        try defaults.write(" 0.5", forKey: "ratio")
        try defaults.write(7, forKey: "label")
        #expect(defaults.integer(forKey: "fontSize") == 20)
        #expect(defaults[.fontSize] == 20)
        #expect(defaults[.showHidden])
        #expect(defaults[.ratio] == 0.5)
        #expect(defaults[.label] == "7")
        #expect(log.all.isEmpty, "\(log.all)")
        try defaults.set(21, for: .fontSize)
        #expect(
            try daemon.connection().get(domain("com.example.convert"), key("fontSize")).value == .integer(21),
            "a converted read is a clean one: the save stores the typed value")
        for text in ["twenty", "20abc", "3.5"] {
            try defaults.write(text, forKey: "fontSize")
            #expect(defaults[.fontSize] == 12, "\(text) is not a whole number: the default, and a diagnostic")
        }
        #expect(log.all.map(\.kind) == [.undecodable, .undecodable, .undecodable])
        #expect(log.all.first?.message.contains("found the string \"twenty\"") == true, "\(log.all)")
        try defaults.write(5, forKey: "showHidden")
        #expect(!defaults[.showHidden], "only 0 and 1 are bools")
        #expect(throws: KVDefaultsError.self, "what did not convert is not overwritten") {
            try defaults.set(true, for: .showHidden)
        }
        #expect(defaults.value(forKey: "showHidden") == .integer(5), "after the refused save, reads say what is stored")
        try defaults.set(true, for: .showHidden, unread: .replace)
        #expect(defaults.value(forKey: "showHidden") == .bool(true))
    }

    /// Several keys in one `Apply`: one revision for all of them, or nothing at all.
    @Test func applyCommitsSeveralKeysAtOnceOrNothing() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.batch", log: DiagnosticLog())
        try defaults.write("old", forKey: "theme")
        try defaults.apply { batch in
            batch.set(30, for: .fontSize)
            batch.set(0.25, for: .ratio)
            batch.write(.string("dark"), forKey: "theme")
            batch.reset(.label)
        }
        #expect(defaults[.fontSize] == 30 && defaults[.ratio] == 0.25 && defaults.string(forKey: "theme") == "dark")
        let connection = try daemon.connection()
        let revisions = try ["fontSize", "ratio", "theme"].map {
            try connection.get(domain("com.example.batch"), key($0)).revision
        }
        #expect(Set(revisions).count == 1, "one commit: \(revisions)")

        try connection.set(domain("com.example.batch"), key("notebook"), try stored(ShapeFixture.nestedNewer))
        #expect(throws: KVDefaultsError.self) {
            try defaults.apply { batch in
                batch.set(31, for: .fontSize)
                batch.set(Notebook(name: "Mine", notes: []), for: .notebook)
            }
        }
        #expect(
            try connection.get(domain("com.example.batch"), key("fontSize")).value == .integer(30),
            "a refused write stops the whole batch")
        #expect(
            try connection.get(domain("com.example.batch"), key("notebook")).value
                == (try stored(ShapeFixture.nestedNewer)))
        #expect(throws: KVDefaultsError.invalidValue(key: "ratio", reason: "kvd stores only finite numbers, not inf")) {
            try defaults.apply { batch in
                batch.set(32, for: .fontSize)
                batch.set(.infinity, for: .ratio)
            }
        }
        #expect(defaults[.fontSize] == 30)
    }

    @Test func diagnosticsNameTheTypeWithTheRightArticle() throws {
        let log = DiagnosticLog()
        #expect(log.suite().decode(Notebook.self, .integer(5), source: .suite, key: "notebook") == nil)
        let message = try #require(log.all.first?.message)
        #expect(message.contains("Notebook") && message.contains("found an integer"), "\(message)")
        #expect(!message.contains("Node") && !message.contains("a integer"), "\(message)")
    }

    @Test func aSkippedNewerElementIsDescribedOnce() throws {
        let log = DiagnosticLog()
        _ = log.suite().decode(
            [Note].self,
            try stored(
                ShapeFixture.nestedNewer.replacingOccurrences(of: "\"name\": \"Home\", \"notes\": ", with: "\"x\": ")),
            source: .suite, key: "notes")
        _ = log.suite().decode(
            [Note].self, try stored(#"[{"schemaVersion": 3, "title": "Plan"}]"#), source: .suite, key: "notes")
        let message = try #require(log.all.last?.message)
        #expect(!(message.contains("left as stored") && message.contains("stays stored")), "\(message)")
    }

    @Test func aMissingKvdIsADiagnosticNotSilence() throws {
        let log = DiagnosticLog()
        let configuration = KVDefaults.Configuration(
            socketPath: "/tmp/kvclient-nokvd-\(getpid())/kvd.sock", environment: [:], arguments: [], autostart: true,
            daemonPath: "/nonexistent/kvd", loadTimeout: 2,
            diagnostics: { [log] diagnostic in log.entries.withLock { $0.append(diagnostic) } })
        let defaults = try #require(KVDefaults(suiteName: "com.example.nokvd", configuration: configuration))
        #expect(defaults[.fontSize] == 12)
        #expect(eventually { log.all.contains { $0.kind == .unavailable } }, "\(log.all)")
        let message = log.all.first { $0.kind == .unavailable }?.message ?? ""
        #expect(
            message.contains("/nonexistent/kvd") && message.contains("install kvd beside this program"), "\(message)")
        #expect(
            message.contains("reads return registered values and defaults") && !message.contains("last known values"),
            "\(message)")
    }
}
