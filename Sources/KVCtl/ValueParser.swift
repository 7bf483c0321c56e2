import FoundationEssentials
import KVValues

/// What `kvctl set DOMAIN KEY ...` asks to store: a whole value, or an addition to an existing
/// array or dictionary (`-array-add`, `-dict-add`).
public enum ValueSpec: Sendable, Equatable {
    case replace(Value)
    case arrayAdd([Value])
    case dictionaryAdd([String: Value])
}

/// Turns the VALUE arguments of `kvctl set` into a ``ValueSpec``, in the manner of macOS
/// `defaults write`. Pure, so it can be fuzzed: any input gives a spec or a ``UsageError``.
///
/// - `VALUE` alone, or `-string VALUE`: a string.
/// - `-int`/`-integer N`: a signed 64-bit integer. `-float X`: a real, even for `1`.
/// - `-bool`/`-boolean B`: `true`/`false`/`yes`/`no`/`1`/`0`, in any case.
/// - `-date D`: an RFC 3339 date-time (`2026-11-29T17:00:00Z`, offsets allowed).
/// - `-data HEX`: bytes as hex digits, two per byte (`68690a`), as macOS `defaults` takes them.
/// - `-array E...`, `-array-add E...`: elements; each is a string unless preceded by a type flag
///   (`-array -int 1 -int 2`).
/// - `-dict K V ...`, `-dict-add K V ...`: pairs; keys are strings, values as array elements.
/// - `--json TYPED_JSON`: any value as the contract's typed JSON.
public enum ValueParser {
    public static func parse(_ arguments: [String]) throws(UsageError) -> ValueSpec {
        guard let first = arguments.first else { throw UsageError("missing VALUE") }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "-array": return .replace(.array(try elements(rest)))
        case "-array-add": return .arrayAdd(try elements(rest))
        case "-dict": return .replace(.dictionary(try pairs(rest)))
        case "-dict-add": return .dictionaryAdd(try pairs(rest))
        case "--json":
            guard rest.count == 1 else {
                throw rest.isEmpty ? UsageError("--json needs a TYPED_JSON argument") : tooMany(rest.dropFirst())
            }
            return .replace(try typedJSON(rest[0]))
        default:
            var index = 0
            let value = try scalar(arguments, at: &index)
            guard index == arguments.count else { throw tooMany(arguments[index...]) }
            return .replace(value)
        }
    }

    /// The scalar flags and what each makes.
    static let scalarFlags: [String: @Sendable (String) throws(UsageError) -> Value] = [
        "-string": { .string($0) },
        "-int": integer, "-integer": integer,
        "-float": real,
        "-bool": bool, "-boolean": bool,
        "-date": date,
        "-data": data,
    ]

    /// Reads one scalar at `index`: a type flag and its argument, or a bare string.
    static func scalar(_ arguments: [String], at index: inout Int) throws(UsageError) -> Value {
        let token = arguments[index]
        if let make = scalarFlags[token] {
            guard index + 1 < arguments.count else { throw UsageError("\(token) needs a value after it") }
            index += 2
            return try make(arguments[index - 1])
        }
        if token.count > 1, token.hasPrefix("-"), Double(token) == nil {
            throw UsageError(
                "unknown type flag \(token) (to store a string that starts with '-', write -string \(token))")
        }
        index += 1
        return .string(token)
    }

    static func elements(_ arguments: [String]) throws(UsageError) -> [Value] {
        var values: [Value] = []
        var index = 0
        while index < arguments.count { values.append(try scalar(arguments, at: &index)) }
        return values
    }

    static func pairs(_ arguments: [String]) throws(UsageError) -> [String: Value] {
        var members: [String: Value] = [:]
        var index = 0
        while index < arguments.count {
            let name = arguments[index]
            if name == "-string", index + 1 < arguments.count {
                index += 1
            } else if scalarFlags[name] != nil {
                throw UsageError("a dictionary key is a string, so \(name) cannot come before it")
            }
            let key = arguments[index]
            index += 1
            guard index < arguments.count else { throw UsageError("the key \"\(key)\" needs a value after it") }
            members[key] = try scalar(arguments, at: &index)
        }
        return members
    }

    static func integer(_ text: String) throws(UsageError) -> Value {
        guard let number = Int64(text) else {
            throw UsageError("-int needs a whole number from \(Int64.min) to \(Int64.max), not \"\(text)\"")
        }
        return .integer(number)
    }

    static func real(_ text: String) throws(UsageError) -> Value {
        guard let number = Double(text), number.isFinite else {
            throw UsageError("-float needs a finite number like 1.5 or 2e-3, not \"\(text)\"")
        }
        return .real(number)
    }

    static func bool(_ text: String) throws(UsageError) -> Value {
        switch text.lowercased() {
        case "true", "yes", "1": return .bool(true)
        case "false", "no", "0": return .bool(false)
        default: throw UsageError("-bool needs true, false, yes, no, 1 or 0, not \"\(text)\"")
        }
    }

    static func date(_ text: String) throws(UsageError) -> Value {
        guard let date = RFC3339.parse(text), RFC3339.range.contains(date.timeIntervalSince1970) else {
            throw UsageError("-date needs an RFC 3339 date-time like 2026-11-29T17:00:00Z, not \"\(text)\"")
        }
        return .date(date)
    }

    static func data(_ text: String) throws(UsageError) -> Value {
        guard let bytes = Hex.decode(text) else {
            throw UsageError("-data needs hex digits, two per byte (like 68690a), not \"\(text)\"")
        }
        return .data(Data(bytes))
    }

    static func typedJSON(_ text: String) throws(UsageError) -> Value {
        do {
            let value = try Value(typedJSONText: Array(text.utf8))
            try value.validate()
            return value
        } catch {
            throw UsageError("--json needs typed JSON (like '{\"$date\": \"2026-11-29T17:00:00Z\"}'): \(error)")
        }
    }

    private static func tooMany(_ extra: ArraySlice<String>) -> UsageError {
        UsageError("too many arguments: \(extra.joined(separator: " ")) (for several values use -array or -dict)")
    }
}
