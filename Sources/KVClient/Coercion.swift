import FoundationEssentials
import KVValues

/// The conversions of the Foundation-shaped getters, as swift-corelibs-foundation's
/// `UserDefaults` does them (checked against it by `FoundationParityTests`):
///
/// | getter | converts |
/// |---|---|
/// | `string(forKey:)` | string; integer as its digits (`42`); real as Swift prints it (`1.5`, `12.34`, `3.0`, `1e+20`); bool as `"1"`/`"0"` |
/// | `integer(forKey:)` | integer; real truncated; bool 1/0; string by its leading integer after blanks (`"42"` → 42, `"3.9"` → 3, `"1e3"` → 1, else 0) |
/// | `double(forKey:)`, `float(forKey:)` | real; integer; bool 1/0; string by its leading number, exponent included (`"-2.5e3"` → -2500, `".5"` → 0.5), else 0 |
/// | `bool(forKey:)` | bool; number ≠ 0; string starting with `Y`/`y`/`T`/`t` after blanks, or whose leading integer is not 0 (`"YES"`, `"true"`, `"12abc"`; not `".5"`) |
///
/// A date or data value is never converted (nil, 0 or false), as in Foundation. A `Float` given
/// to a Foundation-shaped setter is stored as Foundation stores it, widened to the `Double` of
/// the same value (`12.34000015258789` for `12.34 as Float`), so `double(forKey:)` reads what
/// Foundation's reads and `float(forKey:)` the same `Float`; a typed key (`Key<Float>`) stores
/// the decimal the `Float` prints as (`12.34`, ``decimal(_:)``). Integers are 64-bit, so no
/// value is lost.
enum Coercion {
    static func string(_ value: Value) -> String? {
        switch value {
        case .string(let text): text
        case .integer(let number): String(number)
        case .real(let number): String(number)
        case .bool(let flag): flag ? "1" : "0"
        default: nil
        }
    }

    static func integer(_ value: Value) -> Int {
        switch value {
        case .integer(let number): Int(truncatingIfNeeded: number)
        case .real(let number): Int(exactly: number.rounded(.towardZero)) ?? (number < 0 ? Int.min : Int.max)
        case .bool(let flag): flag ? 1 : 0
        case .string(let text): Int(exactly: leadingNumber(text, fraction: false).rounded(.towardZero)) ?? 0
        default: 0
        }
    }

    static func double(_ value: Value) -> Double {
        switch value {
        case .integer(let number): Double(number)
        case .real(let number): number
        case .bool(let flag): flag ? 1 : 0
        case .string(let text): leadingNumber(text)
        default: 0
        }
    }

    static func bool(_ value: Value) -> Bool {
        switch value {
        case .bool(let flag): return flag
        case .integer(let number): return number != 0
        case .real(let number): return number != 0
        case .string(let text):
            let trimmed = text.drop { $0 == " " || $0 == "\t" }
            if let first = trimmed.first, "YyTt".contains(first) { return true }
            return leadingNumber(text, fraction: false) != 0
        default: return false
        }
    }

    /// The number at the start of `text` after blanks (`"  42abc"` → 42, `"-2.5e3x"` → -2500),
    /// or 0; with `fraction: false` only its integer part (`"3.9"` → 3, `"1e3"` → 1).
    static func leadingNumber(_ text: String, fraction: Bool = true) -> Double {
        let characters = Array(text.drop { $0 == " " || $0 == "\t" || $0 == "\n" })
        var end = 0
        func digits() -> Int {
            let start = end
            while end < characters.count, characters[end].isASCII, characters[end].isNumber { end += 1 }
            return end - start
        }
        if end < characters.count, characters[end] == "-" || characters[end] == "+" { end += 1 }
        var count = digits()
        if fraction, end < characters.count, characters[end] == "." {
            end += 1
            count += digits()
        }
        guard count > 0 else { return 0 }
        let mantissa = end
        if fraction, end < characters.count, characters[end] == "e" || characters[end] == "E" {
            end += 1
            if end < characters.count, characters[end] == "-" || characters[end] == "+" { end += 1 }
            if digits() == 0 { end = mantissa }
        }
        return Double(String(characters[..<end])).flatMap { $0.isFinite ? $0 : nil } ?? 0
    }

    // MARK: typed keys

    /// A stored scalar as the scalar type `T` (or an optional of one) of a typed key, converted
    /// as the getters do where nothing is lost; nil when `T` is not such a type or the value
    /// does not convert exactly:
    ///
    /// | key type | reads besides its own type |
    /// |---|---|
    /// | `Int` (and other integers) | a string that is a whole number (`"20"`, `" 20 "`); a real without a fraction; a bool as 1/0 |
    /// | `Double`, `Float` | a string that is a number (`"0.5"`); an integer; a bool as 1/0 |
    /// | `Bool` | the strings `YES NO true false Y N T F 1 0` (any case, blanks around); the integers 0 and 1 |
    /// | `String` | an integer or a real, as its digits |
    static func typed<T>(_ type: T.Type, _ value: Value) -> T? {
        let wanted = Versioning.unwrapped(T.self)
        let converted: Any?
        switch wanted {
        case let integer as any FixedWidthInteger.Type: converted = wholeNumber(value).flatMap { exactly(integer, $0) }
        case is Double.Type: converted = number(value)
        case is Float.Type: converted = number(value).map { Float($0) }
        case is Bool.Type: converted = flag(value)
        case is String.Type: converted = digits(value)
        default: converted = nil
        }
        guard let converted else { return nil }
        if let exact = converted as? T { return exact }
        return (T.self as? any OptionalProtocol.Type)?.wrapping(converted) as? T
    }

    private static func exactly<I: FixedWidthInteger>(_ type: I.Type, _ number: Int64) -> Any? {
        I(exactly: number)
    }

    /// `text` without blanks around it.
    private static func trimmed(_ text: String) -> String {
        var rest = Substring(text)
        while let first = rest.first, first == " " || first == "\t" { rest.removeFirst() }
        while let last = rest.last, last == " " || last == "\t" { rest.removeLast() }
        return String(rest)
    }

    private static func number(_ value: Value) -> Double? {
        switch value {
        case .integer(let number): Double(number)
        case .real(let number): number
        case .bool(let flag): flag ? 1 : 0
        case .string(let text): Double(trimmed(text)).flatMap { $0.isFinite ? $0 : nil }
        default: nil
        }
    }

    private static func wholeNumber(_ value: Value) -> Int64? {
        switch value {
        case .integer(let number): number
        case .bool(let flag): flag ? 1 : 0
        case .string(let text): Int64(trimmed(text)) ?? number(value).flatMap { Int64(exactly: $0) }
        case .real(let number): Int64(exactly: number)
        default: nil
        }
    }

    private static func flag(_ value: Value) -> Bool? {
        switch value {
        case .bool(let flag): return flag
        case .integer(0): return false
        case .integer(1): return true
        case .string(let text):
            switch trimmed(text).lowercased() {
            case "yes", "true", "y", "t", "1": return true
            case "no", "false", "n", "f", "0": return false
            default: return nil
            }
        default: return nil
        }
    }

    private static func digits(_ value: Value) -> String? {
        switch value {
        case .string(let text): text
        case .integer, .real: string(value)
        default: nil
        }
    }

    // MARK: Swift values

    /// A Foundation-style value as a stored value: `String`, `Bool`, the integer types, `Double`,
    /// `Float` (widened to `Double`, as Foundation stores it), `Date`, `Data`, `URL` (a file URL as its path, as
    /// Foundation stores it; any other as its absolute string, which Foundation would cut down
    /// to its path), ``Value``, `NSNumber`, `NSString`, `NSData`, `NSDate`, `NSURL`, and arrays
    /// (`NSArray`) and string-keyed dictionaries (`NSDictionary`) of those. `nil` for anything
    /// else, and for an unsigned number above `Int64.max`.
    static func value(from any: Any) -> Value? {
        if let number = foundationNumber(any) { return number }
        switch any {
        case let value as Value: return value
        case let text as String: return .string(text)
        case let text as Substring: return .string(String(text))
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .integer(Int64(number))
        case let number as Int64: return .integer(number)
        case let number as Int32: return .integer(Int64(number))
        case let number as Int16: return .integer(Int64(number))
        case let number as Int8: return .integer(Int64(number))
        case let number as UInt8: return .integer(Int64(number))
        case let number as UInt16: return .integer(Int64(number))
        case let number as UInt32: return .integer(Int64(number))
        case let number as UInt: return Int64(exactly: number).map(Value.integer)
        case let number as UInt64: return Int64(exactly: number).map(Value.integer)
        case let number as Double: return .real(number)
        case let number as Float: return .real(Double(number))
        case let date as Date: return .date(date)
        case let data as Data: return .data(data)
        case let url as URL: return .string(url.isFileURL ? url.path : url.absoluteString)
        case let members as [String: Any]:
            var values: [String: Value] = [:]
            for (name, member) in members {
                guard let value = value(from: member) else { return nil }
                values[name] = value
            }
            return .dictionary(values)
        case let elements as [Any]:
            var values: [Value] = []
            for element in elements {
                guard let value = value(from: element) else { return nil }
                values.append(value)
            }
            return .array(values)
        default:
            return nil
        }
    }

    /// The `Double` that prints as `number` prints (12.34 for the `Float` 12.34, not
    /// 12.34000015258789) if it converts back to the same `Float`; else `number`'s exact value.
    /// How a typed key stores a `Float` (the Foundation-shaped setters widen it instead).
    static func decimal(_ number: Float) -> Double {
        guard number.isFinite, let decimal = Double(String(number)), Float(decimal) == number else {
            return Double(number)
        }
        return decimal
    }

    /// A stored value as Foundation hands it out: `String`, `Int`, `Double`, `Bool`, `Date`,
    /// `Data`, `[Any]`, `[String: Any]`.
    static func any(_ value: Value) -> Any {
        switch value {
        case .string(let text): text
        case .integer(let number): Int(truncatingIfNeeded: number)
        case .real(let number): number
        case .bool(let flag): flag
        case .date(let date): date
        case .data(let data): data
        case .array(let values): values.map(any)
        case .dictionary(let members): members.mapValues(any)
        }
    }
}
