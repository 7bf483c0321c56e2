import FoundationEssentials
import KVValues

/// Reads an XML property list into kvd values, strictly: nothing is changed on the way in.
///
/// The grammar is Apple's PropertyList-1.0 DTD: an optional `<?xml?>` declaration, `<!DOCTYPE>`
/// and comments, then `<plist>` around one object (or the object alone). `<dict>` holds
/// `<key>` and object pairs; `<array>`, `<string>`, `<integer>` (decimal or `0x` hex, signed 64
/// bits), `<real>` (finite), `<true/>`, `<false/>`, `<date>` (exactly `YYYY-MM-DDTHH:MM:SSZ`,
/// a real calendar date in the years 0001-9999), `<data>` (base64). Text may use the five XML
/// entities, character references and CDATA sections; any other entity is refused (no entity is
/// ever expanded from a DOCTYPE). A dictionary written `<dict><key>CF$UID</key>...` is that
/// dictionary: XML has no UIDs, so what `kvctl export --format xml` writes reads back as it was.
///
/// Refusals name the key, or say where the damage is (`line 3`). Recursion is bounded by
/// ``PlistLimits/depth``; every value is built once from the input, so memory stays within a
/// few times the input.
struct XMLPlistReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The top dictionary's members, in the order the file lists them.
    mutating func topDictionary() throws(PlistRefusal) -> [(key: String, value: Value)] {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        try skipMisc(prolog: true)
        var tag = try readTag()
        var inPlist = false
        if tag.name == "plist", !tag.closing {
            inPlist = !tag.empty
            guard inPlist else { throw PlistPlace.notADictionary("nothing") }
            tag = try readTag()
        }
        guard tag.name == "dict", !tag.closing else {
            if tag.closing { throw damaged("the property list holds nothing") }
            throw PlistPlace.notADictionary(Self.kind(tag.name))
        }
        let members = try dictionary(tag, path: [], depth: 1)
        if inPlist {
            let end = try readTag()
            guard end.name == "plist", end.closing else {
                throw damaged("expected </plist>, found <\(end.closing ? "/" : "")\(end.name)>")
            }
        }
        try skipMisc(prolog: false)
        guard index == bytes.count else { throw damaged("there is more after the end of the property list") }
        return members
    }

    // MARK: Objects

    private struct Tag {
        var name: String
        var closing = false
        var empty = false
    }

    /// The members of the `<dict>` just read (`open`), up to its `</dict>`.
    private mutating func dictionary(_ open: Tag, path: [String], depth: Int) throws(PlistRefusal) -> [(
        key: String, value: Value
    )] {
        guard depth <= PlistLimits.depth else { throw PlistPlace.tooDeep(path) }
        var members: [(key: String, value: Value)] = []
        if open.empty { return members }
        var seen: Set<String> = []
        while true {
            let tag = try readTag()
            if tag.closing, tag.name == "dict" { return members }
            guard tag.name == "key", !tag.closing else {
                throw damaged(
                    "\(path.isEmpty ? "the property list" : PlistPlace.describe(path)) has <\(tag.closing ? "/" : "")\(tag.name)> where a <key> belongs"
                )
            }
            let key = tag.empty ? "" : try text(until: "key", path: path, isKey: true)
            guard seen.insert(key).inserted else { throw PlistPlace.duplicateKey(path, key) }
            let valueTag = try readTag()
            guard !valueTag.closing else {
                throw damaged("\(PlistPlace.describe(path + [key])) is missing: the key has no value")
            }
            members.append((key, try value(valueTag, path: path + [key], depth: depth)))
        }
    }

    /// The object that starts with `tag` (already read), up to its closing tag.
    private mutating func value(_ tag: Tag, path: [String], depth: Int) throws(PlistRefusal) -> Value {
        switch tag.name {
        case "dict":
            var members: [String: Value] = [:]
            for member in try dictionary(tag, path: path, depth: depth + 1) { members[member.key] = member.value }
            return .dictionary(members)
        case "array":
            guard depth < PlistLimits.depth else { throw PlistPlace.tooDeep(path) }
            var elements: [Value] = []
            if tag.empty { return .array(elements) }
            while true {
                let next = try readTag()
                if next.closing {
                    guard next.name == "array" else { throw damaged("expected </array>, found </\(next.name)>") }
                    return .array(elements)
                }
                elements.append(try value(next, path: PlistPlace.element(path, elements.count), depth: depth + 1))
            }
        case "true", "false":
            if !tag.empty {
                let end = try readTag()
                guard end.closing, end.name == tag.name else { throw damaged("<\(tag.name)> must be empty") }
            }
            return .bool(tag.name == "true")
        case "string":
            return .string(tag.empty ? "" : try text(until: "string", path: path, isKey: false))
        case "integer", "real", "date", "data":
            let content = tag.empty ? "" : try text(until: tag.name, path: path, isKey: false)
            return try Self.scalar(tag.name, content, path: path)
        default:
            throw PlistRefusal(
                "\(PlistPlace.describe(path)) is <\(tag.name)>, which is not a property-list type; nothing imported")
        }
    }

    /// The value of an `<integer>`, `<real>`, `<date>` or `<data>` whose text is `content`.
    private static func scalar(_ name: String, _ content: String, path: [String]) throws(PlistRefusal) -> Value {
        let scalars = content.unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, isSpace(scalars[start]) { start = scalars.index(after: start) }
        while end > start, isSpace(scalars[scalars.index(before: end)]) { end = scalars.index(before: end) }
        let trimmed = String(Substring(scalars[start..<end]))
        switch name {
        case "integer":
            switch integer(trimmed) {
            case .value(let integer): return .integer(integer)
            case .outOfRange: throw PlistPlace.integerTooBig(path, trimmed)
            case .invalid:
                throw PlistRefusal(
                    "\(PlistPlace.describe(path)) is the <integer> \"\(trimmed.prefix(80))\", which is not a whole number; nothing imported"
                )
            }
        case "real":
            guard let real = Double(trimmed) else {
                throw PlistRefusal(
                    "\(PlistPlace.describe(path)) is the <real> \"\(trimmed.prefix(80))\", which is not a number; nothing imported"
                )
            }
            guard real.isFinite else { throw PlistPlace.notFinite(path, trimmed) }
            return .real(real)
        case "date":
            guard let date = date(trimmed) else {
                throw PlistRefusal(
                    "\(PlistPlace.describe(path)) is the <date> \"\(trimmed.prefix(80))\", which is not a date of the years 0001 to 9999 written YYYY-MM-DDTHH:MM:SSZ; nothing imported"
                )
            }
            return .date(date)
        default:
            var compact = ""
            compact.unicodeScalars.append(contentsOf: scalars.filter { !isSpace($0) })
            guard let data = Data(base64Encoded: compact) else {
                throw PlistRefusal("\(PlistPlace.describe(path)) is <data> that is not base64; nothing imported")
            }
            return .data(data)
        }
    }

    /// What an `<integer>`'s text is.
    enum Integer: Equatable {
        case value(Int64)
        /// A whole number beyond signed 64 bits.
        case outOfRange
        case invalid
    }

    /// An integer written in decimal or `0x` hex with an optional sign, as CoreFoundation reads
    /// them.
    static func integer(_ text: String) -> Integer {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if digits.first == "-" || digits.first == "+" { digits = digits.dropFirst() }
        var radix = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            radix = 16
            digits = digits.dropFirst(2)
        }
        guard !digits.isEmpty,
            digits.utf8.allSatisfy({
                radix == 16 ? Character(Unicode.Scalar($0)).isHexDigit : (0x30...0x39).contains($0)
            })
        else { return .invalid }
        guard let magnitude = UInt64(digits, radix: radix) else { return .outOfRange }
        if negative {
            return magnitude <= UInt64(Int64.max) + 1 ? .value(Int64(truncatingIfNeeded: 0 &- magnitude)) : .outOfRange
        }
        return Int64(exactly: magnitude).map(Integer.value) ?? .outOfRange
    }

    /// A date written exactly `YYYY-MM-DDTHH:MM:SSZ` (as CoreFoundation writes them), checked as a
    /// calendar date (month 1-12, a day the month has, 00:00:00-23:59:59) in the years 0001-9999.
    static func date(_ text: String) -> Date? {
        let form = Array("0000-00-00T00:00:00Z".utf8)
        let bytes = Array(text.utf8)
        guard bytes.count == form.count else { return nil }
        for (byte, expected) in zip(bytes, form) {
            guard expected == UInt8(ascii: "0") ? (0x30...0x39).contains(byte) : byte == expected else { return nil }
        }
        guard bytes[17] < UInt8(ascii: "6") else { return nil }  // RFC 3339 allows :60; a property list does not
        return RFC3339.parse(text)
    }

    private static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    // MARK: Lexing

    /// Reads the next tag, skipping white space and comments before it; text there is refused.
    private mutating func readTag() throws(PlistRefusal) -> Tag {
        try skipMisc(prolog: false)
        guard index < bytes.count else { throw damaged("it ends before the property list does") }
        guard bytes[index] == UInt8(ascii: "<") else { throw damaged("there is text where a tag belongs") }
        index += 1
        var tag = Tag(name: "")
        if index < bytes.count, bytes[index] == UInt8(ascii: "/") {
            tag.closing = true
            index += 1
        }
        let start = index
        while index < bytes.count, Self.isNameByte(bytes[index]) { index += 1 }
        guard index > start else { throw damaged("a tag has no name") }
        tag.name = String(decoding: bytes[start..<index], as: UTF8.self)
        while let byte = nextByteOutsideQuotes() {
            if byte == UInt8(ascii: ">") {
                tag.empty = bytes[index - 2] == UInt8(ascii: "/")
                return tag
            }
            if byte == UInt8(ascii: "<") { break }
        }
        throw damaged("the tag <\(tag.name)> is not closed")
    }

    /// The next byte outside quotes, `index` moved past it: a `"..."` or `'...'` span (an
    /// attribute's value, a DOCTYPE's literal) is skipped whole, so a `>` or `<` in it ends
    /// nothing; nil at the end of the input.
    private mutating func nextByteOutsideQuotes() -> UInt8? {
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") else { return byte }
            while index < bytes.count, bytes[index] != byte { index += 1 }
            if index < bytes.count { index += 1 }
        }
        return nil
    }

    /// The text up to `</name>`: entities and character references resolved, CDATA kept as it
    /// is, comments dropped; refused if it is not UTF-8 or not Unicode text.
    private mutating func text(until name: String, path: [String], isKey: Bool) throws(PlistRefusal) -> String {
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "&") {
                try entity(into: &out, path: path, isKey: isKey)
            } else if byte != UInt8(ascii: "<") {
                out.append(byte)
                index += 1
            } else if starts("<![CDATA[") {
                let content = index + 9
                guard let end = find("]]>", from: content) else { throw damaged("a CDATA section is not closed") }
                out += bytes[content..<end]
                index = end + 3
            } else if starts("<!--") {
                guard let end = find("-->", from: index + 4) else { throw damaged("a comment is not closed") }
                index = end + 3
            } else {
                let tag = try readTag()
                guard tag.closing, tag.name == name else {
                    throw damaged("<\(name)> holds a tag (<\(tag.closing ? "/" : "")\(tag.name)>)")
                }
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw PlistRefusal(
                        "\(isKey ? "a key of \(PlistPlace.describe(path))" : PlistPlace.describe(path)) is not UTF-8 text; nothing imported"
                    )
                }
                return text
            }
        }
        throw damaged("it ends inside <\(name)>")
    }

    /// Appends the entity or character reference at `index` (`&amp;`, `&#233;`, `&#xE9;`).
    private mutating func entity(into out: inout [UInt8], path: [String], isKey: Bool) throws(PlistRefusal) {
        guard let end = find(";", from: index, within: 16) else { throw damaged("an & is not followed by an entity") }
        let name = String(decoding: bytes[index + 1..<end], as: UTF8.self)
        index = end + 1
        let named: [String: String] = ["lt": "<", "gt": ">", "amp": "&", "quot": "\"", "apos": "'"]
        if let text = named[name] {
            out += Array(text.utf8)
            return
        }
        var number: UInt32? = nil
        if name.hasPrefix("#x") || name.hasPrefix("#X") {
            number = UInt32(name.dropFirst(2), radix: 16)
        } else if name.hasPrefix("#") {
            number = UInt32(name.dropFirst(), radix: 10)
        } else {
            throw PlistRefusal(
                "\(PlistPlace.describe(path)) uses the entity &\(name);, which property lists do not define; nothing imported"
            )
        }
        guard let code = number, let scalar = Unicode.Scalar(code) else {
            if let code = number, (0xD800...0xDFFF).contains(code) {
                throw PlistPlace.loneSurrogate(path, code, isKey: isKey)
            }
            throw PlistRefusal(
                "\(PlistPlace.describe(path)) holds &\(name);, which is not a Unicode character; nothing imported")
        }
        out += Array(String(scalar).utf8)
    }

    /// Skips white space, comments and processing instructions (and a DOCTYPE in the prolog).
    private mutating func skipMisc(prolog: Bool) throws(PlistRefusal) {
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                index += 1
            } else if starts("<!--") {
                guard let end = find("-->", from: index + 4) else { throw damaged("a comment is not closed") }
                index = end + 3
            } else if starts("<?") {
                guard let end = find("?>", from: index + 2) else { throw damaged("a <? is not closed") }
                index = end + 2
            } else if prolog, starts("<!DOCTYPE") {
                try skipDoctype()
            } else {
                return
            }
        }
    }

    /// Skips `<!DOCTYPE ...>`, an internal subset in `[...]` included (never used).
    private mutating func skipDoctype() throws(PlistRefusal) {
        var brackets = 0
        index += 9
        while let byte = nextByteOutsideQuotes() {
            if byte == UInt8(ascii: "[") {
                brackets += 1
            } else if byte == UInt8(ascii: "]") {
                brackets -= 1
            } else if byte == UInt8(ascii: ">"), brackets <= 0 {
                return
            }
        }
        throw damaged("the <!DOCTYPE> is not closed")
    }

    private func starts(_ text: StaticString) -> Bool {
        let length = text.utf8CodeUnitCount
        guard index + length <= bytes.count else { return false }
        return text.withUTF8Buffer { bytes[index..<index + length].elementsEqual($0) }
    }

    /// Where `text` next occurs from `start`, looking at most `within` bytes ahead.
    private func find(_ text: StaticString, from start: Int, within: Int = .max) -> Int? {
        let needle = text.withUTF8Buffer { Array($0) }
        let last = min(bytes.count, within == .max ? .max : start + within)
        var position = start
        while position + needle.count <= last {
            if bytes[position] == needle[0], bytes[position..<position + needle.count].elementsEqual(needle) {
                return position
            }
            position += 1
        }
        return nil
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
    }

    /// What an element holds, for messages.
    private static func kind(_ name: String) -> String {
        switch name {
        case "array": "an array"
        case "string": "a string"
        case "integer", "real", "true", "false": "a number"
        case "data": "data"
        case "date": "a date"
        default: "<\(name)>"
        }
    }

    private func damaged(_ reason: String) -> PlistRefusal {
        let line = bytes[..<min(index, bytes.count)].reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
        return PlistRefusal("not an XML property list kvd can read (damaged?): line \(line): \(reason)")
    }
}
