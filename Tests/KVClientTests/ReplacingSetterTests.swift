import KVValues
import Synchronization
import Testing

@testable import KVClient

extension KVDefaults.Keys {
    fileprivate static let unreadFontSize = Key<Int>("fontSize", default: 14)
    fileprivate static let unreadPriority = Key<Priority>("priority", default: .low)
}

/// The model of an app whose settings another app stored in a shape it cannot read.
private final class FontSettings: KVSettings, @unchecked Sendable {
    var fontSize: Int {
        get { self[.unreadFontSize] }
        set { self[.unreadFontSize] = newValue }
    }
    var priority: Priority {
        get { self[.unreadPriority] }
        set { self[.unreadPriority] = newValue }
    }
}

/// A setter that does not throw writes as Foundation's `UserDefaults` does, over a stored value
/// it cannot read: kvd keeps the replaced value in its history, and the diagnostic says how to
/// get it back. `try set(_:for:)` still refuses.
@Suite struct ReplacingSetterTests {
    private static let name = "com.example.fonts"

    private func suite(_ store: KVMemoryStore, _ log: DiagnosticLog) -> KVDefaults {
        KVDefaults(
            suiteName: Self.name,
            configuration: .inMemory(
                store, diagnostics: { diagnostic in log.entries.withLock { $0.append(diagnostic) } })
        )!
    }

    @Test func aPropertySetterReplacesAStringItCannotReadAndSaysHowToGetItBack() throws {
        let store = KVMemoryStore()
        let log = DiagnosticLog()
        let other = suite(store, DiagnosticLog())
        other.set("huge", forKey: "fontSize")
        let settings = FontSettings(suite(store, log))
        #expect(settings.fontSize == 14)

        settings.fontSize = 18
        #expect(settings.fontSize == 18, "the property setter left the unreadable value in place")
        let history = try settings.defaults.history(for: .unreadFontSize)
        let replaced = try #require(history.dropFirst().first)
        guard case .raw(.string("huge"), _) = replaced.content else {
            Issue.record("the replaced value is not in the history: \(history.map(\.content))")
            return
        }
        let diagnostic = try #require(log.all.last(where: { $0.kind == .replacedUnreadValue }))
        #expect(diagnostic.key == "fontSize")
        #expect(diagnostic.message.contains("kvctl history \(Self.name) fontSize"), "\(diagnostic.message)")
        #expect(
            diagnostic.message.contains("kvctl restore \(Self.name) fontSize --revision \(replaced.revision)"),
            "\(diagnostic.message)")
        #expect(!log.all.contains { $0.kind == .writeFailed }, "\(log.all)")
    }

    @Test func aPropertySetterReplacesAnUnknownEnumCase() throws {
        let store = KVMemoryStore()
        let log = DiagnosticLog()
        suite(store, DiagnosticLog()).set("urgent", forKey: "priority")
        let settings = FontSettings(suite(store, log))
        #expect(settings.priority == .normal, "an unknown case reads as the fallback")
        settings.priority = .high
        #expect(settings.priority == .high)
        #expect(settings.defaults.string(forKey: "priority") == "high")
        #expect(log.all.contains { $0.kind == .replacedUnreadValue && $0.key == "priority" }, "\(log.all)")
    }

    @Test func theThrowingSetterStillRefusesAndThePlainSetterWrites() throws {
        let store = KVMemoryStore()
        let log = DiagnosticLog()
        let defaults = suite(store, log)
        defaults.set("huge", forKey: "fontSize")
        #expect {
            try defaults.set(18, for: .unreadFontSize)
        } throws: { error in
            guard case .wouldLoseStoredData(key: "fontSize", _) = error as? KVDefaultsError else { return false }
            return true
        }
        #expect(defaults.string(forKey: "fontSize") == "huge", "a refused save changed the value")
        defaults.set(18, forKey: "fontSize")
        #expect(defaults[.unreadFontSize] == 18)
    }

    /// Against a real kvd: the diagnostic's `kvctl restore` puts the replaced value back.
    @Test func theDiagnosticsRestoreCommandPutsTheReplacedValueBack() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        try daemon.connection().set(domain(Self.name), key("fontSize"), .string("huge"))
        let settings = FontSettings(daemon.suite(Self.name, log: log))
        settings.fontSize = 18
        #expect(settings.fontSize == 18)
        let message = try #require(log.all.last(where: { $0.kind == .replacedUnreadValue })?.message)
        let command = try #require(message.split(separator: "`").first { $0.hasPrefix("kvctl restore") })
        try run("kvctl", ["--socket", daemon.socket] + command.split(separator: " ").dropFirst().map(String.init))
        #expect(eventually { settings.defaults.string(forKey: "fontSize") == "huge" }, "\(command)")
    }
}
