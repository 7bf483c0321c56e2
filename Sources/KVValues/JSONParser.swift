/// A strict RFC 8259 JSON parser for untrusted input.
///
/// Bounded by ``JSONLimits`` (size and nesting), so no input can exhaust the stack or memory;
/// strings must be valid UTF-8 and escapes must form valid scalars; duplicate object members,
/// trailing garbage, integers outside signed 64 bits and non-finite reals are refused with a
/// ``JSONSyntaxError`` that names the byte offset. Pure and thread-safe.
public struct JSONParser {
    private let bytes: UnsafeBufferPointer<UInt8>
    private let limits: JSONLimits
    private var position = 0
    private var depth = 0

    private init(bytes: UnsafeBufferPointer<UInt8>, limits: JSONLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// Parses one complete JSON text (whitespace around it is allowed).
    public static func parse(
        _ input: some Collection<UInt8>, limits: JSONLimits = .default
    ) throws(JSONSyntaxError) -> JSON {
        guard input.count <= limits.maxBytes else {
            throw JSONSyntaxError(
                offset: 0, reason: "input of \(input.count) bytes exceeds the limit of \(limits.maxBytes)")
        }
        let result: Result<JSON, JSONSyntaxError>? = input.withContiguousStorageIfAvailable { buffer in
            parseBuffer(buffer, limits: limits)
        }
        switch result ?? Array(input).withUnsafeBufferPointer({ parseBuffer($0, limits: limits) }) {
        case .success(let json): return json
        case .failure(let error): throw error
        }
    }

    /// Parses a JSON text given as a Swift string.
    public static func parse(_ text: String, limits: JSONLimits = .default) throws(JSONSyntaxError) -> JSON {
        try parse(Array(text.utf8), limits: limits)
    }

    /// Parses one JSON object into its members in document order, without building a
    /// dictionary (for small, hot messages such as varlink calls). A member named `inner` whose
    /// value is an object comes back the same way, as `inner`, and not among `members`.
    /// Limits, errors and the refusal of duplicate members are those of ``parse(_:limits:)``;
    /// returns nil for valid JSON that is not an object.
    public static func parseMembers(
        _ input: some Collection<UInt8>, limits: JSONLimits = .default, inner: String
    ) throws(JSONSyntaxError) -> (members: JSONMembers, inner: JSONMembers?)? {
        guard input.count <= limits.maxBytes else {
            _ = try parse(input, limits: limits)
            return nil
        }
        typealias Outcome = Result<(members: JSONMembers, inner: JSONMembers?)?, JSONSyntaxError>
        func run(_ buffer: UnsafeBufferPointer<UInt8>) -> Outcome {
            var parser = JSONParser(bytes: buffer, limits: limits)
            do throws(JSONSyntaxError) {
                parser.skipWhitespace()
                guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "{") else {
                    _ = try parse(buffer, limits: limits)  // the syntax error, if any
                    return .success(nil)
                }
                let object = try parser.parseMemberList(inner: inner)
                parser.skipWhitespace()
                guard parser.position == buffer.count else {
                    throw parser.error("unexpected data after the JSON value")
                }
                return .success(object)
            } catch {
                return .failure(error)
            }
        }
        let result: Outcome? = input.withContiguousStorageIfAvailable { run($0) }
        return try (result ?? Array(input).withUnsafeBufferPointer { run($0) }).get()
    }

    private static func parseBuffer(_ buffer: UnsafeBufferPointer<UInt8>, limits: JSONLimits) -> Result<
        JSON, JSONSyntaxError
    > {
        var parser = JSONParser(bytes: buffer, limits: limits)
        do throws(JSONSyntaxError) {
            parser.skipWhitespace()
            let value = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
            return .success(value)
        } catch {
            return .failure(error)
        }
    }

    private func error(_ reason: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(offset: offset ?? position, reason: reason)
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSON {
        guard position < bytes.count else { throw error("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character \(describe(bytes[position]))")
        }
    }

    private func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        guard position + count <= bytes.count,
            memcmpEqual(bytes.baseAddress! + position, literal.utf8Start, count)
        else { throw error("invalid literal, expected \(literal)") }
        position += count
    }

    private func memcmpEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        for index in 0..<count where a[index] != b[index] { return false }
        return true
    }

    private mutating func enterNesting() throws(JSONSyntaxError) {
        depth += 1
        guard depth <= limits.maxDepth else { throw error("nesting deeper than \(limits.maxDepth) levels") }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSON {
        var members: [String: JSON] = [:]
        try forEachMember { parser, name, nameOffset throws(JSONSyntaxError) in
            let value = try parser.parseValue()
            guard members.updateValue(value, forKey: name) == nil else {
                throw parser.error("duplicate member \"\(name)\"", at: nameOffset)
            }
        }
        return .object(members)
    }

    /// ``parseObject()`` in document order, with the object member `inner` parsed the same way.
    private mutating func parseMemberList(inner: String?) throws(JSONSyntaxError) -> (
        members: JSONMembers, inner: JSONMembers?
    ) {
        var result: (members: JSONMembers, inner: JSONMembers?) = (JSONMembers(), nil)
        result.members.pairs.reserveCapacity(4)
        var names = MemberNameSet()
        try forEachMember { parser, name, nameOffset throws(JSONSyntaxError) in
            let seen =
                (inner != nil && result.inner != nil && name == inner)
                || names.contains(name, among: result.members.pairs)
            if name == inner, parser.position < parser.bytes.count, parser.bytes[parser.position] == UInt8(ascii: "{") {
                result.inner = try parser.parseMemberList(inner: nil).members
            } else {
                result.members.pairs.append((name, try parser.parseValue()))
            }
            guard !seen else { throw parser.error("duplicate member \"\(name)\"", at: nameOffset) }
        }
        return result
    }

    /// Reads an object from its `{`: for each member, its name and the offset of the name,
    /// with the parser positioned at the value, which `value` must consume.
    private mutating func forEachMember(
        _ value: (inout JSONParser, String, Int) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        try enterNesting()
        position += 1
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                throw error("expected a member name in quotes")
            }
            let nameOffset = position
            let name = try parseString()
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                throw error("expected ':' after member name")
            }
            position += 1
            skipWhitespace()
            try value(&self, name, nameOffset)
            skipWhitespace()
            guard position < bytes.count else { throw error("unexpected end of input in object") }
            let byte = bytes[position]
            position += 1
            if byte == UInt8(ascii: "}") { break }
            guard byte == UInt8(ascii: ",") else { throw error("expected ',' or '}' in object", at: position - 1) }
        }
        depth -= 1
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSON {
        try enterNesting()
        position += 1
        var elements: [JSON] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard position < bytes.count else { throw error("unexpected end of input in array") }
            let byte = bytes[position]
            position += 1
            if byte == UInt8(ascii: "]") { break }
            guard byte == UInt8(ascii: ",") else { throw error("expected ',' or ']' in array", at: position - 1) }
        }
        depth -= 1
        return .array(elements)
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        let start = position
        position += 1
        let contentStart = position
        // Fast path: no escapes.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[contentStart..<position])
                position += 1
                guard let string = Self.string(fromUTF8: slice) else {
                    throw error("string is not valid UTF-8", at: start)
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("unescaped control character in string") }
            position += 1
        }
        var scratch = Array(bytes[contentStart..<position])
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let string = String(validating: scratch, as: UTF8.self) else {
                    throw error("string is not valid UTF-8", at: start)
                }
                return string
            case UInt8(ascii: "\\"):
                try parseEscape(into: &scratch)
            case 0..<0x20:
                throw error("unescaped control character in string")
            default:
                scratch.append(byte)
                position += 1
            }
        }
        throw error("unterminated string", at: start)
    }

    /// `bytes` as a string if they are valid UTF-8. Plain ASCII, the usual case, skips the
    /// generic validator (which costs a metadata lookup per call on the hot path).
    private static func string(fromUTF8 bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var combined: UInt8 = 0
        for byte in bytes { combined |= byte }
        if combined < 0x80 { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    private mutating func parseEscape(into scratch: inout [UInt8]) throws(JSONSyntaxError) {
        position += 1
        guard position < bytes.count else { throw error("unterminated escape") }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""): scratch.append(0x22)
        case UInt8(ascii: "\\"): scratch.append(0x5C)
        case UInt8(ascii: "/"): scratch.append(0x2F)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                else {
                    throw error("unpaired surrogate in \\u escape")
                }
                position += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate in \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw error("unpaired surrogate in \\u escape")
            }
            scratch.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
        default:
            throw error("invalid escape \\\(Character(Unicode.Scalar(byte)))", at: position - 2)
        }
    }

    private mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            guard let digit = Hex.digit(byte) else { throw error("invalid hex digit in \\u escape") }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> JSON {
        let start = position
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw error("invalid number", at: start) }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
            if position < bytes.count, isDigit(bytes[position]) { throw error("leading zero in number", at: start) }
        } else {
            skipDigits()
        }
        var isReal = false
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            isReal = true
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else { throw error("expected digits after '.'") }
            skipDigits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            isReal = true
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard position < bytes.count, isDigit(bytes[position]) else { throw error("expected digits in exponent") }
            skipDigits()
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        if isReal {
            guard let real = Double(text), real.isFinite else {
                throw error("number \(text) is out of range for a real", at: start)
            }
            return .real(real)
        }
        guard let integer = Int64(text) else {
            throw error("integer \(text) is out of the signed 64-bit range", at: start)
        }
        return .integer(integer)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while position < bytes.count, isDigit(bytes[position]) { position += 1 }
    }
}
