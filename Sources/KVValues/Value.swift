import FoundationEssentials

/// A property-list value: what kvd stores under a key.
///
/// Travels and rests as the contract's typed JSON (`init(typedJSON:)`, `typedJSON`);
/// reading back always gives the same case that was written (an integer stays an integer, a
/// real a real, even `1.0`).
public enum Value: Sendable, Equatable, Hashable {
    case string(String)
    case integer(Int64)
    case real(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([Value])
    case dictionary([String: Value])

    /// The name of this value's type as `kvctl read-type` prints it.
    public var typeName: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .real: "real"
        case .bool: "bool"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }
}

/// Why a value or name was refused: `path` locates the problem inside the value (`$.a[2]`).
public struct ValueError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String = "$", reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { path == "$" ? reason : "at \(path): \(reason)" }
}

extension Value {
    /// Interprets a parsed JSON document as a typed value per the contract.
    ///
    /// Refuses `null`, unknown `$`-objects, unwrapped dictionaries with `$`-keys, malformed dates
    /// and base64, and nesting deeper than ``Limits/valueDepth`` (whatever parser read the JSON:
    /// a framing's parser allows its own levels on top); the error's path says where. When
    /// several members of a dictionary are bad, the one reported is the first in name order, so
    /// the same input always gets the same error.
    public init(typedJSON json: JSON) throws(ValueError) {
        do {
            self = try Self.decode(json, path: nil, level: 0, sorted: false)
        } catch {
            // Slow path, errors only, that says where: paths cost a string per level (quadratic
            // in the depth), and a dictionary's members in hash order would name a different
            // bad member from one run (or one copy of the dictionary) to the next.
            _ = try Self.decode(json, path: "$", level: 0, sorted: true)
            throw error
        }
    }

    /// Parses typed JSON text (bounded per ``JSONLimits``): syntax errors become ``ValueError``.
    public init(typedJSONText text: some Collection<UInt8>, limits: JSONLimits = .default) throws(ValueError) {
        let json: JSON
        do { json = try JSONParser.parse(text, limits: limits) } catch { throw ValueError(reason: error.description) }
        try self.init(typedJSON: json)
    }

    /// The nesting rule, for a container whose JSON opens `levels` levels below `level`.
    @inline(__always)
    static func checkDepth(_ level: Int, adding levels: Int = 1, path: String?) throws(ValueError) {
        guard level + levels <= Limits.valueDepth else {
            throw ValueError(
                path: path ?? "$", reason: "nesting deeper than \(Limits.valueDepth) levels (the limit for a value)")
        }
    }

    /// `level`: the JSON levels of the containers around `json`; `path`: where it is, or nil
    /// when not tracked (then errors say `$`).
    private static func decode(_ json: JSON, path: String?, level: Int, sorted: Bool) throws(ValueError) -> Value {
        switch json {
        case .null: throw ValueError(path: path ?? "$", reason: "null is not a value (remove the key instead)")
        case .bool(let flag): return .bool(flag)
        case .integer(let number): return .integer(number)
        case .real(let number): return .real(number)
        case .string(let text): return .string(text)
        case .array(let elements):
            try checkDepth(level, path: path)
            var values: [Value] = []
            values.reserveCapacity(elements.count)
            for index in elements.indices {
                values.append(
                    try decode(elements[index], path: path.map { "\($0)[\(index)]" }, level: level + 1, sorted: sorted))
            }
            return .array(values)
        case .object(let members):
            try checkDepth(level, path: path)
            return try decodeObject(members, path: path, level: level + 1, sorted: sorted)
        }
    }

    /// `level` counts the object itself.
    private static func decodeObject(_ members: [String: JSON], path: String?, level: Int, sorted: Bool)
        throws(ValueError) -> Value
    {
        let here = path ?? "$"
        guard members.keys.contains(where: { $0.hasPrefix("$") }) else {
            return .dictionary(try decodeMembers(members, path: path, level: level, sorted: sorted))
        }
        guard members.count == 1, let (tag, payload) = members.first else {
            throw ValueError(
                path: here,
                reason:
                    "an object with a key starting with '$' must be exactly one of {\"$date\": ...}, {\"$data\": ...}, {\"$dict\": {...}}"
            )
        }
        switch (tag, payload) {
        case ("$date", .string(let text)):
            guard let date = RFC3339.parse(text) else {
                throw ValueError(
                    path: here,
                    reason:
                        "\"\(text)\" is not an RFC 3339 date-time in the years 0001 to 9999 (like 2026-11-29T17:00:00.250Z)"
                )
            }
            return .date(date)
        case ("$data", .string(let text)):
            guard let data = Data(base64Encoded: text) else {
                throw ValueError(path: here, reason: "$data is not valid base64")
            }
            return .data(data)
        case ("$dict", .object(let inner)):
            try checkDepth(level, path: path)
            return .dictionary(try decodeMembers(inner, path: path, level: level + 1, sorted: sorted))
        case ("$date", _), ("$data", _):
            throw ValueError(path: here, reason: "\(tag) needs a string, not \(payload.typeName)")
        case ("$dict", _):
            throw ValueError(path: here, reason: "$dict needs an object, not \(payload.typeName)")
        default:
            throw ValueError(
                path: here,
                reason: "unknown tag \"\(tag)\" (a dictionary with '$' keys must be wrapped as {\"$dict\": {...}})")
        }
    }

    private static func decodeMembers(_ members: [String: JSON], path: String?, level: Int, sorted: Bool)
        throws(ValueError) -> [String: Value]
    {
        var result: [String: Value] = [:]
        result.reserveCapacity(members.count)
        if sorted {
            for name in members.keys.sorted() {
                result[name] = try decode(
                    members[name]!, path: path.map { "\($0).\(name)" }, level: level, sorted: true)
            }
        } else {
            for (name, member) in members {
                result[name] = try decode(member, path: path.map { "\($0).\(name)" }, level: level, sorted: false)
            }
        }
        return result
    }

    /// The typed JSON of this value per the contract.
    public var typedJSON: JSON {
        switch self {
        case .string(let text): .string(text)
        case .integer(let number): .integer(number)
        case .real(let number): .real(number)
        case .bool(let flag): .bool(flag)
        case .date(let date): .object(["$date": .string(RFC3339.format(date))])
        case .data(let data): .object(["$data": .string(data.base64EncodedString())])
        case .array(let values): .array(values.map { $0.typedJSON })
        case .dictionary(let members):
            members.keys.contains(where: { $0.hasPrefix("$") })
                ? .object(["$dict": .object(members.mapValues { $0.typedJSON })])
                : .object(members.mapValues { $0.typedJSON })
        }
    }

    /// Checks the invariants the JSON form cannot: reals must be finite, dates within years
    /// 0001–9999, and the typed JSON at most ``Limits/valueDepth`` levels deep (for values built
    /// in code; ``init(typedJSON:)`` checks the depth as it reads).
    public func validate() throws(ValueError) {
        try validate(level: 0)
    }

    /// `level`: the JSON levels of the containers around this value.
    private func validate(level: Int) throws(ValueError) {
        switch self {
        case .real(let number) where !number.isFinite:
            throw ValueError(reason: "a real must be finite, not \(number)")
        case .date(let date):
            guard RFC3339.range.contains(date.timeIntervalSince1970) else {
                throw ValueError(reason: "a date must lie in the years 0001 to 9999")
            }
            try Self.checkDepth(level, path: "$")
        case .data:
            try Self.checkDepth(level, path: "$")
        case .array(let values):
            try Self.checkDepth(level, path: "$")
            for value in values { try value.validate(level: level + 1) }
        case .dictionary(let members):
            let levels = members.keys.contains(where: { $0.hasPrefix("$") }) ? 2 : 1
            try Self.checkDepth(level, adding: levels, path: "$")
            for value in members.values { try value.validate(level: level + levels) }
        default:
            break
        }
    }
}
