import FoundationEssentials
import Glibc
import KVValues
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
        try defaults.write("twenty", forKey: "fontSize")
        #expect(defaults[.fontSize] == 12, "not a number: the default, and a diagnostic")
        #expect(log.all.map(\.kind) == [.undecodable])
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
        _ = log.suite().decode([Note].self, try stored(ShapeFixture.nestedNewer.replacingOccurrences(of: "\"name\": \"Home\", \"notes\": ", with: "\"x\": ")), source: .suite, key: "notes")
        _ = log.suite().decode([Note].self, try stored(#"[{"schemaVersion": 3, "title": "Plan"}]"#), source: .suite, key: "notes")
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
        #expect(message.contains("/nonexistent/kvd"), "\(message)")
        print("MISSING-KVD:", message)
    }
}
