/// A parsed JSON document, as plain as the grammar: the layer under typed values and varlink
/// messages.
///
/// Numbers keep the distinction kvd's typed JSON needs: a number written without `.`, `e` or `E`
/// is an ``integer``; any other is a ``real``. Objects keep their members in a dictionary;
/// duplicate member names are refused by the parser.
public enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    /// The member `name` of an object, or `nil` for a missing member or a non-object.
    public subscript(name: String) -> JSON? {
        if case .object(let members) = self { return members[name] }
        return nil
    }

    /// A short name of this JSON type for error messages ("string", "object", ...).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "bool"
        case .integer: "integer"
        case .real: "real"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// Limits that bound the work and memory of parsing untrusted input.
public struct JSONLimits: Sendable {
    /// Deepest nesting of arrays and objects accepted.
    public var maxDepth: Int
    /// Largest input in bytes.
    public var maxBytes: Int

    /// By default, one bare value as the contract bounds it (``Limits``); a framing around
    /// values uses ``init(framingDepth:maxBytes:)``.
    public init(maxDepth: Int = Limits.valueDepth, maxBytes: Int = Limits.messageBytes) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
    }

    public static let `default` = JSONLimits()
}

/// Why a JSON text was refused, and where: `offset` is the byte offset of the problem.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}
