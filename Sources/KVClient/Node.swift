import FoundationEssentials
import KVValues

/// The tree that Codable values are encoded to and decoded from: a ``Value`` that may also hold
/// `null` (an `Optional` in an array, or plain JSON written by `JSONEncoder`).
///
/// Stored values never hold `null`: ``value()`` drops `null` members of objects and refuses a
/// `null` anywhere else.
enum Node: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case date(Date)
    case data(Data)
    case array([Node])
    case object([String: Node])

    init(_ value: Value) {
        switch value {
        case .string(let text): self = .string(text)
        case .integer(let number): self = .integer(number)
        case .real(let number): self = .real(number)
        case .bool(let flag): self = .bool(flag)
        case .date(let date): self = .date(date)
        case .data(let data): self = .data(data)
        case .array(let values): self = .array(values.map(Node.init))
        case .dictionary(let members): self = .object(members.mapValues(Node.init))
        }
    }

    /// Plain JSON as `JSONEncoder` writes it: no `$` tags are interpreted, dates are numbers
    /// (seconds since 2001 by default) or strings, data is base64 text.
    init(plainJSON json: JSON) {
        switch json {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .integer(let number): self = .integer(number)
        case .real(let number): self = .real(number)
        case .string(let text): self = .string(text)
        case .array(let elements): self = .array(elements.map(Node.init(plainJSON:)))
        case .object(let members): self = .object(members.mapValues(Node.init(plainJSON:)))
        }
    }

    /// The stored form: `null` members of objects are left out (as `encodeIfPresent` would);
    /// any other `null` is refused.
    func value(path: String = "$") throws(ValueError) -> Value {
        switch self {
        case .null:
            throw ValueError(path: path, reason: "nil cannot be stored here (kvd has no null; remove the key instead)")
        case .bool(let flag): return .bool(flag)
        case .integer(let number): return .integer(number)
        case .real(let number): return .real(number)
        case .string(let text): return .string(text)
        case .date(let date): return .date(date)
        case .data(let data): return .data(data)
        case .array(let elements):
            var values: [Value] = []
            for (index, element) in elements.enumerated() {
                values.append(try element.value(path: "\(path)[\(index)]"))
            }
            return .array(values)
        case .object(let members):
            var values: [String: Value] = [:]
            for (name, member) in members where member != .null {
                values[name] = try member.value(path: "\(path).\(name)")
            }
            return .dictionary(values)
        }
    }

    /// The node in a message, with its article: `an integer (5)`, `the string "four"`.
    var phrase: String {
        switch self {
        case .null: "null"
        case .bool(let flag): "a bool (\(flag))"
        case .integer(let number): "an integer (\(number))"
        case .real(let number): "a real (\(number))"
        case .string(let text): text.count > 40 ? "the string \"\(text.prefix(40))…\"" : "the string \"\(text)\""
        case .date(let date): "a date (\(RFC3339.format(date)))"
        case .data(let data): "a data value (\(data.count) bytes)"
        case .array(let elements): "an array (\(elements.count) elements)"
        case .object: "a dictionary"
        }
    }
}
