import KVValues

/// One line of a history file as retention reads it (``RetainedLine``), its value and writer
/// not decoded: what a prune of the file decides on, and where the line lies to copy it whole.
/// A new entry, not in the file yet, stands in the same list with no place in the file.
struct HistoryLine: RetainedLine {
    let revision: Int64
    let time: Int64?
    let key: Key
    let isValue: Bool
    /// Where the line starts in the file (its checksum); `-1 - i` for the `i`th new entry.
    let offset: Int64
    /// Its bytes, the LF included (0 for a new entry: not encoded yet).
    let length: Int

    /// The line of new entry `index`.
    init(new entry: HistoryEntry, index: Int) {
        (revision, time, key, isValue) = (entry.revision, entry.time, entry.key, entry.value != nil)
        (offset, length) = (-1 - Int64(index), 0)
    }

    init(_ entry: HistoryLineParser.Entry, offset: Int64, length: Int) {
        (revision, time, key, isValue) = (entry.revision, entry.time, entry.key, entry.isValue)
        (self.offset, self.length) = (offset, length)
    }

    /// The index of the new entry it is, or nil for a line of the file.
    var newIndex: Int? { offset < 0 ? Int(-1 - offset) : nil }
}

/// Reads what retention needs of a history line's JSON payload without decoding the rest:
/// the value is skipped over, not parsed. It agrees with ``HistoryFormat/read(_:domain:)`` on
/// every line kvd writes (``HistoryFormat/append(_:to:)``) and on the `since` lines; it gives
/// nil for any line it cannot tell the same of (escapes in the key, whitespace, members twice,
/// a `null` value, anything malformed), and its caller then reads the file that way. A value
/// is not checked to be valid typed JSON (behind its checksum, only a writer other than kvd
/// could make it not): such a line is copied or dropped as it is, and refused when the file is
/// next read whole.
enum HistoryLineParser {
    struct Entry {
        let revision: Int64
        let time: Int64?
        let key: Key
        let isValue: Bool
    }

    enum Parsed {
        case entry(Entry)
        case since(Int64)
    }

    /// The line whose payload is `range` of `bytes`, or nil (see the type).
    static func parse(_ bytes: [UInt8], _ range: Range<Int>) -> Parsed? {
        bytes.withUnsafeBufferPointer { buffer in
            var cursor = JSONCursor(bytes: buffer, at: range.lowerBound, end: range.upperBound)
            return parse(&cursor)
        }
    }

    private static func parse(_ cursor: inout JSONCursor) -> Parsed? {
        var fields = Fields()
        guard cursor.take(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let name = cursor.plainString(), cursor.take(UInt8(ascii: ":")), fields.read(name, from: &cursor)
            else { return nil }
        } while cursor.take(UInt8(ascii: ","))
        guard cursor.take(UInt8(ascii: "}")), cursor.atEnd else { return nil }
        return fields.parsed
    }

    /// The members it reads or checks.
    private enum Member: Int, CaseIterable {
        case revision, time, since, uid, pid, program, app, key, value

        var name: StaticString {
            switch self {
            case .revision: "revision"
            case .time: "time"
            case .since: "since"
            case .uid: "uid"
            case .pid: "pid"
            case .program: "program"
            case .app: "app"
            case .key: "key"
            case .value: "value"
            }
        }

        /// The member named by `range` of the cursor's bytes, if any.
        static func named(_ range: Range<Int>, in cursor: JSONCursor) -> Member? {
            allCases.first { member in
                member.name.withUTF8Buffer { name in
                    name.count == range.count && name.elementsEqual(cursor.bytes[range])
                }
            }
        }
    }

    /// The members read so far.
    private struct Fields {
        var revision: Int64?
        var time: Int64?
        var key: Key?
        var value = false
        var since: Int64?
        var seen = 0

        /// Reads the value of the member named by `range`; false if the line is not one to
        /// read this way.
        mutating func read(_ range: Range<Int>, from cursor: inout JSONCursor) -> Bool {
            guard let member = Member.named(range, in: cursor) else { return cursor.skipValue() }
            guard seen & (1 << member.rawValue) == 0 else { return false }
            seen |= 1 << member.rawValue
            switch member {
            case .revision:
                revision = cursor.integer()
                return revision != nil
            case .time:
                time = cursor.integer()
                return time != nil
            case .since:
                since = cursor.integer()
                return since != nil
            case .uid: return cursor.integer().map { $0 >= 0 && $0 <= Int64(UInt32.max) } ?? false
            case .pid: return cursor.integer().map { $0 > 0 && $0 <= Int64(Int32.max) } ?? false
            case .program, .app: return cursor.skipString()
            case .key:
                guard let range = cursor.plainString() else { return false }
                key = try? Key(validating: cursor.text(range))
                return key != nil
            case .value:
                value = true
                return !cursor.startsNull && cursor.skipValue()
            }
        }

        var parsed: Parsed? {
            if let since, key == nil { return .since(since) }
            guard let revision, revision > 0, let key else { return nil }
            return .entry(Entry(revision: revision, time: time, key: key, isValue: value))
        }
    }
}

/// Walks JSON bytes as kvd writes them (no whitespace).
struct JSONCursor {
    let bytes: UnsafeBufferPointer<UInt8>
    var at: Int
    let end: Int

    var atEnd: Bool { at == end }
    var startsNull: Bool { at < end && bytes[at] == UInt8(ascii: "n") }

    mutating func take(_ byte: UInt8) -> Bool {
        guard at < end, bytes[at] == byte else { return false }
        at += 1
        return true
    }

    func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// A string with no escape and no control character: the range of its bytes (valid UTF-8).
    mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = at
        while at < end {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") {
                at += 1
                let range = start..<(at - 1)
                return String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) == nil
                    ? nil : range
            }
            guard byte != UInt8(ascii: "\\"), byte >= 0x20 else { return nil }
            at += 1
        }
        return nil
    }

    /// Skips a string, escapes included.
    mutating func skipString() -> Bool {
        guard take(UInt8(ascii: "\"")) else { return false }
        while at < end {
            switch bytes[at] {
            case UInt8(ascii: "\""):
                at += 1
                return true
            case UInt8(ascii: "\\"): at += 2
            case 0..<0x20: return false
            default: at += 1
            }
        }
        return false
    }

    /// An integer as JSON writes one (`-?(0|[1-9][0-9]*)`), within `Int64`.
    mutating func integer() -> Int64? {
        let negative = take(UInt8(ascii: "-"))
        let start = at
        var value: Int64 = 0
        while at < end, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
            let digit = Int64(bytes[at] - UInt8(ascii: "0"))
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(digit)
            guard !overflow, !overflow2 else { return nil }
            value = sum
            at += 1
        }
        guard at > start, bytes[start] != UInt8(ascii: "0") || at - start == 1 else { return nil }
        guard at == end || [UInt8(ascii: ","), UInt8(ascii: "}")].contains(bytes[at]) else { return nil }
        return negative ? -value : value
    }

    /// Skips one value: a string, an object or array (to its matching end, strings skipped
    /// whole), or a scalar (up to the next `,` or `}`). Not validated.
    mutating func skipValue() -> Bool {
        guard at < end else { return false }
        switch bytes[at] {
        case UInt8(ascii: "\""): return skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["): return skipNested()
        default:
            let start = at
            while at < end, bytes[at] != UInt8(ascii: ","), bytes[at] != UInt8(ascii: "}") { at += 1 }
            return at > start
        }
    }

    private mutating func skipNested() -> Bool {
        var depth = 0
        while at < end {
            switch bytes[at] {
            case UInt8(ascii: "\""):
                guard skipString() else { return false }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 {
                    at += 1
                    return true
                }
            default: break
            }
            at += 1
        }
        return false
    }
}
