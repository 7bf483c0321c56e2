/// The first pass of ``GVariantText``: text to ``GVariantNode``s, as GLib's parser reads it.
extension TokenStream {
    typealias Failure = GVariantText.ParseError

    /// One value: chosen by its first token as GLib chooses.
    mutating func parseValue(depth: Int) throws(Failure) -> GVariantNode {
        guard depth < GVariantText.maxDepth else { throw .init(offset: index, reason: "nesting too deep") }
        guard let range = peek() else { throw .init(offset: index, reason: "expected value") }
        let start = range.lowerBound
        let word = Array(bytes[range])
        let first = word[0]
        let second = word.count > 1 ? word[1] : 0
        switch first {
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "("): return try parseTuple(depth: depth)
        case UInt8(ascii: "<"):
            index = range.upperBound
            let inner = try parseValue(depth: depth + 1)
            try require(">", " to follow variant value")
            return .variant(inner, at: start)
        case UInt8(ascii: "{"): return try parseDictionary(depth: depth)
        default: break
        }
        if word.elementsEqual("true".utf8) || word.elementsEqual("false".utf8) {
            index = range.upperBound
            return .boolean(first == UInt8(ascii: "t"), at: start)
        }
        if (first >= 0x30 && first <= 0x39) || [0x2D, 0x2B, 0x2E].contains(first) || word.elementsEqual("inf".utf8)
            || word.elementsEqual("nan".utf8)
        {
            index = range.upperBound
            return .number(String(decoding: word, as: UTF8.self), at: start)
        }
        if first == UInt8(ascii: "n") || first == UInt8(ascii: "j") { return try parseMaybe(depth: depth) }
        if first == UInt8(ascii: "@") || (Self.isAlpha(first) && Self.isAlpha(second)) {
            return try parseTyped(depth: depth)
        }
        if first == 0x27 || first == 0x22 {
            index = range.upperBound
            return .string(try Self.unescapeString(word, at: start), at: start)
        }
        if first == UInt8(ascii: "b"), second == 0x27 || second == 0x22 {
            index = range.upperBound
            return .bytes(try Self.unescapeBytes(word, at: start), at: start)
        }
        throw .init(offset: start, reason: "expected value")
    }

    private mutating func parseArray(depth: Int) throws(Failure) -> GVariantNode {
        let start = index
        index += 1
        var items: [GVariantNode] = []
        while !consume("]") {
            if !items.isEmpty { try require(",", " or ']' to follow array element") }
            items.append(try parseValue(depth: depth + 1))
        }
        return .array(items, at: start)
    }

    private mutating func parseTuple(depth: Int) throws(Failure) -> GVariantNode {
        let start = index
        index += 1
        var items: [GVariantNode] = []
        while !consume(")") {
            if items.count > 1 { try require(",", " or ')' to follow tuple element") }
            items.append(try parseValue(depth: depth + 1))
            if items.count == 1 { try require(",", " after first tuple element") }
        }
        return .tuple(items, at: start)
    }

    private mutating func parseDictionary(depth: Int) throws(Failure) -> GVariantNode {
        let start = index
        index += 1
        if consume("}") { return .dictionary([], single: false, at: start) }
        let key = try parseValue(depth: depth + 1)
        let single = consume(",")
        if !single { try require(":", " or ',' to follow dictionary entry key") }
        var entries = [(key, try parseValue(depth: depth + 1))]
        if single {
            try require("}", " at end of dictionary entry")
            return .dictionary(entries, single: true, at: start)
        }
        while !consume("}") {
            try require(",", " or '}' to follow dictionary entry")
            let key = try parseValue(depth: depth + 1)
            try require(":", " to follow dictionary entry key")
            entries.append((key, try parseValue(depth: depth + 1)))
        }
        return .dictionary(entries, single: false, at: start)
    }

    private mutating func parseMaybe(depth: Int) throws(Failure) -> GVariantNode {
        let start = index
        if consume("just") { return .maybe(try parseValue(depth: depth + 1), at: start) }
        if consume("nothing") { return .maybe(nil, at: start) }
        throw .init(offset: start, reason: "unknown keyword")
    }

    static let keywords: [String: String] = [
        "boolean": "b", "byte": "y", "int16": "n", "uint16": "q", "int32": "i", "handle": "h", "uint32": "u",
        "int64": "x", "uint64": "t", "double": "d", "string": "s", "objectpath": "o", "signature": "g",
    ]

    private mutating func parseTyped(depth: Int) throws(Failure) -> GVariantNode {
        let start = index
        let word = String(decoding: take(), as: UTF8.self)
        let type: String
        if word.hasPrefix("@") {
            type = String(word.dropFirst())
            guard GVariantType.isDefinite(type) else { throw .init(offset: start, reason: "invalid type declaration") }
        } else {
            guard let known = Self.keywords[word] else { throw .init(offset: start, reason: "unknown keyword") }
            type = known
        }
        return .typed(type, try parseValue(depth: depth + 1), at: start)
    }

    /// The text of a quoted string token: `\uXXXX` and `\UXXXXXXXX` (a character, not NUL),
    /// `\a \b \f \n \r \t \v`, a backslash before a line end skipped, before any other byte
    /// that byte. Not valid UTF-8, or holding NUL: refused (GLib has no such string).
    static func unescapeString(_ token: [UInt8], at start: Int) throws(Failure) -> String {
        let out = try unescape(token, from: 0, at: start) { token, index, out throws(Failure) in
            guard token[index] == UInt8(ascii: "u") || token[index] == UInt8(ascii: "U") else { return false }
            let length = token[index] == UInt8(ascii: "u") ? 4 : 8
            let scalar = try unicodeEscape(token, from: index + 1, length: length, at: start)
            out += Array(String(scalar).utf8)
            index += 1 + length
            return true
        }
        guard !out.contains(0), let text = String(validating: out, as: UTF8.self) else {
            throw .init(offset: start, reason: "not a valid UTF-8 string")
        }
        return text
    }

    /// The one loop of both quoted tokens: the bytes between the quote at `token[quoteIndex]`
    /// and the next unescaped one. After a backslash, `special` takes the escape its kind has
    /// (advancing `index` past it) or returns false; then a control letter, a skipped line end,
    /// or the byte itself. A NUL or the token's end before the closing quote: refused.
    private static func unescape(
        _ token: [UInt8], from quoteIndex: Int, at start: Int,
        special: (_ token: [UInt8], _ index: inout Int, _ out: inout [UInt8]) throws(Failure) -> Bool
    ) throws(Failure) -> [UInt8] {
        let quote = token[quoteIndex]
        var out: [UInt8] = []
        var index = quoteIndex + 1
        while true {
            guard index < token.count, token[index] != 0 else {
                throw .init(offset: start, reason: "unterminated string constant")
            }
            let byte = token[index]
            if byte == quote { return out }
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard index < token.count, token[index] != 0 else {
                throw .init(offset: start, reason: "unterminated string constant")
            }
            if try special(token, &index, &out) { continue }
            if let control = controlEscape(token[index]) {
                out.append(control)
            } else if token[index] != 0x0A {
                out.append(token[index])
            }
            index += 1
        }
    }

    private static func controlEscape(_ letter: UInt8) -> UInt8? {
        switch letter {
        case UInt8(ascii: "a"): 0x07
        case UInt8(ascii: "b"): 0x08
        case UInt8(ascii: "f"): 0x0C
        case UInt8(ascii: "n"): 0x0A
        case UInt8(ascii: "r"): 0x0D
        case UInt8(ascii: "t"): 0x09
        case UInt8(ascii: "v"): 0x0B
        default: nil
        }
    }

    private static func unicodeEscape(_ token: [UInt8], from start: Int, length: Int, at offset: Int) throws(Failure)
        -> UnicodeScalar
    {
        var value: UInt32 = 0
        guard start + length <= token.count else {
            throw .init(offset: offset, reason: "invalid \(length)-character unicode escape")
        }
        for byte in token[start..<start + length] {
            guard let digit = Hex.digit(byte) else {
                throw .init(offset: offset, reason: "invalid \(length)-character unicode escape")
            }
            value = value << 4 | UInt32(digit)
        }
        guard value != 0, let scalar = UnicodeScalar(value) else {
            throw .init(offset: offset, reason: "invalid \(length)-character unicode escape")
        }
        return scalar
    }

    /// The bytes of a `b'...'` token, with the NUL that ends them (a C string: the bytes stop
    /// at the first NUL, as GLib's `g_variant_new_bytestring` takes them): octal escapes of up
    /// to three digits, `\a \b \f \n \r \t \v`, a backslash before a line end skipped.
    static func unescapeBytes(_ token: [UInt8], at start: Int) throws(Failure) -> [UInt8] {
        var out = try unescape(token, from: 1, at: start) { token, index, out throws(Failure) in
            guard token[index] >= 0x30, token[index] <= 0x37 else { return false }
            var value = UInt8(token[index] - 0x30)
            index += 1
            for _ in 0..<2 where index < token.count && token[index] >= 0x30 && token[index] <= 0x37 {
                value = value &<< 3 | (token[index] - 0x30)
                index += 1
            }
            out.append(value)
            return true
        }
        if let nul = out.firstIndex(of: 0) { out.removeSubrange(nul...) }
        return out + [0]
    }
}
