/// A `--fleet-domain` pattern: a shell glob matched against a whole domain name the way
/// `fnmatch(3)` does with no flags (so `*` also matches a leading `.`, and there is no `/`
/// special case: a domain never contains one).
///
/// `*` matches any run of characters, `?` one character, `[...]` one character of a set
/// (`[a-z]`, `[!x]` or `[^x]` negated, `]` first is literal, `[[:alpha:]]` and the other POSIX
/// classes over ASCII), `\x` the character `x`. A `[` with no closing `]` matches itself.
/// Characters are Unicode scalars (as fnmatch in a UTF-8 locale). Pure and thread-safe.
///
/// ```swift
/// try FleetDomainPattern(validating: "com.corp.*").matches("com.corp.mail")  // true
/// ```
public struct FleetDomainPattern: Sendable, Equatable, CustomStringConvertible {
    /// The pattern as given.
    public let text: String
    private let tokens: [Token]

    /// Compiles `text`; refuses an empty pattern, one with `/` or a NUL (no domain has them),
    /// and one ending in an unpaired `\`.
    public init(validating text: String) throws(FleetLayoutError) {
        guard !text.isEmpty else {
            throw FleetLayoutError(text: text, reason: "a fleet-domain pattern must not be empty")
        }
        guard !text.unicodeScalars.contains("/"), !text.unicodeScalars.contains("\0") else {
            throw FleetLayoutError(
                text: text, reason: "a fleet-domain pattern must not contain '/' or NUL: no domain name does")
        }
        self.text = text
        self.tokens = try Self.compile(Array(text.unicodeScalars), text: text)
    }

    public var description: String { text }

    public static func == (lhs: FleetDomainPattern, rhs: FleetDomainPattern) -> Bool { lhs.text == rhs.text }

    /// Whether the whole of `name` matches.
    public func matches(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        // The classic one-star backtracking: on a mismatch, let the last `*` take one more
        // character. Correct for globs because `*` is the only token of variable length.
        var token = 0
        var position = 0
        var star: (token: Int, position: Int)? = nil
        while position < scalars.count {
            if token < tokens.count, case .star = tokens[token] {
                star = (token, position)
                token += 1
            } else if token < tokens.count, tokens[token].matches(scalars[position]) {
                token += 1
                position += 1
            } else if let last = star {
                star = (last.token, last.position + 1)
                token = last.token + 1
                position = last.position + 1
            } else {
                return false
            }
        }
        while token < tokens.count, case .star = tokens[token] { token += 1 }
        return token == tokens.count
    }

    /// One element of a compiled pattern.
    private enum Token: Sendable {
        case literal(Unicode.Scalar)
        case any
        case star
        case set(negated: Bool, items: [SetItem])

        func matches(_ scalar: Unicode.Scalar) -> Bool {
            switch self {
            case .literal(let expected): scalar == expected
            case .any: true
            case .star: false
            case .set(let negated, let items): items.contains { $0.matches(scalar) } != negated
            }
        }
    }

    private enum SetItem: Sendable {
        case range(Unicode.Scalar, Unicode.Scalar)
        case posixClass(String)

        func matches(_ scalar: Unicode.Scalar) -> Bool {
            switch self {
            case .range(let low, let high): low.value <= scalar.value && scalar.value <= high.value
            case .posixClass(let name): scalar.isASCII && Self.classContains(name, UInt8(scalar.value))
            }
        }

        static let classNames: Set<String> = [
            "alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "xdigit",
        ]

        private static func classContains(_ name: String, _ byte: UInt8) -> Bool {
            let isUpper = (0x41...0x5A).contains(byte)
            let isLower = (0x61...0x7A).contains(byte)
            let isDigit = (0x30...0x39).contains(byte)
            let isGraph = (0x21...0x7E).contains(byte)
            switch name {
            case "alnum": return isUpper || isLower || isDigit
            case "alpha": return isUpper || isLower
            case "blank": return byte == 0x20 || byte == 0x09
            case "cntrl": return byte < 0x20 || byte == 0x7F
            case "digit": return isDigit
            case "graph": return isGraph
            case "lower": return isLower
            case "print": return isGraph || byte == 0x20
            case "punct": return isGraph && !(isUpper || isLower || isDigit)
            case "space": return (0x09...0x0D).contains(byte) || byte == 0x20
            case "upper": return isUpper
            default: return isDigit || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)  // xdigit
            }
        }
    }

    private static func compile(_ scalars: [Unicode.Scalar], text: String) throws(FleetLayoutError) -> [Token] {
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            switch scalar {
            case "*":
                if case .star? = tokens.last {} else { tokens.append(.star) }
            case "?":
                tokens.append(.any)
            case "\\":
                guard index < scalars.count else {
                    throw FleetLayoutError(
                        text: text,
                        reason:
                            "a fleet-domain pattern must not end with an unpaired '\\' (write '\\\\' for a backslash)")
                }
                tokens.append(.literal(scalars[index]))
                index += 1
            case "[":
                if case (let set, let next)? = bracket(scalars, from: index) {
                    tokens.append(set)
                    index = next
                } else {
                    tokens.append(.literal("["))
                }
            default:
                tokens.append(.literal(scalar))
            }
        }
        return tokens
    }

    /// The set that starts after a `[` at `start`, and the index after its `]`; nil when there
    /// is no closing `]` (then the `[` is literal, as in fnmatch).
    private static func bracket(_ scalars: [Unicode.Scalar], from start: Int) -> (Token, Int)? {
        var index = start
        var negated = false
        if index < scalars.count, scalars[index] == "!" || scalars[index] == "^" {
            negated = true
            index += 1
        }
        var items: [SetItem] = []
        var first = true
        while index < scalars.count {
            var scalar = scalars[index]
            if scalar == "]" && !first { return (.set(negated: negated, items: items), index + 1) }
            first = false
            if scalar == "[", index + 1 < scalars.count, scalars[index + 1] == ":",
                case (let name, let next)? = posixClass(scalars, from: index + 2)
            {
                items.append(.posixClass(name))
                index = next
                continue
            }
            if scalar == "\\", index + 1 < scalars.count {
                index += 1
                scalar = scalars[index]
            }
            index += 1
            if index + 1 < scalars.count, scalars[index] == "-", scalars[index + 1] != "]" {
                var high = scalars[index + 1]
                index += 2
                if high == "\\", index < scalars.count {
                    high = scalars[index]
                    index += 1
                }
                items.append(.range(scalar, high))
            } else {
                items.append(.range(scalar, scalar))
            }
        }
        return nil
    }

    /// A `[:name:]` class whose name starts at `start`, and the index after it.
    private static func posixClass(_ scalars: [Unicode.Scalar], from start: Int) -> (String, Int)? {
        var name = ""
        var index = start
        while index + 1 < scalars.count {
            if scalars[index] == ":" && scalars[index + 1] == "]" {
                return SetItem.classNames.contains(name) ? (name, index + 2) : nil
            }
            name.unicodeScalars.append(scalars[index])
            index += 1
        }
        return nil
    }
}

/// A fleet setting that cannot work: a bad `--fleet-domain` pattern or `--etcd-prefix`.
/// `reason` names the rule; the message says what to change.
public struct FleetLayoutError: Error, Sendable, Equatable, CustomStringConvertible {
    public var text: String
    public var reason: String

    public init(text: String, reason: String) {
        self.text = text
        self.reason = reason
    }

    public var description: String { "invalid fleet setting \"\(text)\": \(reason)" }
}
