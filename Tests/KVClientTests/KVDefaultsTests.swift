import Foundation
import Glibc
import KVValues
import Synchronization
import Testing

@testable import KVClient

extension KVDefaults.Keys {
    static let quality = Key<Double>("quality", default: 0.8)
    static let nickname = Key<String?>("nickname", default: nil)
    static let templates = Key<[WatermarkTemplate]>("templates", default: [])
    static let favorite = Key<WatermarkTemplate?>("favorite", default: nil)
    static let habits = Key<[Habit]>("Habits", default: [])
}

/// KVDefaults against the real kvd, in this process.
@Suite(.serialized) struct KVDefaultsTests {
    @Test func foundationGettersReadWhatSettersWrote() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.foundation")
        let when = Date(timeIntervalSince1970: 1_800_000_000.25)
        defaults.set("dark", forKey: "theme")
        defaults.set(42, forKey: "count")
        defaults.set(0.5, forKey: "ratio")
        defaults.set(true, forKey: "enabled")
        defaults.set(when, forKey: "when")
        defaults.set(Data([1, 2, 3]), forKey: "blob")
        defaults.set(["a", 1, true] as [Any], forKey: "list")
        defaults.set(["x": 1, "y": ["z"]] as [String: Any], forKey: "map")
        #expect(defaults.string(forKey: "theme") == "dark")
        #expect(defaults.integer(forKey: "count") == 42)
        #expect(defaults.double(forKey: "ratio") == 0.5)
        #expect(defaults.bool(forKey: "enabled"))
        #expect(defaults.object(forKey: "when") as? Date == when)
        #expect(defaults.data(forKey: "blob") == Data([1, 2, 3]))
        #expect(defaults.array(forKey: "list")?.count == 3)
        #expect(defaults.dictionary(forKey: "map")?["x"] as? Int == 1)
        #expect(defaults.value(forKey: "map") == .dictionary(["x": .integer(1), "y": .array([.string("z")])]))
        // What kvd stored is exactly the typed value (another connection reads it).
        #expect(try daemon.connection().get(domain("com.example.foundation"), key("count")).value == .integer(42))
        defaults.removeObject(forKey: "theme")
        #expect(defaults.string(forKey: "theme") == nil)
    }

    @Test func gettersConvertTypesLikeFoundation() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.coerce")
        try defaults.write("42", forKey: "text42")
        try defaults.write(7, forKey: "seven")
        try defaults.write("YES", forKey: "yes")
        try defaults.write(3.9, forKey: "real")
        #expect(defaults.integer(forKey: "text42") == 42)
        #expect(defaults.string(forKey: "seven") == "7")
        #expect(defaults.double(forKey: "seven") == 7)
        #expect(defaults.bool(forKey: "yes"))
        #expect(defaults.bool(forKey: "seven"))
        #expect(defaults.integer(forKey: "real") == 3)
        #expect(defaults.integer(forKey: "missing") == 0)
        #expect(!defaults.bool(forKey: "missing"))
        #expect(defaults.stringArray(forKey: "seven") == nil)
    }

    @Test func searchOrderIsArgumentsSuiteGlobalRegistration() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite(
            "com.example.order", arguments: ["app", "-fromArgs", "7", "--flag", "-list", "(a, b)"])
        defaults.register(defaults: ["fromArgs": 1, "fromGlobal": 1, "fromSuite": 1, "onlyRegistered": "preset"])
        let global = daemon.suite("NSGlobalDomain")
        try global.write("global", forKey: "fromGlobal")
        try global.write("global", forKey: "fromSuite")
        try defaults.write("suite", forKey: "fromSuite")
        try defaults.write("suite", forKey: "fromArgs")
        #expect(defaults.synchronize())
        #expect(defaults.integer(forKey: "fromArgs") == 7)
        #expect(defaults.string(forKey: "fromArgs") == "7")
        #expect(defaults.value(forKey: "list") == .array([.string("a"), .string("b")]))
        #expect(defaults.string(forKey: "fromSuite") == "suite")
        #expect(defaults.string(forKey: "fromGlobal") == "global")
        #expect(defaults.string(forKey: "onlyRegistered") == "preset")
        let all = defaults.valuesBySearchOrder()
        #expect(all["fromArgs"] == .string("7"))
        #expect(all["onlyRegistered"] == .string("preset"))
        // The registration domain is never written to kvd.
        let stored = try daemon.connection().list(domain("com.example.order")).values
        #expect(stored[key("onlyRegistered")] == nil)
    }

    @Test func typedKeysReadDefaultsAndWrittenValues() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.typed", log: log)
        #expect(defaults[.quality] == 0.8)
        try defaults.set(0.25, for: .quality)
        #expect(defaults[.quality] == 0.25)
        try defaults.set("Ann", for: .nickname)
        #expect(defaults[.nickname] == "Ann")
        try defaults.set(nil, for: .nickname)
        #expect(defaults[.nickname] == nil)
        #expect(defaults.value(forKey: "nickname") == nil)
        try defaults.write("not a number", forKey: "quality")
        #expect(defaults[.quality] == 0.8)
        #expect(log.all.map(\.kind) == [.undecodable])
        try defaults.reset(.quality)
        #expect(defaults[.quality] == 0.8)
    }

    @Test func typedKeyParsesAnArgumentAsTypedJSON() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.args", arguments: ["app", "-quality", "0.5"])
        #expect(defaults[.quality] == 0.5)
    }

    @Test func aNewerStoredVersionIsNeverOverwritten() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.downgrade", log: log)
        let newer = try stored(
            #"{"schemaVersion": 3, "name": "From the future", "text": "t", "relativeSize": 0.1, "shadow": true}"#)
        try daemon.connection().set(domain("com.example.downgrade"), key("favorite"), newer)
        #expect(defaults[.favorite] == nil)
        #expect(log.all.map(\.kind) == [.newerSchema(stored: 3, known: 2)])
        let error = #expect(throws: KVDefaultsError.self) {
            try defaults.set(WatermarkTemplate(name: "Mine", text: "t", relativeSize: 0.2), for: .favorite)
        }
        // One error for every save that would lose stored data, this case included; the report says
        // a newer version wrote it.
        guard case .wouldLoseStoredData(key: "favorite", let report)? = error else {
            Issue.record("not refused for the newer version: \(String(describing: error))")
            return
        }
        #expect(report.newerVersion == 3 && report.readDefault)
        #expect(defaults.read(.favorite).report.newerVersion == 3, "reads after the failed save say what is stored")
        #expect(try daemon.connection().get(domain("com.example.downgrade"), key("favorite")).value == newer)
        // On purpose: reset, then write.
        try defaults.reset(.favorite)
        try defaults.set(WatermarkTemplate(name: "Mine", text: "t", relativeSize: 0.2), for: .favorite)
        #expect(defaults[.favorite]?.name == "Mine")
    }

    @Test func savingAnArrayKeepsTheElementsItCouldNotRead() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.lenient", log: DiagnosticLog())
        let original = try stored(
            """
            [{"name": "Shop", "text": "@myshop", "pointSize": 54},
             {"name": "Broken", "text": 42},
             {"schemaVersion": 3, "name": "New", "text": "t", "relativeSize": 0.1}]
            """)
        try daemon.connection().set(domain("com.example.lenient"), key("templates"), original)
        var templates = defaults[.templates]
        #expect(templates.map(\.name) == ["Shop"])
        templates.append(WatermarkTemplate(name: "Added", text: "t", relativeSize: 0.02))
        // Keeping them is asked for; a plain save refuses and changes nothing.
        #expect(throws: KVDefaultsError.self) { try defaults.set(templates, for: .templates) }
        #expect(try daemon.connection().get(domain("com.example.lenient"), key("templates")).value == original)
        try defaults.set(templates, for: .templates, unread: .keep)
        guard
            case .array(let elements) = try daemon.connection().get(domain("com.example.lenient"), key("templates"))
                .value
        else {
            Issue.record("not an array")
            return
        }
        #expect(elements.count == 4)
        #expect(elements[2] == (try stored(#"{"name": "Broken", "text": 42}"#)))
        #expect(elements[3] == (try stored(#"{"schemaVersion": 3, "name": "New", "text": "t", "relativeSize": 0.1}"#)))
        guard case .dictionary(let shop) = elements[0] else {
            Issue.record("the migrated element is not a dictionary: \(elements[0])")
            return
        }
        #expect(shop["schemaVersion"] == .integer(2), "the migrated element is stored as the current version")
        #expect(defaults[.templates].map(\.name) == ["Shop", "Added"])
    }

    @Test func aDataBlobFromUserDefaultsIsReadAndStoredAsTypedJSONOnSave() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.habits")
        try daemon.connection().set(domain("com.example.habits"), key("Habits"), .data(Data(habitsV01JSON.utf8)))
        var habits = defaults[.habits]
        #expect(habits.count == 9)
        habits[0].timesDone += 1
        try defaults.set(habits, for: .habits)
        guard
            case .array(let elements) = try daemon.connection().get(domain("com.example.habits"), key("Habits")).value,
            case .dictionary(let first) = elements.first
        else {
            Issue.record("not stored as a typed array")
            return
        }
        #expect(elements.count == 9)
        #expect(first["schemaVersion"] == .integer(2))
        #expect(first["timesDone"] == .integer(3))
        #expect(first["started"] == .date(Date(timeIntervalSinceReferenceDate: 687741044.36479199)))
    }

    @Test func writesAreSeenAtOnceHereAndSoonByAnotherSuite() throws {
        let daemon = try RealDaemon()
        let writer = daemon.suite("com.example.coherent")
        let reader = daemon.suite("com.example.coherent")
        #expect(reader.string(forKey: "k") == nil)  // starts the reader's watch
        for round in 0..<20 {
            try writer.write("v\(round)", forKey: "k")
            #expect(writer.string(forKey: "k") == "v\(round)", "read-your-writes")
            #expect(eventually { reader.string(forKey: "k") == "v\(round)" })
        }
        try writer.write(nil as Value?, forKey: "k")
        #expect(eventually { reader.string(forKey: "k") == nil })
    }

    @Test func hotReadsDoNoIPC() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.hot")
        try defaults.write("fast", forKey: "k")
        #expect(defaults.string(forKey: "k") == "fast")
        daemon.signal(SIGSTOP)  // kvd cannot answer anything now
        defer { daemon.signal(SIGCONT) }
        // A read that asked kvd would wait for it forever: read on another thread, give up after 5 s.
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var last: String?
        Thread.detachNewThread {
            for _ in 0..<10_000 { _ = defaults.string(forKey: "k") }
            last = defaults.string(forKey: "k")
            done.signal()
        }
        guard done.wait(timeout: .now() + 5) == .success else {
            Issue.record("10,000 cached reads did not finish within 5 s while kvd was stopped: a read waits for kvd")
            daemon.signal(SIGCONT)
            _ = done.wait(timeout: .now() + 10)
            return
        }
        #expect(last == "fast")
    }

    @Test func updatesYieldTheCurrentValueThenEachChange() async throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.updates")
        let other = daemon.suite("com.example.updates")
        try other.set(0.1, for: .quality)
        var iterator = defaults.updates(.quality).makeAsyncIterator()
        #expect(await iterator.next() == 0.1)
        try other.set(0.2, for: .quality)
        #expect(await iterator.next() == 0.2)
        try other.reset(.quality)
        #expect(await iterator.next() == 0.8)
    }

    @Test func cacheAndObserversCatchUpAcrossADaemonRestart() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.restart", log: DiagnosticLog())
        try defaults.write("before", forKey: "k")
        let seen = Mutex<[Value?]>([])
        let observation = defaults.observe("k") { value in seen.withLock { $0.append(value) } }
        daemon.stop()
        // Changed while the suite's kvd is down: a kvd on another socket, same state.
        let other = daemon.root + "/other.sock"
        try daemon.start(socket: other)
        try daemon.connection(socket: other).set(domain("com.example.restart"), key("k"), .string("meanwhile"))
        try daemon.connection(socket: other).set(domain("com.example.restart"), key("gone"), .integer(1))
        try daemon.connection(socket: other).delete(domain("com.example.restart"), key("gone"))
        daemon.stop()
        try daemon.start()
        #expect(eventually(10) { defaults.string(forKey: "k") == "meanwhile" })
        #expect(eventually { seen.withLock { $0 } == [.string("meanwhile")] })
        try daemon.connection().set(domain("com.example.restart"), key("k"), .string("after"))
        #expect(eventually { defaults.string(forKey: "k") == "after" })
        #expect(eventually { seen.withLock { $0 } == [.string("meanwhile"), .string("after")] })
        observation.cancel()
        try defaults.write("written by me", forKey: "k")
        #expect(seen.withLock { $0 }.count == 2)
    }
}
