/// Writes ``JSON`` as UTF-8 text: compact for the wire, indented with sorted members for files
/// people read. Reals always carry a `.` or an exponent (`1.0`), so they read back as reals.
public struct JSONWriter {
    /// Indentation per level when pretty; `nil` writes compact JSON.
    public var indent: Int?
    /// Whether object members are written in sorted order (always true when pretty).
    public var sortKeys: Bool
    /// When pretty, the deepest level put on lines of its own: the members and elements of
    /// containers deeper than this are written on one line, as compact JSON with `": "`. This
    /// bounds how much indentation can add to a text (see ``StorageFormat`` in KVStorage).
    public var maxIndentedLevel: Int

    public init(pretty: Bool = false, sortKeys: Bool = false, maxIndentedLevel: Int = .max) {
        self.indent = pretty ? 2 : nil
        self.sortKeys = sortKeys || pretty
        self.maxIndentedLevel = maxIndentedLevel
    }

    /// The JSON text of `json`.
    public func bytes(_ json: JSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(json, into: &out)
        return out
    }

    /// The JSON text of `json` as a string.
    public func string(_ json: JSON) -> String {
        String(decoding: bytes(json), as: UTF8.self)
    }

    /// Appends the JSON text of `json` to `out`.
    public func write(_ json: JSON, into out: inout [UInt8], level: Int = 0) {
        switch json {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .integer(let number): Self.writeInteger(number, into: &out)
        case .real(let number): Self.writeReal(number, into: &out)
        case .string(let text): Self.writeString(text, into: &out)
        case .array(let elements):
            let lines = indentsChildren(at: level)
            out.append(UInt8(ascii: "["))
            for index in elements.indices {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                if lines { newline(into: &out, level: level + 1) }
                write(elements[index], into: &out, level: level + 1)
            }
            if lines, !elements.isEmpty { newline(into: &out, level: level) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            let lines = indentsChildren(at: level)
            out.append(UInt8(ascii: "{"))
            var first = true
            func member(_ name: String, _ value: JSON) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                if lines { newline(into: &out, level: level + 1) }
                writeMemberName(name, into: &out)
                write(value, into: &out, level: level + 1)
            }
            if sortKeys {
                for name in members.keys.sorted() { member(name, members[name]!) }
            } else {
                for (name, value) in members { member(name, value) }
            }
            if lines, !members.isEmpty { newline(into: &out, level: level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes `"name":`, with a space after the colon when pretty.
    public func writeMemberName(_ name: String, into out: inout [UInt8]) {
        Self.writeString(name, into: &out)
        out.append(UInt8(ascii: ":"))
        if indent != nil { out.append(UInt8(ascii: " ")) }
    }

    /// Whether the children of a container at `level` go on lines of their own.
    private func indentsChildren(at level: Int) -> Bool {
        indent != nil && level < maxIndentedLevel
    }

    /// When pretty, a line break and the indentation of `level`.
    public func newline(into out: inout [UInt8], level: Int) {
        guard let indent else { return }
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * level))
    }

    /// Writes a signed integer in decimal, without making a `String` first.
    public static func writeInteger(_ number: Int64, into out: inout [UInt8]) {
        if number < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = number.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            out.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// Writes a finite double in its shortest round-tripping form, always marked as a real.
    public static func writeReal(_ number: Double, into out: inout [UInt8]) {
        precondition(number.isFinite, "JSON cannot carry a non-finite real")
        let text = number.description  // shortest round-trip digits: "1.0", "1e-05", "5e+20"
        out.append(contentsOf: text.utf8)
    }

    /// Writes `text` as a JSON string literal, escaping quotes, backslashes and control characters.
    /// Runs of bytes that need no escape are copied in one piece (the hot path of every reply).
    public static func writeString(_ text: String, into out: inout [UInt8]) {
        var text = text
        out.append(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            var runStart = 0
            var index = plainPrefixLength(bytes)
            while index < bytes.count {
                let byte = bytes[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                    appendEscape(byte, into: &out)
                    runStart = index + 1
                }
                index += 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// How many leading bytes need no escape, checked 8 at a time (most strings need none).
    private static func plainPrefixLength(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        guard let base = bytes.baseAddress else { return 0 }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var index = 0
        while index + 8 <= bytes.count {
            let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            // A byte below 0x20, or equal to '"' or '\\', sets its high bit in one of these
            // (the classic has-zero-byte test; bytes of 0x80 and above are excluded).
            let control = (word &- ones &* 0x20) & ~word
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let found = (control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & highs
            if found != 0 { return index }
            index += 8
        }
        return index
    }

    private static func appendEscape(_ byte: UInt8, into out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
        case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        default:
            out.append(contentsOf: [
                0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), Hex.lowercaseDigits[Int(byte >> 4)],
                Hex.lowercaseDigits[Int(byte & 0xF)],
            ])
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends the UTF-8 of `text`, a literal, in one copy (`append(contentsOf: "…".utf8)` goes
    /// through the string's views: several times the instructions, on every log record).
    public mutating func appendLiteral(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }
}
