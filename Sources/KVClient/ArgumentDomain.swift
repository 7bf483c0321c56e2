import KVValues

/// The argument domain: `-key value` pairs on the command line, searched before everything else
/// and never stored (`myapp -quality 0.5` overrides the stored `quality` for one run).
///
/// Parsed like Foundation: an argument starting with a single `-` followed by another argument
/// is a pair (the program name and arguments starting with `--` are skipped). The value is a
/// string, as in Foundation, unless it is an old-style property list array `(a, b)` or
/// dictionary `{k = v;}`; the typed getters then convert strings (`integer(forKey:)` of `"5"`
/// is 5, `bool(forKey:)` of `"YES"` is true), and typed keys parse a string argument as typed
/// JSON when it does not decode as is (`-size 12` for a `Key<Int>`).
enum ArgumentDomain {
    static func parse(_ arguments: [String]) -> [String: Value] {
        var values: [String: Value] = [:]
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.count > 1, argument.hasPrefix("-"), !argument.hasPrefix("--"), index + 1 < arguments.count
            else {
                index += 1
                continue
            }
            values[String(argument.dropFirst())] = parseValue(arguments[index + 1])
            index += 2
        }
        return values
    }

    /// A plist-ish literal: `(...)` an array, `{...}` a dictionary, anything else a string.
    static func parseValue(_ text: String) -> Value {
        guard let first = text.first, first == "(" || first == "{" else { return .string(text) }
        var parser = PlistParser(Array(text.unicodeScalars))
        guard let value = parser.value(), parser.atEnd else { return .string(text) }
        return value
    }
}

/// Old-style property lists: `(a, "b c")`, `{key = value; other = (1, 2);}`; scalars are strings.
private struct PlistParser {
    let scalars: [Unicode.Scalar]
    var index = 0

    init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

    var atEnd: Bool {
        mutating get {
            skipSpace()
            return index == scalars.count
        }
    }

    mutating func skipSpace() {
        while index < scalars.count, scalars[index].properties.isWhitespace { index += 1 }
    }

    mutating func take(_ scalar: Unicode.Scalar) -> Bool {
        skipSpace()
        guard index < scalars.count, scalars[index] == scalar else { return false }
        index += 1
        return true
    }

    mutating func value() -> Value? {
        if take("(") { return array() }
        if take("{") { return dictionary() }
        return string().map(Value.string)
    }

    mutating func array() -> Value? {
        var elements: [Value] = []
        if take(")") { return .array(elements) }
        while true {
            guard let element = value() else { return nil }
            elements.append(element)
            if take(")") { return .array(elements) }
            guard take(",") else { return nil }
            if take(")") { return .array(elements) }
        }
    }

    mutating func dictionary() -> Value? {
        var members: [String: Value] = [:]
        while !take("}") {
            guard let key = string(), take("="), let member = value(), take(";") else { return nil }
            members[key] = member
        }
        return .dictionary(members)
    }

    mutating func string() -> String? {
        skipSpace()
        guard index < scalars.count else { return nil }
        var text = String.UnicodeScalarView()
        if scalars[index] == "\"" {
            index += 1
            while index < scalars.count, scalars[index] != "\"" {
                if scalars[index] == "\\", index + 1 < scalars.count { index += 1 }
                text.append(scalars[index])
                index += 1
            }
            guard index < scalars.count else { return nil }
            index += 1
            return String(text)
        }
        while index < scalars.count, !"(){},;=\"".unicodeScalars.contains(scalars[index]),
            !scalars[index].properties.isWhitespace
        {
            text.append(scalars[index])
            index += 1
        }
        return text.isEmpty ? nil : String(text)
    }
}
