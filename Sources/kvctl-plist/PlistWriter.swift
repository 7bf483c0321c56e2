import FoundationEssentials
import KVValues

/// Writes kvd values as property lists, XML or binary, in the forms ``XMLPlistReader`` and
/// ``BinaryPlistReader`` (and CoreFoundation) read back as the same values.
///
/// Written here rather than by Foundation's `PropertyListSerialization`: in the release build
/// with the Swift runtime linked statically (what the `.deb` ships), that refused arrays and
/// strings as objects of type "Not A Type". Total for valid values but one: an XML property list
/// keeps dates to the second, so a date with a fraction is refused for XML rather than rounded.
enum PlistWriter {
    /// `members` as the dictionary at the top of an XML property list (CoreFoundation's layout:
    /// tabs, keys sorted).
    static func xml(_ members: [String: Value]) throws(PlistRefusal) -> [UInt8] {
        var out = Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">

            """.utf8)
        try xml(.dictionary(members), path: [], indent: 0, into: &out)
        out += Array("</plist>\n".utf8)
        return out
    }

    private static func xml(_ value: Value, path: [String], indent: Int, into out: inout [UInt8]) throws(PlistRefusal) {
        let tabs = [UInt8](repeating: 0x09, count: indent)
        func line(_ text: String) { out += tabs + Array(text.utf8) + [0x0A] }
        switch value {
        case .string(let text): line("<string>\(escaped(text))</string>")
        case .integer(let integer): line("<integer>\(integer)</integer>")
        case .real(let real): line("<real>\(real)</real>")
        case .bool(let flag): line(flag ? "<true/>" : "<false/>")
        case .date(let date):
            guard date.timeIntervalSinceReferenceDate.rounded() == date.timeIntervalSinceReferenceDate else {
                throw PlistRefusal(
                    "\(PlistPlace.describe(path)) is a date with a fraction of a second (\(RFC3339.format(date))), which an XML property list cannot keep (it holds whole seconds): export with --format binary"
                )
            }
            line("<date>\(RFC3339.format(date).prefix(19))Z</date>")
        case .data(let data): line("<data>\(data.base64EncodedString())</data>")
        case .array(let elements):
            guard !elements.isEmpty else { return line("<array/>") }
            line("<array>")
            for (position, element) in elements.enumerated() {
                try xml(element, path: PlistPlace.element(path, position), indent: indent + 1, into: &out)
            }
            line("</array>")
        case .dictionary(let members):
            guard !members.isEmpty else { return line("<dict/>") }
            line("<dict>")
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                out += tabs + [0x09] + Array("<key>\(escaped(key))</key>\n".utf8)
                try xml(member, path: path + [key], indent: indent + 1, into: &out)
            }
            line("</dict>")
        }
    }

    /// `text` with `&`, `<` and `>` written as entities.
    private static func escaped(_ text: String) -> String {
        guard
            text.utf8.contains(where: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") })
        else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    // MARK: Binary

    /// An object of a binary list before references are numbered.
    private enum Node {
        case scalar([UInt8])
        case array([Int])
        case dictionary(keys: [Int], values: [Int])
    }

    /// `members` as the dictionary at the top of a binary property list (`bplist00`).
    static func binary(_ members: [String: Value]) -> [UInt8] {
        var nodes: [Node] = []
        let top = add(.dictionary(members), to: &nodes)
        let referenceSize = byteCount(UInt64(nodes.count))
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        offsets.reserveCapacity(nodes.count)
        for node in nodes {
            offsets.append(out.count)
            switch node {
            case .scalar(let bytes): out += bytes
            case .array(let elements):
                out += header(0xA, elements.count)
                for element in elements { out += bigEndian(UInt64(element), referenceSize) }
            case .dictionary(let keys, let values):
                out += header(0xD, keys.count)
                for reference in keys + values { out += bigEndian(UInt64(reference), referenceSize) }
            }
        }
        let table = out.count
        let offsetSize = byteCount(UInt64(table))
        for offset in offsets { out += bigEndian(UInt64(offset), offsetSize) }
        out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
        out += bigEndian(UInt64(nodes.count), 8) + bigEndian(UInt64(top), 8) + bigEndian(UInt64(table), 8)
        return out
    }

    /// Adds `value` (its children first) and returns its object number.
    private static func add(_ value: Value, to nodes: inout [Node]) -> Int {
        let node: Node
        switch value {
        case .bool(let flag): node = .scalar([flag ? 0x09 : 0x08])
        case .integer(let integer):
            switch integer {
            case 0...0xFF: node = .scalar([0x10] + bigEndian(UInt64(integer), 1))
            case 0...0xFFFF: node = .scalar([0x11] + bigEndian(UInt64(integer), 2))
            case 0...0xFFFF_FFFF: node = .scalar([0x12] + bigEndian(UInt64(integer), 4))
            default: node = .scalar([0x13] + bigEndian(UInt64(bitPattern: integer), 8))
            }
        case .real(let real): node = .scalar([0x23] + bigEndian(real.bitPattern, 8))
        case .date(let date): node = .scalar([0x33] + bigEndian(date.timeIntervalSinceReferenceDate.bitPattern, 8))
        case .data(let data): node = .scalar(header(0x4, data.count) + [UInt8](data))
        case .string(let text):
            if text.utf8.allSatisfy({ $0 < 0x80 }) {
                node = .scalar(header(0x5, text.utf8.count) + Array(text.utf8))
            } else {
                let units = Array(text.utf16)
                node = .scalar(header(0x6, units.count) + units.flatMap { bigEndian(UInt64($0), 2) })
            }
        case .array(let elements):
            node = .array(elements.map { add($0, to: &nodes) })
        case .dictionary(let members):
            let sorted = members.sorted(by: { $0.key < $1.key })
            let keys = sorted.map { add(.string($0.key), to: &nodes) }
            node = .dictionary(keys: keys, values: sorted.map { add($0.value, to: &nodes) })
        }
        nodes.append(node)
        return nodes.count - 1
    }

    /// A marker of type `kind` with `count`: in its low nibble, or as an integer after `0xF`.
    private static func header(_ kind: UInt8, _ count: Int) -> [UInt8] {
        guard count >= 15 else { return [kind << 4 | UInt8(count)] }
        let size = byteCount(UInt64(count))
        let exponent: UInt8 = size == 1 ? 0 : size == 2 ? 1 : size <= 4 ? 2 : 3
        return [kind << 4 | 0xF, 0x10 | exponent] + bigEndian(UInt64(count), 1 << Int(exponent))
    }

    /// The fewest bytes (1, 2, 4 or 8) that hold `value`.
    private static func byteCount(_ value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }

    static func bigEndian(_ value: UInt64, _ size: Int) -> [UInt8] {
        (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }
}
