import FoundationEssentials
import KVClient
import KVValues
import Synchronization

extension KVDefaults.Keys {
    /// The habit list: read from any version (a v0.1 data value too), written as v2.
    public static let habits = Key<[Habit]>(HabitStore.key, default: [])
}

/// The habit list in kvd: reads it (reporting what it cannot read), and writes it back only
/// when doing so loses nothing.
///
/// A stored element that cannot be read (damaged, or from a newer version) is left out of the
/// list with a warning and stays stored: KVClient appends it back when the list is saved. A
/// stored list that this version must not rewrite (an element or the whole list from a newer
/// version, or a value that is not a list at all) is left untouched: ``save(_:)`` refuses, and
/// says why.
public final class HabitStore: Sendable {
    public static let domain = "com.example.habits"
    public static let key = "Habits"

    let defaults: KVDefaults
    /// The socket this store talks to, for messages.
    public let socketPath: String
    private let diagnostics = DiagnosticLog()

    public init(socketPath: String?, environment: [String: String]) {
        self.socketPath = SocketPath.resolve(explicit: socketPath, environment: environment)
        let configuration = KVDefaults.Configuration(
            socketPath: self.socketPath, environment: environment, arguments: [],
            diagnostics: { [diagnostics] diagnostic in diagnostics.append(diagnostic) })
        defaults = KVDefaults(suiteName: Self.domain, configuration: configuration)!
    }

    /// The readable habits, in stored order, and a warning for each stored element left out.
    public func load() throws(HabitsError) -> (habits: [Habit], warnings: [String]) {
        guard defaults.synchronize() else { throw .failure(unreachable) }
        let shape = StoredShape(defaults.value(forKey: Self.key))
        switch shape {
        case .newerList(let version):
            throw .failure("the stored habit list was written by a newer version of habits (schema version \(version); this one knows up to \(Habit.schemaVersion)), so it is left untouched; update habits to use it")
        case .other(let what):
            throw .failure("\(Self.domain) \"\(Self.key)\" holds \(what), not a list of habits, so it is left untouched; see it with `kvctl get \(Self.domain) \(Self.key)` and remove it with `kvctl delete \(Self.domain) \(Self.key)` to start afresh")
        case .absent, .list:
            break
        }
        let habits = defaults[.habits]
        let skipped = diagnostics.drain()
        let warnings = skipped.compactMap { diagnostic -> String? in
            switch diagnostic.kind {
            case .skippedElement(let index): return Self.warning(index: index, diagnostic.message, shape)
            case .unavailable: return nil
            default: return "warning: " + diagnostic.message
            }
        }
        return (habits, warnings)
    }

    /// Stores `habits` as v2, keeping the stored elements it could not read; refuses when the
    /// stored list holds an element of a newer version (or is not a list), leaving it untouched.
    public func save(_ habits: [Habit]) throws(HabitsError) {
        if case .list(let elements) = StoredShape(defaults.value(forKey: Self.key)),
            let newer = elements.enumerated().first(where: { ($0.element.version ?? 0) > Habit.schemaVersion })
        {
            let name = newer.element.name.map { " (\"\($0)\")" } ?? ""
            throw .failure("habit #\(newer.offset + 1)\(name) in the stored list was written by a newer version of habits (schema version \(newer.element.version!); this one knows up to \(Habit.schemaVersion)), so habits will not rewrite the list and changed nothing; update habits to make changes")
        }
        do {
            try defaults.set(habits, for: .habits)
        } catch .newerVersionStored(_, let stored, let known) {
            throw .failure("the stored habit list was written by a newer version of habits (schema version \(stored); this one knows up to \(known)), so it is left untouched; update habits to make changes")
        } catch .client(let error) {
            if case .cannotConnect = error { throw .failure(unreachable) }
            throw .failure("the change was not stored: \(error)")
        } catch {
            throw .failure("the change was not stored: \(error)")
        }
    }

    var unreachable: String {
        "cannot reach kvd at \(socketPath) (is it running?); start it with `systemctl --user start kvd.socket` or by running `kvd`, or give its socket with --socket PATH"
    }

    private static func warning(index: Int, _ message: String, _ shape: StoredShape) -> String {
        var element = StoredShape.Element(name: nil, version: nil, problem: nil)
        if case .list(let elements) = shape, elements.indices.contains(index) { element = elements[index] }
        let which = "stored habit #\(index + 1)" + (element.name.map { " (\"\($0)\")" } ?? "")
        if let version = element.version, version > Habit.schemaVersion {
            return "warning: \(which) was written by a newer version of habits (schema version \(version); this one knows up to \(Habit.schemaVersion)); it is not shown, and habits will not change the list until it is updated"
        }
        // KVClient says "element N skipped: REASON; it stays stored ..."; keep the REASON.
        var reason = message
        if let problem = element.problem { return "warning: \(which) cannot be read (\(problem)); it is not shown, stays stored as it is, and is kept when habits saves the list" }
        if let start = reason.firstRange(of: "skipped: ") { reason = String(reason[start.upperBound...]) }
        if let end = reason.firstRange(of: "; it stays stored") { reason = String(reason[..<end.lowerBound]) }
        return "warning: \(which) cannot be read (\(reason)); it is not shown, stays stored as it is, and is kept when habits saves the list"
    }
}

/// The diagnostics of KVClient, kept to be reported in habits' own words.
final class DiagnosticLog: Sendable {
    private let entries = Mutex<[KVDiagnostic]>([])

    func append(_ diagnostic: KVDiagnostic) { entries.withLock { $0.append(diagnostic) } }

    /// The diagnostics so far, removed from the log.
    func drain() -> [KVDiagnostic] {
        entries.withLock { entries in
            defer { entries.removeAll() }
            return entries
        }
    }
}

/// What is stored under `Habits`, as far as deciding whether it may be rewritten.
enum StoredShape {
    struct Element {
        var name: String?
        var version: Int?
        /// For an element without a version (v0.1), what breaks seed 002's `HabitItem`.
        var problem: String?
    }

    case absent
    case list([Element])
    case newerList(Int)
    case other(String)

    init(_ value: Value?) {
        switch value {
        case nil: self = .absent
        case .array(let elements)?: self = .list(elements.map(Self.element))
        case .data(let bytes)?:
            guard let json = try? JSONParser.parse(bytes) else {
                self = .other("a data value that is not JSON")
                return
            }
            guard case .array(let elements) = json else {
                self = Self.object(json, "a data value holding a JSON \(json.typeName)")
                return
            }
            self = .list(elements.map(Self.element))
        case .dictionary(let members)?:
            self = Self.object(.object(members.mapValues(\.typedJSON)), "a dictionary")
        case let other?:
            self = .other("a \(other.typeName)")
        }
    }

    /// A whole list stored as an object by a newer version, or something else.
    private static func object(_ json: JSON, _ what: String) -> StoredShape {
        if let version = version(json["schemaVersion"]), version > Habit.schemaVersion { return .newerList(version) }
        return .other(what)
    }

    private static func element(_ value: Value) -> Element {
        element(value.typedJSON)
    }

    private static func element(_ json: JSON) -> Element {
        guard case .object(let members) = json else { return Element(name: nil, version: nil, problem: "it is a JSON \(json.typeName), not a habit") }
        var name: String?
        if case .string(let text)? = members["name"] { name = text }
        let version = version(members["schemaVersion"])
        return Element(name: name, version: version, problem: version == nil ? v01Problem(members) : nil)
    }

    /// What makes `members` not a v0.1 `HabitItem`, or nil.
    static func v01Problem(_ members: [String: JSON]) -> String? {
        func isDate(_ json: JSON) -> Bool {
            switch json {
            case .integer, .real: true
            case .object(let tagged): tagged.count == 1 && tagged["$date"] != nil
            default: false
            }
        }
        let rules: [(String, String, (JSON) -> Bool)] = [
            ("id", "a UUID string", { if case .string(let text) = $0 { UUID(uuidString: text) != nil } else { false } }),
            ("name", "a string", { if case .string = $0 { true } else { false } }),
            ("started", "a date (seconds since 2001)", isDate),
            ("timesDone", "a whole number", { if case .integer = $0 { true } else { false } }),
            ("lastDone", "a date (seconds since 2001)", isDate),
            ("daysBetweenCompletions", "a number", { switch $0 { case .integer, .real: true; default: false } }),
        ]
        for (field, kind, accepts) in rules {
            guard let member = members[field] else { return "\"\(field)\" is missing" }
            guard accepts(member) else { return "\"\(field)\" is \(describe(member)), not \(kind)" }
        }
        return nil
    }

    private static func describe(_ json: JSON) -> String {
        switch json {
        case .string(let text): "the string \"\(text.prefix(40))\""
        case .integer(let number): "the number \(number)"
        case .real(let number): "the number \(number)"
        case .bool(let flag): "\(flag)"
        case .null: "null"
        case .array: "an array"
        case .object: "an object"
        }
    }

    private static func version(_ json: JSON?) -> Int? {
        switch json {
        case .integer(let number)?: Int(exactly: number)
        case .real(let number)?: Int(exactly: number)
        default: nil
        }
    }
}

/// Why a habits command did not do what was asked.
public enum HabitsError: Error, Equatable, Sendable {
    /// Wrong usage: exit status 2, with the usage line.
    case usage(String)
    /// A failure (unknown habit, kvd unreachable, a list that must not be rewritten): exit status 1.
    case failure(String)
}
