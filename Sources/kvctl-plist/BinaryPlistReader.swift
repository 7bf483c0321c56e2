import FoundationEssentials
import KVValues

/// Reads a binary property list (`bplist00`) into kvd values, strictly: nothing is changed on
/// the way in, so whatever kvd cannot hold exactly is refused naming its key.
///
/// Refused: integers beyond signed 64 bits (16-byte integers included), reals and dates that are
/// NaN or infinite, dates outside the years 0001-9999, strings with a lone UTF-16 surrogate or
/// ASCII strings with bytes above 0x7F, UIDs, sets, nulls, dictionaries with a key that is not a
/// string or with one key twice, cycles, nesting deeper than ``PlistLimits/depth``, and any
/// damage (offsets, counts or references outside the file) with a message that says so.
///
/// Bounded: a first pass over the object graph (each object once, memoized) computes what the
/// values would expand to and refuses a list over ``PlistLimits/expandedBytes`` before a value
/// is built, so memory stays within a few times the input plus that limit. Recursion is bounded
/// by ``PlistLimits/depth``. Format: CoreFoundation's CFBinaryPList.c.
struct BinaryPlistReader {
    private let bytes: [UInt8]
    private let offsetSize: Int
    private let referenceSize: Int
    private let objectCount: Int
    private let topObject: Int
    /// Where the offset table starts: objects lie in `8..<tableStart`.
    private let tableStart: Int

    /// Whether `bytes` start like a binary property list.
    static func recognizes(_ bytes: [UInt8]) -> Bool { bytes.starts(with: Array("bplist".utf8)) }

    /// Checks the header and trailer (the offset table inside the file, sizes 1-8 bytes).
    init(_ bytes: [UInt8]) throws(PlistRefusal) {
        self.bytes = bytes
        guard bytes.count >= 8, bytes.starts(with: Array("bplist00".utf8)) else {
            let version = String(decoding: bytes.dropFirst(6).prefix(2), as: UTF8.self).debugDescription
            throw Self.damaged(
                bytes.count < 8 ? "it is cut short (\(bytes.count) bytes)" : "its version is \(version), not \"00\"")
        }
        guard bytes.count >= 40 else {
            throw Self.damaged("it is cut short (\(bytes.count) bytes, less than its header and trailer)")
        }
        let trailer = bytes.count - 32
        offsetSize = Int(bytes[trailer + 6])
        referenceSize = Int(bytes[trailer + 7])
        let count = Self.bigEndian(bytes, trailer + 8, 8)
        let top = Self.bigEndian(bytes, trailer + 16, 8)
        let table = Self.bigEndian(bytes, trailer + 24, 8)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
            throw Self.damaged("its trailer gives offsets or references of \(offsetSize) and \(referenceSize) bytes")
        }
        guard count >= 1, count <= UInt64(trailer), top < count, table >= 8, table <= UInt64(trailer),
            count * UInt64(offsetSize) <= UInt64(trailer) - table
        else { throw Self.damaged("its trailer's object count, top object or offset table lies outside the file") }
        objectCount = Int(count)
        topObject = Int(top)
        tableStart = Int(table)
    }

    /// The top dictionary's members, sorted by key.
    func topDictionary() throws(PlistRefusal) -> [(key: String, value: Value)] {
        var costs = [Int](repeating: Self.unknown, count: objectCount)
        let total = try cost(topObject, depth: 0, costs: &costs)
        let top = try object(topObject)
        guard top.marker >> 4 == 0xD else { throw PlistPlace.notADictionary(Self.kind(top.marker)) }
        let sorted = try sortedMembers(top, path: [])
        if total > PlistLimits.expandedBytes {
            // Name the key whose value alone is too large, if one is (memoized: no more work
            // than the first pass).
            for member in sorted where try cost(member.value, depth: 1, costs: &costs) > PlistLimits.expandedBytes {
                throw PlistPlace.tooLarge([member.name])
            }
            throw PlistPlace.tooLarge([])
        }
        var members: [(key: String, value: Value)] = []
        for member in sorted { members.append((member.name, try value(member.value, path: [member.name], depth: 1))) }
        return members
    }

    /// Dictionary `object`'s keys, each with its value's object number, sorted by key (so the
    /// first refusal is the same whatever order the writer chose); refuses a key given twice.
    private func sortedMembers(_ object: Object, path: [String]) throws(PlistRefusal) -> [(name: String, value: Int)] {
        let (keys, values) = try dictionaryReferences(object)
        var members: [(name: String, value: Int)] = []
        for (key, value) in zip(keys, values) { members.append((try string(key, path: path, isKey: true), value)) }
        members.sort { $0.name < $1.name }
        for (first, second) in zip(members, members.dropFirst()) where first.name == second.name {
            throw PlistPlace.duplicateKey(path, first.name)
        }
        return members
    }

    // MARK: Objects

    private struct Object {
        var marker: UInt8
        /// Where the object's content starts (after its marker and any count).
        var start: Int
        /// Its count (bytes, UTF-16 units, elements or members) or, for scalars, the low nibble.
        var count: Int
    }

    /// Object `index`: its marker, and for sized objects their count and where their content
    /// starts, checked to end before the offset table.
    private func object(_ index: Int) throws(PlistRefusal) -> Object {
        let offset = Int(Self.bigEndian(bytes, tableStart + index * offsetSize, offsetSize) & 0x7FFF_FFFF_FFFF_FFFF)
        guard offset >= 8, offset < tableStart else { throw Self.damaged("object \(index) lies outside the file") }
        let marker = bytes[offset]
        let low = Int(marker & 0x0F)
        var start = offset + 1
        guard let layout = Self.layout(marker: marker, referenceSize: referenceSize) else {
            throw Self.damaged("object \(index) has the unknown type 0x\(String(marker, radix: 16))")
        }
        let unit = layout.unit
        var count = layout.count
        if unit > 0, low == 0xF {
            guard start < tableStart, bytes[start] >> 4 == 0x1, bytes[start] & 0x0F <= 3 else {
                throw Self.damaged("object \(index) has no valid length")
            }
            let size = 1 << Int(bytes[start] & 0x0F)
            guard start + 1 + size <= tableStart else { throw Self.damaged("object \(index) lies outside the file") }
            let length = Self.bigEndian(bytes, start + 1, size)
            guard length <= UInt64(tableStart) else { throw Self.damaged("object \(index) is longer than the file") }
            count = Int(length)
            start += 1 + size
        }
        let length = unit > 0 ? count * unit : (marker >> 4 == 0x0 ? 0 : count)
        guard length <= tableStart - start else {
            throw Self.damaged("object \(index) runs past the end of the objects")
        }
        return Object(marker: marker, start: start, count: count)
    }

    /// The size of one unit of an object with `marker` (0: the count is in bytes, or none) and
    /// its count before an extended length; `nil` for an unknown type.
    private static func layout(marker: UInt8, referenceSize: Int) -> (unit: Int, count: Int)? {
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x0: return (0, 0)
        case 0x1, 0x2: return (0, 1 << low)
        case 0x3: return (0, 8)
        case 0x4, 0x5, 0x7: return (1, low)
        case 0x6: return (2, low)
        case 0x8: return (0, low + 1)
        case 0xA, 0xB, 0xC: return (referenceSize, low)
        case 0xD: return (2 * referenceSize, low)
        default: return nil
        }
    }

    /// The object numbers that array or set `object` refers to.
    private func references(_ start: Int, count: Int) throws(PlistRefusal) -> [Int] {
        var result: [Int] = []
        result.reserveCapacity(count)
        for position in 0..<count {
            let reference = Self.bigEndian(bytes, start + position * referenceSize, referenceSize)
            guard reference < UInt64(objectCount) else {
                throw Self.damaged("a reference points to object \(reference) of \(objectCount)")
            }
            result.append(Int(reference))
        }
        return result
    }

    private func dictionaryReferences(_ object: Object) throws(PlistRefusal) -> (keys: [Int], values: [Int]) {
        let keys = try references(object.start, count: object.count)
        let values = try references(object.start + object.count * referenceSize, count: object.count)
        return (keys, values)
    }

    // MARK: The expansion pass

    private static let unknown = -1
    private static let visiting = -2

    /// A lower bound of object `index`'s typed JSON bytes, saturating just above the limit;
    /// refuses cycles and nesting deeper than ``PlistLimits/depth``.
    private func cost(_ index: Int, depth: Int, costs: inout [Int]) throws(PlistRefusal) -> Int {
        if costs[index] == Self.visiting { throw Self.damaged("object \(index) contains itself (a cycle)") }
        if costs[index] >= 0 { return costs[index] }
        let object = try object(index)
        var total: Int
        switch object.marker >> 4 {
        case 0x4, 0x5, 0x6, 0x7: total = object.count + 2
        case 0xA, 0xB, 0xC, 0xD:
            guard depth < PlistLimits.depth else { throw PlistPlace.tooDeep([]) }
            costs[index] = Self.visiting
            let children = try references(object.start, count: object.count * (object.marker >> 4 == 0xD ? 2 : 1))
            total = 2 + children.count
            for child in children {
                total += try cost(child, depth: depth + 1, costs: &costs)
                if total > PlistLimits.expandedBytes { break }
            }
        default: total = 1
        }
        costs[index] = min(total, PlistLimits.expandedBytes + 1)
        return costs[index]
    }

    // MARK: Values

    /// Object `index` as a kvd value; `path` names it for messages.
    private func value(_ index: Int, path: [String], depth: Int) throws(PlistRefusal) -> Value {
        let object = try object(index)
        if let scalar = try scalar(object, path: path) { return scalar }
        switch object.marker >> 4 {
        case 0x4: return .data(Data(bytes[object.start..<object.start + object.count]))
        case 0x5, 0x6, 0x7: return .string(try string(index, path: path, isKey: false))
        case 0xA:
            guard depth < PlistLimits.depth else { throw PlistPlace.tooDeep(path) }
            var elements: [Value] = []
            for (position, element) in try references(object.start, count: object.count).enumerated() {
                elements.append(try value(element, path: PlistPlace.element(path, position), depth: depth + 1))
            }
            return .array(elements)
        case 0x1, 0x2, 0x3,
            0x0 where object.marker != 0:
            throw Self.damaged(
                "\(PlistPlace.describe(path)) has the invalid marker 0x\(String(object.marker, radix: 16))")
        case 0xD:
            guard depth < PlistLimits.depth else { throw PlistPlace.tooDeep(path) }
            var members: [String: Value] = [:]
            for (name, value) in try sortedMembers(object, path: path) {
                members[name] = try self.value(value, path: path + [name], depth: depth + 1)
            }
            return .dictionary(members)
        default:
            throw PlistPlace.cannotHold(path, Self.kind(object.marker))
        }
    }

    /// A boolean, integer, real or date object as a kvd value; `nil` for other objects.
    private func scalar(_ object: Object, path: [String]) throws(PlistRefusal) -> Value? {
        switch object.marker {
        case 0x08: return .bool(false)
        case 0x09: return .bool(true)
        case 0x10...0x14: return .integer(try integer(object, path: path))
        case 0x22:
            let real = Double(Float(bitPattern: UInt32(Self.bigEndian(bytes, object.start, 4))))
            guard real.isFinite else { throw PlistPlace.notFinite(path, "\(real)") }
            return .real(real)
        case 0x23:
            let real = Double(bitPattern: Self.bigEndian(bytes, object.start, 8))
            guard real.isFinite else { throw PlistPlace.notFinite(path, "\(real)") }
            return .real(real)
        case 0x33:
            let seconds = Double(bitPattern: Self.bigEndian(bytes, object.start, 8))
            guard PlistPlace.isStorableDate(sinceReferenceDate: seconds) else {
                throw PlistRefusal(
                    "\(PlistPlace.describe(path)) is a date \(seconds) s from 2001-01-01, which is not a date in the years 0001 to 9999 kvd holds; nothing imported"
                )
            }
            return .date(Date(timeIntervalSinceReferenceDate: seconds))
        default: return nil
        }
    }

    /// An integer object: 1, 2 and 4 bytes unsigned, 8 bytes signed, 16 bytes signed 128-bit
    /// (how CoreFoundation writes those above `Int64.max`); refused outside signed 64 bits.
    private func integer(_ object: Object, path: [String]) throws(PlistRefusal) -> Int64 {
        let size = object.count
        if size < 8 { return Int64(Self.bigEndian(bytes, object.start, size)) }
        if size == 8 { return Int64(bitPattern: Self.bigEndian(bytes, object.start, 8)) }
        let high = Int64(bitPattern: Self.bigEndian(bytes, object.start, 8))
        let low = Self.bigEndian(bytes, object.start + 8, 8)
        let wide = Int128(high) << 64 | Int128(low)
        guard let narrow = Int64(exactly: wide) else { throw PlistPlace.integerTooBig(path, String(wide)) }
        return narrow
    }

    /// String object `index` (ASCII, UTF-16 big-endian or UTF-8), strictly decoded; refused if
    /// it is not a string (a dictionary key), or not valid text.
    private func string(_ index: Int, path: [String], isKey: Bool) throws(PlistRefusal) -> String {
        let object = try object(index)
        let content = bytes[object.start..<object.start + object.count * (object.marker >> 4 == 0x6 ? 2 : 1)]
        switch object.marker >> 4 {
        case 0x5:
            guard let byte = content.first(where: { $0 >= 0x80 }) else {
                return String(decoding: content, as: UTF8.self)
            }
            throw Self.damaged(
                "a string marked ASCII holds the byte 0x\(String(byte, radix: 16)) (in \(PlistPlace.describe(path)))")
        case 0x7:
            guard let text = String(validating: content, as: UTF8.self) else {
                throw Self.damaged("a UTF-8 string is not valid UTF-8 (in \(PlistPlace.describe(path)))")
            }
            return text
        case 0x6:
            var units: [UInt16] = []
            units.reserveCapacity(object.count)
            for position in 0..<object.count {
                units.append(UInt16(Self.bigEndian(bytes, object.start + 2 * position, 2)))
            }
            var text = String.UnicodeScalarView()
            var iterator = units.makeIterator()
            var decoder = UTF16()
            while true {
                switch decoder.decode(&iterator) {
                case .scalarValue(let scalar): text.append(scalar)
                case .emptyInput: return String(text)
                case .error: throw PlistPlace.loneSurrogate(path, Self.firstLoneSurrogate(units), isKey: isKey)
                }
            }
        default:
            guard isKey else { throw PlistPlace.cannotHold(path, Self.kind(object.marker)) }
            throw PlistRefusal(
                "\(PlistPlace.describe(path)): a dictionary key is \(Self.kind(object.marker)), not a string; nothing imported"
            )
        }
    }

    private static func firstLoneSurrogate(_ units: [UInt16]) -> UInt32 {
        var position = 0
        while position < units.count {
            let unit = units[position]
            if (0xD800...0xDBFF).contains(unit), position + 1 < units.count,
                (0xDC00...0xDFFF).contains(units[position + 1])
            {
                position += 2
                continue
            }
            if (0xD800...0xDFFF).contains(unit) { return UInt32(unit) }
            position += 1
        }
        return 0xFFFD
    }

    // MARK: Helpers

    /// What a marker's object is, for messages.
    static func kind(_ marker: UInt8) -> String {
        switch marker >> 4 {
        case 0x0: marker == 0 ? "a null" : "a boolean"
        case 0x1: "an integer"
        case 0x2: "a real"
        case 0x3: "a date"
        case 0x4: "data"
        case 0x5, 0x6, 0x7: "a string"
        case 0x8: "a UID (from a keyed archive)"
        case 0xA: "an array"
        case 0xB, 0xC: "a set"
        case 0xD: "a dictionary"
        default: "an object of unknown type"
        }
    }

    /// `size` bytes at `offset` as a big-endian number (the caller checked the bounds).
    private static func bigEndian(_ bytes: [UInt8], _ offset: Int, _ size: Int) -> UInt64 {
        var value: UInt64 = 0
        for byte in bytes[offset..<offset + size] { value = value << 8 | UInt64(byte) }
        return value
    }

    private static func damaged(_ reason: String) -> PlistRefusal {
        PlistRefusal("not a binary property list kvd can read (damaged or cut short?): \(reason)")
    }
}
