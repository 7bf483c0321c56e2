/// A GVariant value as GLib's text format gives it (``GVariantText/parse(_:)``): every GVariant
/// type but handles' file descriptors' meaning, with its exact type. What dconf's keyfiles
/// hold (`key=GVariant text`); ``GVariant/kvdValue`` converts one the way the GSettings backend
/// stores it (`clib/gio/convert.c`). Pure.
public indirect enum GVariant: Sendable, Equatable {
    case boolean(Bool)
    case byte(UInt8)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case handle(Int32)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    case variant(GVariant)
    /// An array of values of `element` type (a dictionary: of dictionary entries).
    case array(element: String, [GVariant])
    /// A maybe of `element` type: just the value, or nothing.
    case maybe(element: String, GVariant?)
    case tuple([GVariant])
    case entry(GVariant, GVariant)

    /// The value's type string (`i`, `as`, `a{sv}`, `(ids)`).
    public var typeString: String {
        switch self {
        case .boolean: "b"
        case .byte: "y"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .handle: "h"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .variant: "v"
        case .array(let element, _): "a" + element
        case .maybe(let element, _): "m" + element
        case .tuple(let items): "(" + items.map(\.typeString).joined() + ")"
        case .entry(let key, let value): "{" + key.typeString + value.typeString + "}"
        }
    }
}

extension GVariant {
    /// The value in GLib's text format, as `g_variant_print(value, TRUE)` writes it (types
    /// annotated where the parser could not infer them), except that a double is written in
    /// the shortest form that reads back as the same double where GLib writes 17 digits.
    public func printed(annotate: Bool = true) -> String {
        var out = ""
        print(into: &out, annotate: annotate)
        return out
    }

    private func print(into out: inout String, annotate: Bool) {
        switch self {
        case .boolean(let value): out += value ? "true" : "false"
        case .byte(let value): out += (annotate ? "byte " : "") + "0x" + Hex.encode([value])
        case .int16(let value): out += (annotate ? "int16 " : "") + String(value)
        case .uint16(let value): out += (annotate ? "uint16 " : "") + String(value)
        case .int32(let value): out += String(value)
        case .uint32(let value): out += (annotate ? "uint32 " : "") + String(value)
        case .int64(let value): out += (annotate ? "int64 " : "") + String(value)
        case .uint64(let value): out += (annotate ? "uint64 " : "") + String(value)
        case .handle(let value): out += (annotate ? "handle " : "") + String(value)
        case .double(let value): out += GVariant.doubleText(value)
        case .string(let value): out += GVariant.quoted(value)
        case .objectPath(let value): out += (annotate ? "objectpath " : "") + "'" + value + "'"
        case .signature(let value): out += (annotate ? "signature " : "") + "'" + value + "'"
        case .variant(let inner):
            out += "<"
            inner.print(into: &out, annotate: true)
            out += ">"
        case .maybe(let element, let inner): printMaybe(element, inner, into: &out, annotate: annotate)
        case .array(let element, let items): printArray(element, items, into: &out, annotate: annotate)
        case .tuple(let items):
            out += "(" + items.map { $0.printed(annotate: annotate) }.joined(separator: ", ")
            out += items.count == 1 ? ",)" : ")"
        case .entry(let key, let value):
            out += "{" + key.printed(annotate: annotate) + ", " + value.printed(annotate: annotate) + "}"
        }
    }

    private func printMaybe(_ element: String, _ inner: GVariant?, into out: inout String, annotate: Bool) {
        if annotate { out += "@m" + element + " " }
        guard let inner else {
            out += "nothing"
            return
        }
        let child = inner.printed(annotate: false)
        if child.hasSuffix("nothing") { out += "just " }
        out += child
    }

    private func printArray(_ element: String, _ items: [GVariant], into out: inout String, annotate: Bool) {
        if element == "y", let text = Self.byteString(items) {
            out += text
            return
        }
        if items.isEmpty {
            if annotate { out += "@a" + element + " " }
            out += element.hasPrefix("{") ? "{}" : "[]"
            return
        }
        var first = annotate
        var parts: [String] = []
        for item in items {
            if case .entry(let key, let value) = item {
                parts.append(key.printed(annotate: first) + ": " + value.printed(annotate: first))
            } else {
                parts.append(item.printed(annotate: first))
            }
            first = false
        }
        out +=
            element.hasPrefix("{")
            ? "{" + parts.joined(separator: ", ") + "}" : "[" + parts.joined(separator: ", ") + "]"
    }

    /// `b'...'` when the bytes end with their only NUL (a C string), as GLib prints it
    /// (`g_strescape`: `\b \f \n \r \t \v \\ \"` and octal for the other bytes below 0x20 or
    /// from 0x7F); nil otherwise.
    private static func byteString(_ items: [GVariant]) -> String? {
        let bytes = items.compactMap { item -> UInt8? in if case .byte(let byte) = item { byte } else { nil } }
        guard bytes.count == items.count, bytes.firstIndex(of: 0) == bytes.count - 1 else { return nil }
        let content = bytes.dropLast()
        var escaped = ""
        for byte in content {
            switch byte {
            case 0x08: escaped += "\\b"
            case 0x0C: escaped += "\\f"
            case 0x0A: escaped += "\\n"
            case 0x0D: escaped += "\\r"
            case 0x09: escaped += "\\t"
            case 0x0B: escaped += "\\v"
            case UInt8(ascii: "\\"): escaped += "\\\\"
            case UInt8(ascii: "\""): escaped += "\\\""
            case ..<0x20, 0x7F...:
                let octal = String(byte, radix: 8)
                escaped += "\\" + String(repeating: "0", count: 3 - octal.count) + octal
            default: escaped.unicodeScalars.append(UnicodeScalar(byte))
            }
        }
        let quote = content.contains(UInt8(ascii: "'")) ? "\"" : "'"
        return "b" + quote + escaped + quote
    }

    /// A string in quotes as GLib prints it: `'...'`, or `"..."` when it holds a `'`; the quote
    /// and `\` escaped, characters that do not print as `\n`-style or `\uXXXX`/`\UXXXXXXXX`.
    static func quoted(_ text: String) -> String {
        let quote: Character = text.contains("'") ? "\"" : "'"
        var out = String(quote)
        for scalar in text.unicodeScalars {
            if Character(scalar) == quote || scalar == "\\" { out += "\\" }
            if isPrintable(scalar) {
                out.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\u{07}": out += "\\a"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{0B}": out += "\\v"
            default:
                let digits = String(scalar.value, radix: 16)
                let width = scalar.value < 0x10000 ? 4 : 8
                out += (width == 4 ? "\\u" : "\\U") + String(repeating: "0", count: width - digits.count) + digits
            }
        }
        out.append(quote)
        return out
    }

    /// GLib's `g_unichar_isprint`: all but control, format, unassigned, private-use and
    /// surrogate characters.
    private static func isPrintable(_ scalar: UnicodeScalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .unassigned, .privateUse, .surrogate: false
        default: true
        }
    }

    /// A double as the text format writes it: with a `.` or an exponent, so that it reads back
    /// as a double (`inf`, `-inf` and `nan` as they are).
    static func doubleText(_ value: Double) -> String {
        if value.isNaN { return "nan" }
        if value.isInfinite { return value < 0 ? "-inf" : "inf" }
        var text = "\(value)"
        if !text.contains(".") && !text.contains("e") { text += ".0" }
        return text
    }
}
