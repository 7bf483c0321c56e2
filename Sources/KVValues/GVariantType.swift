/// GVariant type strings (`i`, `as`, `a{sv}`, `(ids)`, `mi`) and the parser's patterns over them,
/// as GLib defines them: the type rules ``GVariantText`` needs to infer a value's type the way
/// `g_variant_parse` does. A pattern is a type string that may also hold `*` (any type), `M`
/// (maybe a maybe), `N` (some number type) and `S` (some string type). Pure.
public enum GVariantType {
    /// The basic (non-container) type letters.
    static let basic: [UInt8] = Array("bynqiuxthdsog".utf8)

    /// The end of the one complete definite type starting at `start` in `type`, or nil when there
    /// is none there (a bad letter, an unclosed bracket, a dictionary entry whose key is not basic).
    static func scan(_ type: [UInt8], from start: Int, depth: Int = 0) -> Int? {
        guard start < type.count, depth < Limits.valueDepth else { return nil }
        let letter = type[start]
        if basic.contains(letter) || letter == UInt8(ascii: "v") { return start + 1 }
        switch letter {
        case UInt8(ascii: "a"), UInt8(ascii: "m"): return scan(type, from: start + 1, depth: depth + 1)
        case UInt8(ascii: "("):
            var index = start + 1
            while index < type.count, type[index] != UInt8(ascii: ")") {
                guard let next = scan(type, from: index, depth: depth + 1) else { return nil }
                index = next
            }
            return index < type.count ? index + 1 : nil
        case UInt8(ascii: "{"):
            guard start + 1 < type.count, basic.contains(type[start + 1]),
                let end = scan(type, from: start + 2, depth: depth + 1), end < type.count,
                type[end] == UInt8(ascii: "}")
            else { return nil }
            return end + 1
        default: return nil
        }
    }

    /// Whether `type` is exactly one complete definite type.
    public static func isDefinite(_ type: String) -> Bool {
        let bytes = Array(type.utf8)
        return scan(bytes, from: 0) == bytes.count
    }

    /// The types of a tuple type's items (`(is)` gives `i`, `s`), or nil when `type` is no tuple.
    static func items(ofTuple type: String) -> [String]? {
        let bytes = Array(type.utf8)
        guard bytes.first == UInt8(ascii: "("), bytes.last == UInt8(ascii: ")") else { return nil }
        var items: [String] = []
        var index = 1
        while index < bytes.count - 1 {
            guard let end = scan(bytes, from: index) else { return nil }
            items.append(String(decoding: bytes[index..<end], as: UTF8.self))
            index = end
        }
        return items
    }

    /// The key and value types of a dictionary entry type (`{sv}`), or nil.
    static func parts(ofEntry type: String) -> (key: String, value: String)? {
        let bytes = Array(type.utf8)
        guard bytes.count >= 4, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return nil }
        return (String(UnicodeScalar(bytes[1])), String(decoding: bytes[2..<bytes.count - 1], as: UTF8.self))
    }

    /// Whether `text` is a D-Bus object path: `/`, or `/` and segments of `A-Z a-z 0-9 _`
    /// joined by `/`, neither empty nor ending in `/`.
    static func isObjectPath(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = false
        for byte in bytes {
            if byte == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
                continue
            }
            previousSlash = false
            let plain =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "_")
            if !plain { return false }
        }
        return true
    }

    /// Whether `text` is a D-Bus signature: complete definite types, none of them a maybe.
    static func isSignature(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard !bytes.contains(UInt8(ascii: "m")) else { return false }
        var index = 0
        while index < bytes.count {
            guard let end = scan(bytes, from: index) else { return false }
            index = end
        }
        return true
    }

    /// Copies one whole pattern item from `source` at `index` (its `a`/`m`/`M` prefixes and one
    /// element, brackets and all) to `out`.
    private static func copyItem(_ source: [UInt8], _ index: inout Int, to out: inout [UInt8]) {
        while index < source.count, [UInt8(ascii: "a"), UInt8(ascii: "m"), UInt8(ascii: "M")].contains(source[index]) {
            out.append(source[index])
            index += 1
        }
        var brackets = 0
        repeat {
            guard index < source.count else { return }
            let byte = source[index]
            if byte == UInt8(ascii: "(") || byte == UInt8(ascii: "{") { brackets += 1 }
            if byte == UInt8(ascii: ")") || byte == UInt8(ascii: "}") { brackets -= 1 }
            out.append(byte)
            index += 1
        } while brackets > 0
    }

    /// The pattern both `left` and `right` fit (the elements of an array must share one), or
    /// nil when there is none: `*` takes the other side's item, `M` the other side's maybe or
    /// nothing, `N` a number type, `S` a string type.
    static func coalesce(_ left: [UInt8], _ right: [UInt8]) -> [UInt8]? {
        var sides = (left, right)
        var indices = (0, 0)
        var out: [UInt8] = []
        while indices.0 < sides.0.count, indices.1 < sides.1.count {
            let (a, b) = (sides.0[indices.0], sides.1[indices.1])
            if a == b {
                out.append(a)
                indices.0 += 1
                indices.1 += 1
                continue
            }
            if step(&sides.0, &indices.0, against: sides.1, &indices.1, into: &out) { continue }
            if step(&sides.1, &indices.1, against: sides.0, &indices.0, into: &out) { continue }
            return nil
        }
        return indices.0 == sides.0.count && indices.1 == sides.1.count ? out : nil
    }

    /// One step of ``coalesce(_:_:)`` where `one`'s item is the looser one; false when it is not.
    private static func step(
        _ one: inout [UInt8], _ oneIndex: inout Int, against other: [UInt8], _ otherIndex: inout Int,
        into out: inout [UInt8]
    ) -> Bool {
        let (a, b) = (one[oneIndex], other[otherIndex])
        switch a {
        case UInt8(ascii: "*") where b != UInt8(ascii: ")"):
            copyItem(other, &otherIndex, to: &out)
            oneIndex += 1
        case UInt8(ascii: "M") where b == UInt8(ascii: "m"):
            out.append(b)
            otherIndex += 1
        case UInt8(ascii: "M"):
            oneIndex += 1
        case UInt8(ascii: "N") where Array("ynqiuxthd".utf8).contains(b),
            UInt8(ascii: "S") where Array("sog".utf8).contains(b):
            out.append(b)
            otherIndex += 1
            oneIndex += 1
        default: return false
        }
        return true
    }
}
