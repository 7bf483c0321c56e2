import Foundation
import Glibc
import KVValues
import Synchronization
import Testing

@testable import KVClient

/// Counts `didChangeNotification`s whose object is one suite object.
final class ChangeCounter: @unchecked Sendable {
    private final class Count: Sendable { let value = Mutex(0) }
    private let count = Count()
    private var token: (any NSObjectProtocol)?
    var value: Int { count.value.withLock { $0 } }

    init(_ defaults: AnyObject, name: NSNotification.Name = KVDefaults.didChangeNotification) {
        token = NotificationCenter.default.addObserver(forName: name, object: defaults, queue: nil) { [count] _ in
            count.value.withLock { $0 += 1 }
        }
    }

    deinit { token.map(NotificationCenter.default.removeObserver) }
}

/// Persistent and volatile domains, suites and `didChangeNotification`, with Foundation's
/// spelling, against a real kvd (and corelibs' `UserDefaults` where it behaves the same).
@Suite(.serialized) struct DomainsAndNotificationTests {
    @Test func eachChangeThroughTheSuitePostsOneNotification() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.notify")
        let counter = ChangeCounter(defaults)
        #expect(defaults.string(forKey: "theme") == nil)  // starts the watch, which must not announce own writes again
        defaults.set("dark", forKey: "theme")
        #expect(counter.value == 1, "set")
        defaults.set(Float(1.5), forKey: "size")
        defaults.set(true, forKey: "flag")
        #expect(counter.value == 3, "set(Float), set(Bool)")
        defaults.removeObject(forKey: "theme")
        #expect(counter.value == 4, "removeObject of a stored key")
        defaults.removeObject(forKey: "theme")
        #expect(counter.value == 4, "removing a missing key changes nothing")
        defaults.set("x", forKey: "")
        #expect(counter.value == 4, "a refused write changes nothing")
        defaults.register(defaults: ["a": 1])
        defaults.setVolatileDomain(["b": 2], forName: "Scratch")
        #expect(counter.value == 4, "volatile domains are not changes (as in Foundation)")
        defaults.setPersistentDomain(["p": 1, "q": 2, "r": 3], forName: "com.example.notify")
        #expect(counter.value == 5, "setPersistentDomain posts once")
        defaults.removePersistentDomain(forName: "com.example.notify")
        #expect(counter.value == 6, "removePersistentDomain posts once")
        try defaults.apply { batch in
            batch.write(.integer(1), forKey: "x")
            batch.write(.integer(2), forKey: "y")
        }
        #expect(counter.value == 7, "a batch posts once")
        try defaults.set(0.5, for: .quality)
        try defaults.reset(.quality)
        #expect(counter.value == 9, "a typed set and a reset post once each")
        // Nothing more arrives from the watch for these own writes: a change by another process,
        // which the watch delivers after them, is the tenth notification and the last.
        try daemon.connection().set(domain("com.example.notify"), key("sentinel"), .integer(1))
        #expect(eventually { counter.value >= 10 })
        #expect(counter.value == 10, "the watch announced an own write again")
        // A suite that has not read yet (no watch) announces its own writes all the same.
        let unread = daemon.suite("com.example.notify")
        let unreadCounter = ChangeCounter(unread)
        try unread.set(0.25, for: .quality)
        unread.set(1, forKey: "n")
        #expect(unreadCounter.value == 2)
    }

    @Test func aChangeByAnotherProcessPostsOneNotification() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.external")
        let counter = ChangeCounter(defaults)
        #expect(defaults.string(forKey: "theme") == nil)  // the first read starts the watch
        try daemon.connection().set(domain("com.example.external"), key("theme"), .string("dark"))
        #expect(eventually { counter.value == 1 })
        try daemon.connection().set(domain("NSGlobalDomain"), key("lang"), .string("fr"))
        #expect(eventually { counter.value == 2 }, "NSGlobalDomain is read by the suite")
        try daemon.connection().set(domain("com.example.unrelated"), key("k"), .integer(1))
        // A change of the suite's own domain after it: the third notification and the last.
        try daemon.connection().set(domain("com.example.external"), key("sentinel"), .integer(1))
        #expect(eventually { counter.value >= 3 })
        #expect(counter.value == 3, "a domain the suite does not read")
    }

    @Test func loadingTheStoredValuesIsNotAChange() throws {
        let daemon = try RealDaemon()
        try daemon.connection().set(domain("com.example.load"), key("theme"), .string("dark"))
        try daemon.connection().set(domain("NSGlobalDomain"), key("lang"), .string("fr"))
        let defaults = daemon.suite("com.example.load")
        let counter = ChangeCounter(defaults)
        #expect(defaults.string(forKey: "theme") == "dark" && defaults.string(forKey: "lang") == "fr")
        // One change of each domain read, which each watch delivers after its first snapshot:
        // two notifications and no more.
        try daemon.connection().set(domain("com.example.load"), key("sentinel"), .integer(1))
        try daemon.connection().set(domain("NSGlobalDomain"), key("sentinel"), .integer(1))
        #expect(eventually { counter.value >= 2 })
        #expect(counter.value == 2, "the first snapshot of the watch was announced as a change")
    }

    @Test func foundationPostsOncePerPersistentDomainCall() throws {
        let name = "com.kvd-parity.p\(getpid()).notify"
        let foundation = try #require(UserDefaults(suiteName: name))
        defer { FoundationParityTests.removeFoundationSuite(name) }
        let counter = ChangeCounter(foundation, name: UserDefaults.didChangeNotification)
        foundation.setPersistentDomain(["p": 1, "q": 2], forName: name)
        foundation.removePersistentDomain(forName: name)
        foundation.register(defaults: ["a": 1])
        #expect(
            counter.value == 2, "corelibs posts once per persistent-domain call, and not for the registration domain")
    }

    @Test func setPersistentDomainReplacesTheDomainInOneCommit() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.persist")
        let other = domain("com.example.other")
        let connection = try daemon.connection()
        try connection.set(other, key("old"), .integer(1))
        try connection.set(other, key("keep"), .integer(1))
        let before = try connection.list(other).revision
        defaults.setPersistentDomain(["keep": 2, "new": "n", "price": Float(9.99)], forName: "com.example.other")
        let after = try connection.list(other)
        let price = Value.real(Double(Float(9.99)))  // widened, as Foundation stores a Float
        #expect(after.values == [key("keep"): .integer(2), key("new"): .string("n"), key("price"): price])
        #expect(after.revision == before + 1, "one commit, not one per key")
        let read = try #require(defaults.persistentDomain(forName: "com.example.other"))
        #expect(read.count == 3 && read["keep"] as? Int == 2 && read["new"] as? String == "n")
        #expect(
            defaults.persistentDomain(forName: "com.example.never")?.isEmpty == true,
            "a domain with nothing stored is empty, as in corelibs")
        #expect(defaults.persistentDomain(forName: "not a domain") == nil)
        defaults.removePersistentDomain(forName: "com.example.other")
        #expect(try !connection.domains().contains(other), "the domain is gone")
        // Its own domain: the suite reads the new values at once.
        defaults.set("gone", forKey: "stale")
        defaults.setPersistentDomain(["fresh": true], forName: "com.example.persist")
        #expect(defaults.object(forKey: "stale") == nil && defaults.bool(forKey: "fresh"))
    }

    @Test func aPersistentDomainWithABadValueWritesNothing() throws {
        let daemon = try RealDaemon()
        let log = DiagnosticLog()
        let defaults = daemon.suite("com.example.badpersist", log: log)
        defaults.set(1, forKey: "a")
        defaults.setPersistentDomain(["b": 2, "c": NSObject()], forName: "com.example.badpersist")
        #expect(defaults.integer(forKey: "a") == 1 && defaults.object(forKey: "b") == nil)
        #expect(log.all.contains { $0.kind == .writeFailed && $0.message.contains("not a property-list value") })
        #expect(throws: KVDefaultsError.self) { try defaults.writePersistentDomain([:], forName: "not a domain") }
    }

    @Test func volatileDomainsBehaveAsInFoundation() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.volatile", arguments: ["app", "-fromArgs", "7"])
        #expect(defaults.volatileDomainNames == [KVDefaults.argumentDomain])
        defaults.set("stored", forKey: "k")
        defaults.setVolatileDomain(["k": "volatile", "v": 1], forName: "Scratch")
        #expect(
            defaults.string(forKey: "k") == "stored" && defaults.object(forKey: "v") == nil,
            "other volatile domains are not searched")
        defaults.setVolatileDomain(["w": 2], forName: "Scratch")
        #expect(defaults.volatileDomain(forName: "Scratch").count == 3, "setVolatileDomain merges, as corelibs does")
        defaults.setVolatileDomain(["k": "argument"], forName: KVDefaults.argumentDomain)
        #expect(defaults.string(forKey: "k") == "argument" && defaults.integer(forKey: "fromArgs") == 7)
        defaults.setVolatileDomain(["r": "registered"], forName: KVDefaults.registrationDomain)
        #expect(defaults.string(forKey: "r") == "registered")
        #expect(defaults.volatileDomainNames == [KVDefaults.argumentDomain, KVDefaults.registrationDomain, "Scratch"])
        defaults.removeVolatileDomain(forName: "Scratch")
        defaults.removeVolatileDomain(forName: KVDefaults.argumentDomain)
        #expect(defaults.string(forKey: "k") == "stored")
        #expect(defaults.volatileDomain(forName: "Scratch").isEmpty)
        #expect(defaults.dictionaryRepresentation()["r"] as? String == "registered")

        let plain = daemon.suite("com.example.volatile", arguments: ["app"])
        #expect(plain.string(forKey: "k") == "stored")
        plain.setVolatileDomain(["k": "argument"], forName: KVDefaults.argumentDomain)
        #expect(
            plain.string(forKey: "k") == "argument", "an argument domain set after the first read is searched first")
    }

    @Test func addedSuitesAreSearchedAfterTheSuiteAndBeforeTheGlobalDomain() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.app")
        let connection = try daemon.connection()
        try connection.set(domain("com.example.shared"), key("a"), .string("shared"))
        try connection.set(domain("com.example.shared"), key("b"), .string("shared"))
        try connection.set(domain("NSGlobalDomain"), key("b"), .string("global"))
        try connection.set(domain("com.example.app"), key("a"), .string("app"))
        #expect(defaults.string(forKey: "b") == "global")
        defaults.addSuite(named: "com.example.shared")
        #expect(defaults.string(forKey: "a") == "app" && defaults.string(forKey: "b") == "shared")
        #expect(defaults.dictionaryRepresentation()["b"] as? String == "shared")
        defaults.removeSuite(named: "com.example.shared")
        #expect(defaults.string(forKey: "b") == "global")
    }
}
