import Foundation
import Glibc
import KVTestSupport
import KVValues
import Testing

@testable import KVClient

/// The same calls on swift-corelibs-foundation's `UserDefaults` (a uniquely named suite whose
/// file is removed afterwards: corelibs reads `$XDG_CONFIG_HOME` once per process, so the suite
/// cannot be put in a temporary folder) and on `KVDefaults` against a real kvd, compared.
@Suite(.serialized) struct FoundationParityTests {
    /// What each getter and cast returns for one stored value, rendered comparably.
    static func readings(_ d: some FoundationSpelling, _ key: String) -> [String: String] {
        let object = d.object(forKey: key)
        var readings = [
            "object": render(object),
            "as? Int": render(object as? Int), "as? Double": render(object as? Double),
            "as? Bool": render(object as? Bool),
            "as? String": render(object as? String), "as? NSNumber": render((object as? NSNumber)?.stringValue),
            "as? [String: Any]": render(object as? [String: Any]), "as? [Any]": render(object as? [Any]),
            "string": render(d.string(forKey: key)), "integer": "\(d.integer(forKey: key))",
            "float": "\(d.float(forKey: key))",
            "double": "\(d.double(forKey: key))", "bool": "\(d.bool(forKey: key))",
            "array": render(d.array(forKey: key)),
            "stringArray": render(d.stringArray(forKey: key)), "dictionary": render(d.dictionary(forKey: key)),
            "data": render(d.data(forKey: key)),
        ]
        // corelibs' url(forKey:) of a data value unarchives it and crashes on anything else.
        if !(object is Data) { readings["url"] = render(d.url(forKey: key)?.absoluteURL) }
        return readings
    }

    /// Values whose readings differ on purpose, with the getter: each is a documented difference.
    static let differences: Set<String> = [
        // A Float is stored widened to Double, as Foundation stores it: double(forKey:) is
        // Double(12.34 as Float) in both, and object(forKey:) is that Double, printing as
        // "12.34000015258789" (corelibs: a Float printing as "12.34" in the process that stored
        // it, the widened Double in any other).
        "float object", "float as? Double", "float string", "float as? NSNumber",
        "nsfloat object", "nsfloat as? Double", "nsfloat string", "nsfloat as? NSNumber",
        // A real beyond Int's range: integer(forKey:) saturates (corelibs: Int.min, what x86
        // makes of the undefined conversion).
        "big integer",
        // A URL that is not a file URL is kept whole; corelibs keeps only its path.
        "url object", "url as? String", "url string", "url url",
    ]

    nonisolated(unsafe) static let values: [(name: String, value: Any)] =
        [
            ("int", 42), ("negative", -7), ("double", 12.5), ("whole", 3.0), ("big", 1e20), ("fraction", 0.1),
            ("float", Float(12.34)), ("true", true), ("false", false),
            ("int8", Int8(3)), ("uint64", UInt64(7)), ("date", Date(timeIntervalSince1970: 1_800_000_000)),
            ("data", Data([1, 2, 3])),
            ("nsnumber", NSNumber(value: 5)), ("nsreal", NSNumber(value: 2.5)), ("nsbool", NSNumber(value: true)),
            ("nsfloat", NSNumber(value: Float(0.3))), ("nsstring", NSString(string: "ns")),
            ("nsdata", NSData(data: Data([9]))),
            ("nsdate", NSDate(timeIntervalSince1970: 100)), ("nsarray", NSArray(array: [1, "a"])),
            ("nsdictionary", NSDictionary(dictionary: ["k": 1])),
            ("url", URL(string: "https://example.com/a?b=1")!), ("fileurl", URL(fileURLWithPath: "/tmp/x")),
            ("nsurl", NSURL(fileURLWithPath: "/tmp/n")),
            ("strings", ["a", "b"]), ("mixed", ["a", 1] as [Any]), ("ints", [1, 2]),
            ("dictionary", ["x": 1.5, "y": "z"] as [String: Any]),
            ("tilde", "~/notes"), ("empty", ""),
        ]
        + [
            "42", "3.9", " 7", "-2.5e3", "1e3", ".5", "+5", "12abc", "0x10", "abc", "YES", "yes", "no", "true", "TRUE",
            "t", "Y", "N", "0", "1", "  true",
        ]
        .map { ("string \($0)", $0) }

    @Test func everyGetterConvertsEveryValueAsFoundationDoes() throws {
        let daemon = try RealDaemon()
        let name = "com.kvd-parity.p\(getpid()).conversions"
        let defaults = daemon.suite(name)
        let foundation = try #require(UserDefaults(suiteName: name))
        defer { Self.removeFoundationSuite(name) }
        for (key, value) in Self.values {
            foundation.set(value, forKey: key)
            defaults.set(value, forKey: key)
        }
        var compared = 0
        for (key, _) in Self.values {
            let expected = Self.readings(foundation, key)
            let actual = Self.readings(defaults, key)
            for (getter, reading) in expected where !Self.differences.contains("\(key) \(getter)") {
                #expect(actual[getter] == reading, "\(key): \(getter)")
                compared += 1
            }
        }
        #expect(compared > 700)
        // The documented differences, as they are.
        #expect(defaults.float(forKey: "float") == Float(12.34) && foundation.string(forKey: "float") == "12.34")
        #expect(defaults.string(forKey: "float") == "12.34000015258789")
        #expect(defaults.double(forKey: "float") == Double(Float(12.34)))
        #expect(
            defaults.url(forKey: "url") == URL(string: "https://example.com/a?b=1")
                && foundation.string(forKey: "url") == "/a")
    }

    @Test func theTypedSettersRegistrationAndPersistentDomainMatchFoundation() throws {
        let daemon = try RealDaemon()
        let name = "com.kvd-parity.p\(getpid()).setters"
        let defaults = daemon.suite(name)
        let foundation = try #require(UserDefaults(suiteName: name))
        defer { Self.removeFoundationSuite(name) }
        #expect(defaults.volatileDomainNames == foundation.volatileDomainNames)
        for suite in [foundation, defaults] as [any FoundationSpelling] {
            suite.set(7, forKey: "int")
            suite.set(2.25, forKey: "double")
            suite.set(Float(0.1), forKey: "float")
            suite.set(true, forKey: "bool")
            suite.set(URL(fileURLWithPath: "/var/tmp/file"), forKey: "file")
            suite.set(URL(fileURLWithPath: "/gone"), forKey: "gone")
            suite.register(defaults: ["registered": "yes", "int": 99])
            suite.removeObject(forKey: "double")
        }
        // corelibs' set(nil as URL?, forKey:) calls itself forever; its removeObject does what it means.
        foundation.removeObject(forKey: "gone")
        defaults.set(nil as URL?, forKey: "gone")
        for key in ["int", "double", "float", "bool", "file", "gone", "registered"] {
            let expected = Self.readings(foundation, key)
            let actual = Self.readings(defaults, key)
            for (getter, reading) in expected where !Self.differences.contains("\(key) \(getter)") {
                #expect(actual[getter] == reading, "\(key): \(getter)")
            }
        }
        #expect(foundation.synchronize() && defaults.synchronize())
        let stored = try #require(defaults.persistentDomain(forName: name))
        let foundationStored = try #require(foundation.persistentDomain(forName: name))
        #expect(render(stored.filter { $0.key != "float" }) == render(foundationStored.filter { $0.key != "float" }))
        #expect(Set(stored.keys) == ["int", "float", "bool", "file"])
    }

    /// A typed key stores a `Float` as the decimal it prints as (``Coercion/decimal(_:)``); a
    /// Foundation-shaped setter widens it as Foundation does. Either reads back as the same `Float`.
    @Test func aFloatReadsBackAsTheSameFloat() throws {
        var generator = SeededGenerator.forTest()
        for _ in 0..<100_000 {
            let float = Float(bitPattern: generator.next())
            guard float.isFinite else { continue }
            let stored = Coercion.decimal(float)
            #expect(Float(stored) == float, "\(float)")
            // The stored Double is the decimal the Float prints as (unless that decimal, read as
            // a Double, would round to another Float: then the Float's exact value).
            let printed = try #require(Double(String(float)))
            #expect(stored == (Float(printed) == float ? printed : Double(float)), "\(float)")
        }
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.float")
        defaults.set(Float(12.34), forKey: "price")
        try defaults.set(Float(12.34), for: KVDefaults.Key<Float>("typed", default: 0))
        #expect(defaults.float(forKey: "price") == Float(12.34) && defaults.float(forKey: "typed") == Float(12.34))
        #expect(defaults.string(forKey: "price") == "12.34000015258789" && defaults.string(forKey: "typed") == "12.34")
        let connection = try daemon.connection()
        #expect(try connection.get(domain("com.example.float"), key("price")).value == .real(Double(Float(12.34))))
        #expect(try connection.get(domain("com.example.float"), key("typed")).value == .real(12.34))
    }

    /// Whatever way a `Float` comes in through the Foundation-shaped API, it is stored widened
    /// to `Double`, so `double(forKey:)` reads `12.34000015258789` as Foundation's does; a typed
    /// key keeps the decimal, `12.34`.
    @Test func aFloatIsWidenedAsFoundationDoesWhicheverWayItComesIn() throws {
        let daemon = try RealDaemon()
        let defaults = daemon.suite("com.example.floats")
        defaults.set(Float(12.34), forKey: "typed setter")
        defaults.set(Float(12.34) as Any?, forKey: "as Any")
        defaults.set(NSNumber(value: Float(12.34)), forKey: "NSNumber")
        defaults.set([Float(12.34)], forKey: "in an array")
        defaults.set(["price": Float(12.34)], forKey: "in a dictionary")
        try defaults.set(Float(12.34), for: KVDefaults.Key<Float>("typed key", default: 0))
        let widened = Double(Float(12.34))
        for key in ["typed setter", "as Any", "NSNumber"] {
            #expect(defaults.double(forKey: key) == widened, "\(key)")
            #expect(defaults.float(forKey: key) == Float(12.34), "\(key)")
        }
        #expect(defaults.double(forKey: "typed key") == 12.34 && defaults.string(forKey: "typed key") == "12.34")
        #expect(defaults.array(forKey: "in an array") as? [Double] == [widened])
        #expect(defaults.dictionary(forKey: "in a dictionary")?["price"] as? Double == widened)
        defaults.setPersistentDomain(["price": Float(12.34)], forName: "com.example.floats.other")
        #expect(defaults.persistentDomain(forName: "com.example.floats.other")?["price"] as? Double == widened)
        defaults.register(defaults: ["registered": Float(12.34)])
        #expect(defaults.double(forKey: "registered") == widened)
    }

    /// swift-corelibs-foundation's `TestUserDefaults.test_setValue_DoubleFromFloat`: a `Float`
    /// set through the `UserDefaults`-shaped API reads back through `double(forKey:)` as the
    /// `Float` widened (12.34000015258789), as in Foundation; a typed key keeps the decimal.
    @Test func setValueDoubleFromFloatAsFoundationDoes() throws {
        let name = "com.kvd-parity.p\(getpid()).doubleFromFloat"
        let foundation = try #require(UserDefaults(suiteName: name))
        defer { Self.removeFoundationSuite(name) }
        let defaults = try #require(KVDefaults(suiteName: name, configuration: .inMemory()))
        for suite in [foundation, defaults] as [any FoundationSpelling] {
            suite.set(12.34 as Float, forKey: "A")
            suite.set(12.34 as Float as Any?, forKey: "B")
            suite.set(NSNumber(value: 12.34 as Float), forKey: "C")
        }
        let widened = Double(12.34 as Float)
        for key in ["A", "B", "C"] {
            #expect(foundation.double(forKey: key) == widened, "corelibs \(key)")
            #expect(defaults.double(forKey: key) == widened, "\(key)")
            #expect(defaults.float(forKey: key) == 12.34 as Float, "\(key)")
        }
        try defaults.set(12.34 as Float, for: KVDefaults.Key<Float>("typed", default: 0))
        #expect(defaults.double(forKey: "typed") == 12.34, "a typed key keeps the decimal")
    }

    @Test func constantsAndNotificationNameAreFoundations() {
        #expect(KVDefaults.globalDomain == UserDefaults.globalDomain)
        #expect(KVDefaults.argumentDomain == UserDefaults.argumentDomain)
        #expect(KVDefaults.registrationDomain == UserDefaults.registrationDomain)
        #expect(KVDefaults.didChangeNotification == UserDefaults.didChangeNotification)
        #expect(KVDefaults().suiteName == KVDefaults.standard.suiteName)
        KVDefaults.resetStandardUserDefaults()
        #expect(KVDefaults.standard.suiteName == ProcessFacts.executableDomain().name)
    }

    /// corelibs keeps a suite's values in `$XDG_CONFIG_HOME` (or `~/.config`) as `NAME.plist`.
    static func removeFoundationSuite(_ name: String) {
        UserDefaults.standard.removePersistentDomain(forName: name)
        let environment = ProcessInfo.processInfo.environment
        let folder =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (environment["HOME"] ?? "/")
            + "/.config"
        try? FileManager.default.removeItem(atPath: folder + "/" + name + ".plist")
    }
}

/// The members `UserDefaults` and `KVDefaults` share, with Foundation's names and types: both
/// conform with empty extensions, so a difference in a name or a type fails the build.
protocol FoundationSpelling: AnyObject {
    /// `UserDefaults` for `UserDefaults`, `KVDefaults` for `KVDefaults`.
    associatedtype Standard: FoundationSpelling
    func object(forKey defaultName: String) -> Any?
    func string(forKey defaultName: String) -> String?
    func integer(forKey defaultName: String) -> Int
    func float(forKey defaultName: String) -> Float
    func double(forKey defaultName: String) -> Double
    func bool(forKey defaultName: String) -> Bool
    func url(forKey defaultName: String) -> URL?
    func array(forKey defaultName: String) -> [Any]?
    func stringArray(forKey defaultName: String) -> [String]?
    func dictionary(forKey defaultName: String) -> [String: Any]?
    func data(forKey defaultName: String) -> Data?
    func set(_ value: Any?, forKey defaultName: String)
    func set(_ value: Int, forKey defaultName: String)
    func set(_ value: Float, forKey defaultName: String)
    func set(_ value: Double, forKey defaultName: String)
    func set(_ value: Bool, forKey defaultName: String)
    func set(_ url: URL?, forKey defaultName: String)
    func removeObject(forKey defaultName: String)
    func register(defaults registrationDictionary: [String: Any])
    func addSuite(named suiteName: String)
    func removeSuite(named suiteName: String)
    func dictionaryRepresentation() -> [String: Any]
    var volatileDomainNames: [String] { get }
    func volatileDomain(forName domainName: String) -> [String: Any]
    func setVolatileDomain(_ domain: [String: Any], forName domainName: String)
    func removeVolatileDomain(forName domainName: String)
    func persistentDomain(forName domainName: String) -> [String: Any]?
    func setPersistentDomain(_ domain: [String: Any], forName domainName: String)
    func removePersistentDomain(forName domainName: String)
    @discardableResult func synchronize() -> Bool
    func objectIsForced(forKey key: String) -> Bool
    func objectIsForced(forKey key: String, inDomain domain: String) -> Bool
    static var standard: Standard { get }
    static func resetStandardUserDefaults()
    static var didChangeNotification: NSNotification.Name { get }
    static var globalDomain: String { get }
    static var argumentDomain: String { get }
    static var registrationDomain: String { get }
}

extension UserDefaults: FoundationSpelling {}
extension KVDefaults: FoundationSpelling {}

/// A value as type and contents, with optionals unwrapped and dictionaries sorted, so that
/// corelibs' `[Optional<Any>]` and KVClient's `[Any]` of the same values render the same.
func render(_ value: Any?) -> String {
    guard let value else { return "nil" }
    let mirror = Mirror(reflecting: value)
    if mirror.displayStyle == .optional { return mirror.children.first.map { render($0.value) } ?? "nil" }
    if let array = value as? [Any] { return "[" + array.map { render($0) }.joined(separator: ", ") + "]" }
    if let dictionary = value as? [AnyHashable: Any] {
        let members = dictionary.map { "\($0.key): \(render($0.value))" }.sorted()
        return "[" + members.joined(separator: ", ") + "]"
    }
    return "\(type(of: value)) \(value)"
}
