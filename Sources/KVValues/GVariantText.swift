/// GLib's GVariant text format (`g_variant_parse`), read in Swift: what dconf's keyfiles hold
/// after `key=`. The same language and the same type inference as GLib's parser: `5` is an
/// int32, `5.0` a double, `'x'` and `"x"` strings, `b'x'` a bytestring (NUL-terminated),
/// `uint32 5` and `@as []` typed, `<5>` a variant, `(1, 'a')` a tuple, `{'a': 1}` a dictionary
/// and `{'a', 1}` one entry, `just 5` and `@mi nothing` maybes (and a value where a maybe is
/// expected is `just` it). A text GLib refuses (no common type in an array, a type it cannot
/// infer such as `[]`, a number out of range, an invalid object path) is refused.
///
/// Pure; bounded: nesting deeper than ``maxDepth`` is refused, as GLib refuses it.
public enum GVariantText {
    /// The deepest nesting read (GLib's `G_VARIANT_MAX_RECURSION_DEPTH`).
    public static let maxDepth = 128

    /// Why a text was refused: the byte offset and GLib's words.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var offset: Int
        public var reason: String
        public var description: String { "at byte \(offset): \(reason)" }
    }

    /// The value `text` spells, its type inferred as GLib infers it (`type`: the type wanted
    /// instead, as `g_variant_parse(type, ...)`).
    public static func parse(_ text: String, as type: String? = nil) throws(ParseError) -> GVariant {
        var stream = TokenStream(bytes: Array(text.utf8))
        let node = try stream.parseValue(depth: 0)
        let value: GVariant
        if let type {
            guard GVariantType.isDefinite(type) else {
                throw ParseError(offset: 0, reason: "not a definite type: \(type)")
            }
            value = try node.value(as: type)
        } else {
            value = try node.resolved()
        }
        stream.skipSpace()
        guard stream.index == stream.bytes.count else {
            throw ParseError(offset: stream.index, reason: "expected end of input")
        }
        return value
    }
}

/// One parsed piece of text, before its type is known.
indirect enum GVariantNode {
    case array([GVariantNode], at: Int)
    case tuple([GVariantNode], at: Int)
    case variant(GVariantNode, at: Int)
    /// Entries of a dictionary; `single`: one entry alone, `{k, v}`.
    case dictionary([(GVariantNode, GVariantNode)], single: Bool, at: Int)
    case string(String, at: Int)
    case bytes([UInt8], at: Int)
    case number(String, at: Int)
    case boolean(Bool, at: Int)
    case maybe(GVariantNode?, at: Int)
    case typed(String, GVariantNode, at: Int)
}

/// The tokens of the text format, as GLib splits them.
struct TokenStream {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }
    static func isAlpha(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }
    static func isAlnum(_ byte: UInt8) -> Bool { isAlpha(byte) || (byte >= 0x30 && byte <= 0x39) }

    mutating func skipSpace() {
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
    }

    /// The next token's bounds (after spaces), nil at the end or at a NUL.
    mutating func peek() -> Range<Int>? {
        skipSpace()
        guard index < bytes.count, bytes[index] != 0 else { return nil }
        return index..<tokenEnd(from: index)
    }

    private func tokenEnd(from start: Int) -> Int {
        let first = bytes[start]
        var end = start + 1
        switch first {
        case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), 0x30...0x39:
            end = start
            while end < bytes.count, Self.isAlnum(bytes[end]) || [0x2D, 0x2B, 0x2E].contains(bytes[end]) { end += 1 }
        case UInt8(ascii: "b") where start + 1 < bytes.count && (bytes[start + 1] == 0x27 || bytes[start + 1] == 0x22):
            end = quotedEnd(from: start + 2, quote: bytes[start + 1])
        case 0x61...0x7A:
            end = start
            while end < bytes.count, Self.isAlnum(bytes[end]) { end += 1 }
        case 0x27, 0x22: end = quotedEnd(from: start + 1, quote: first)
        case UInt8(ascii: "@"), UInt8(ascii: "%"):
            var brackets = 0
            while end < bytes.count, bytes[end] != 0, ![0x2C, 0x3A, 0x3E, 0x5D].contains(bytes[end]),
                !Self.isSpace(bytes[end])
            {
                if bytes[end] == 0x28 || bytes[end] == 0x7B {
                    brackets += 1
                } else if bytes[end] == 0x29 || bytes[end] == 0x7D {
                    if brackets == 0 { break }
                    brackets -= 1
                }
                end += 1
            }
        default: break
        }
        return end
    }

    /// Past the closing `quote` (a `\` escapes the byte after it), or the end of the text.
    private func quotedEnd(from start: Int, quote: UInt8) -> Int {
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == quote || byte == 0 { break }
            if byte == UInt8(ascii: "\\") {
                end += 1
                if end == bytes.count || bytes[end] == 0 { break }
            }
            end += 1
        }
        return end < bytes.count && bytes[end] != 0 ? end + 1 : end
    }

    /// The next token as text ("" at the end).
    mutating func token() -> [UInt8] { peek().map { Array(bytes[$0]) } ?? [] }

    /// Takes the next token when it is `word`.
    mutating func consume(_ word: String) -> Bool {
        guard let range = peek(), bytes[range].elementsEqual(word.utf8) else { return false }
        index = range.upperBound
        return true
    }

    mutating func require(_ word: String, _ purpose: String) throws(GVariantText.ParseError) {
        skipSpace()
        guard consume(word) else { throw .init(offset: index, reason: "expected '\(word)'\(purpose)") }
    }

    mutating func take() -> [UInt8] {
        guard let range = peek() else { return [] }
        index = range.upperBound
        return Array(bytes[range])
    }
}
