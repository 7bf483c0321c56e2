import Glibc
import KVValues

/// One commit as the log keeps it: absolute changes at one revision (see ``StorageFormat``),
/// of one domain, or of several (a group: all of them or none, as one line is whole or not).
struct LogRecord: Sendable, Equatable {
    /// One domain's changes.
    struct Part: Sendable, Equatable {
        var domain: Domain
        var changes: [Change]
    }

    var revision: Int64
    /// When it was committed, in milliseconds since the Unix epoch (UTC): what history shows.
    /// Nil in a record of a kvd before history.
    var time: Int64?
    /// Who asked for it (the connection's process), for history's blame; nil when unknown
    /// (kvd's own commits, a record of a kvd before writers).
    var writer: Writer?
    /// `set`, `delete`, `apply`, `deleteDomain` or `group`; for people reading the log, not for
    /// replay.
    var kind: String
    /// The first domain's changes (a record of one domain has only these: no array to allocate
    /// on every commit).
    var first: Part
    /// A group's other parts, of other domains.
    var more: [Part] = []

    init(
        revision: Int64, domain: Domain, kind: String, changes: [Change], time: Int64? = nil, writer: Writer? = nil
    ) {
        self.revision = revision
        self.time = time
        self.writer = writer
        self.kind = kind
        self.first = Part(domain: domain, changes: changes)
    }

    /// A record of `parts` (at least one).
    init(revision: Int64, kind: String, parts: [Part], time: Int64? = nil, writer: Writer? = nil) {
        self.revision = revision
        self.time = time
        self.writer = writer
        self.kind = kind
        self.first = parts[0]
        self.more = Array(parts.dropFirst())
    }

    /// Every part, in order.
    var parts: [Part] { [first] + more }

    /// The record of a group: what an older kvd cannot read (it has no `domain`), so it sets
    /// it aside whole instead of applying a part.
    var isGroup: Bool { !more.isEmpty }
}

/// What a scan of the log found.
struct LogScan {
    var baseRevision: Int64
    /// The records to replay, in order.
    var records: [LogRecord]
    /// Bytes up to the end of the last record to replay: where the next record goes.
    var validLength: Int
    /// Records that cannot be used but were written whole, or are followed by valid records:
    /// never the torn tail of an unacknowledged write, so they are kept and reported.
    var damage: [LogDamage] = []
    /// Why the log ends before the file does: a torn record with nothing valid after it.
    var tornTail: String?

    /// The largest revision of any record, used or not: the store's revision must not fall
    /// below one that may have been acknowledged.
    var highestRevision: Int64 {
        max(records.last?.revision ?? baseRevision, damage.compactMap(\.revision).max() ?? 0)
    }
}

/// One record of the log that could not be used.
struct LogDamage: Equatable, CustomStringConvertible {
    /// Where its line starts.
    var offset: Int
    var reason: String
    /// Its revision, when that much of it can be read.
    var revision: Int64?

    var description: String {
        "the record at byte \(offset)\(revision.map { " (revision \($0))" } ?? "") \(reason)"
    }
}

/// The sizes of a record as the limits check them (see ``LogFormat/append(_:to:entryBytes:)``).
struct RecordSizes {
    /// The JSON payload's bytes (the line without its checksum, space and LF).
    var payloadBytes: Int
    /// The bytes of the `changes` array's members: what a `Watch` reply of this commit carries
    /// (of a group: the largest part's, as each domain's watchers get their own part).
    var changesBytes: Int
    /// Where the value of a record's sole change lies in the encoded bytes, as compact typed
    /// JSON with keys sorted (as ``EntryTable`` stores it): a `Set` stores those bytes, its
    /// value encoded once. Nil for a record of several changes or a removal.
    var soleValue: Range<Int>? = nil
}

/// Encodes and scans `kvd.wal`. Pure functions; thread-safe.
enum LogFormat {
    /// The framed header line for a log starting at `baseRevision`.
    static func header(baseRevision: Int64) -> [UInt8] {
        frame(
            .object([
                "format": .string(StorageFormat.logFormat),
                "formatVersion": .integer(StorageFormat.logFormatVersion),
                "baseRevision": .integer(baseRevision),
            ]))
    }

    /// The parser limits of a record's line: a value sits 3 levels deep in it
    /// (`{"changes":[{"value": V}]}`); any record kvd has ever written is read.
    static let limits = JSONLimits(framingDepth: 3, maxBytes: maxRecordBytes)

    /// The largest record payload written and read (``StorageFormat/maxDomainFileBytes``): the
    /// writer refuses a change whose record would be larger.
    static let maxRecordBytes = StorageFormat.maxDomainFileBytes

    /// The framed line of one record.
    static func encode(_ record: LogRecord) -> [UInt8] {
        var line: [UInt8] = []
        var entryBytes: [Int] = []
        append(record, to: &line, entryBytes: &entryBytes)
        return line
    }

    /// Appends the framed line of one record to `out`, written straight to bytes (it runs for
    /// every change), and for each change its key and value as compact typed JSON, in bytes (for
    /// a removal, the key alone), to `entryBytes`, part after part: what it costs in a reply
    /// (``DomainBudget``). A one-part record is
    /// `{"revision":N,"time":T,"domain":D,"kind":K,"changes":[...]}`; a group
    /// `{"revision":N,"time":T,"kind":"group","parts":[{"domain":D,"changes":[...]},...]}`
    /// (the writer's `"uid":U,"pid":P,"program":"…","app":"…"` after `time`, those known).
    @discardableResult
    static func append(_ record: LogRecord, to out: inout [UInt8], entryBytes: inout [Int]) -> RecordSizes {
        let lineStart = out.count
        out.appendLiteral("00000000 ")  // the checksum, filled in below
        let payloadStart = out.count
        openStamped(revision: record.revision, time: record.time, writer: record.writer, into: &out)
        var changesBytes = 0
        var lastValue: Range<Int>?
        if record.isGroup {
            out.appendLiteral(#","kind":"#)
            JSONWriter.writeString(record.kind, into: &out)
            out.appendLiteral(#","parts":["#)
            for (index, part) in record.parts.enumerated() {
                out.appendLiteral(index == 0 ? #"{"domain":"# : #",{"domain":"#)
                JSONWriter.writeString(part.domain.name, into: &out)
                out.appendLiteral(#","changes":["#)
                changesBytes = max(
                    changesBytes, appendChanges(part.changes, to: &out, entryBytes: &entryBytes, &lastValue))
                out.appendLiteral("]}")
            }
            out.append(UInt8(ascii: "]"))
        } else {
            out.appendLiteral(#","domain":"#)
            JSONWriter.writeString(record.first.domain.name, into: &out)
            out.appendLiteral(#","kind":"#)
            JSONWriter.writeString(record.kind, into: &out)
            out.appendLiteral(#","changes":["#)
            changesBytes = appendChanges(record.first.changes, to: &out, entryBytes: &entryBytes, &lastValue)
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        let payloadBytes = out.count - payloadStart
        finishLine(in: &out, from: lineStart)
        let sole = !record.isGroup && record.first.changes.count == 1
        return RecordSizes(payloadBytes: payloadBytes, changesBytes: changesBytes, soleValue: sole ? lastValue : nil)
    }

    /// Appends the members of a `changes` array; returns their bytes (what a `Watch` reply of
    /// that domain's changes carries). `lastValue` becomes where the last change's value lies
    /// (nil for a removal).
    private static func appendChanges(
        _ changes: [Change], to out: inout [UInt8], entryBytes: inout [Int], _ lastValue: inout Range<Int>?
    ) -> Int {
        let changesStart = out.count
        let writer = JSONWriter(sortKeys: true)  // as EntryTable stores values
        for (index, change) in changes.enumerated() {
            out.appendLiteral(index == 0 ? #"{"key":"# : #",{"key":"#)
            var start = out.count
            JSONWriter.writeString(change.key.name, into: &out)
            var bytes = out.count - start
            lastValue = nil
            if let value = change.value {
                out.appendLiteral(#","value":"#)
                start = out.count
                writer.write(value.typedJSON, into: &out)
                bytes += out.count - start
                lastValue = start..<out.count
            }
            entryBytes.append(bytes)
            out.append(UInt8(ascii: "}"))
        }
        return out.count - changesStart
    }

    /// Opens the object of a log record or history entry: `{"revision":N`, then `,"time":T`
    /// and the writer's members (``Writer/appendMembers(to:)``) when present.
    static func openStamped(revision: Int64, time: Int64?, writer: Writer?, into out: inout [UInt8]) {
        out.appendLiteral(#"{"revision":"#)
        JSONWriter.writeInteger(revision, into: &out)
        if let time {
            out.appendLiteral(#","time":"#)
            JSONWriter.writeInteger(time, into: &out)
        }
        writer?.appendMembers(to: &out)
    }

    /// Appends one framed line whose JSON payload `payload` writes (checksum, space, payload, LF).
    static func appendLine(to out: inout [UInt8], _ payload: (inout [UInt8]) -> Void) {
        let lineStart = out.count
        out.append(contentsOf: "00000000 ".utf8)
        payload(&out)
        finishLine(in: &out, from: lineStart)
    }

    /// `crc32hex SP json LF`.
    static func frame(_ json: JSON) -> [UInt8] {
        var line = Array("00000000 ".utf8)
        JSONWriter().write(json, into: &line)
        finishLine(in: &line, from: 0)
        return line
    }

    /// Fills in the checksum of the line at `lineStart` of `out` (`00000000 ` and its payload
    /// up to the end) and ends it with LF.
    static func finishLine(in out: inout [UInt8], from lineStart: Int) {
        let crc = CRC32.checksum(out[(lineStart + 9)...])
        for (index, shift) in stride(from: 28, through: 0, by: -4).enumerated() {
            out[lineStart + index] = Hex.lowercaseDigits[Int((crc >> UInt32(shift)) & 0xF)]
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// The index of the first LF in `bytes` at or after `start`, nil if none (`memchr`: a
    /// history line may be megabytes long).
    static func lineEnd(in bytes: [UInt8], from start: Int) -> Int? {
        bytes.withUnsafeBufferPointer { buffer in
            guard start < buffer.count,
                let found = memchr(buffer.baseAddress! + start, 0x0A, buffer.count - start)
            else { return nil }
            return buffer.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// The line starting at `start`, if it is whole and its checksum holds: where its JSON
    /// payload lies and where the next line starts. Nil for a torn or corrupt line.
    static func line(in bytes: [UInt8], at start: Int) -> (payload: Range<Int>, next: Int)? {
        lineEnd(in: bytes, from: start).flatMap { line(in: bytes, at: start, end: $0) }
    }

    /// ``line(in:at:)`` of the line whose LF is at `end` (``lineEnd(in:from:)``: found once).
    static func line(in bytes: [UInt8], at start: Int, end: Int) -> (payload: Range<Int>, next: Int)? {
        guard end - start > 9,
            bytes[start + 8] == UInt8(ascii: " "),
            let crc = UInt32(String(decoding: bytes[start..<start + 8], as: UTF8.self), radix: 16),
            CRC32.checksum(bytes[(start + 9)..<end]) == crc
        else { return nil }
        return ((start + 9)..<end, end + 1)
    }
}

/// CRC-32 (IEEE 802.3, reflected, as in zlib).
enum CRC32 {
    /// Eight tables for slicing-by-8 (Intel's method): table `k` advances the CRC of a byte
    /// followed by `k` zero bytes, so eight bytes are folded per step.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
            tables[index] = crc
        }
        for index in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[(slice - 1) * 256 + index]
                tables[slice * 256 + index] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        bytes.withContiguousStorageIfAvailable { checksum(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { checksum($0) }
    }

    private static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        tables.withUnsafeBufferPointer { t in
            var offset = 0
            while offset + 8 <= bytes.count {
                let low = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) ^ crc
                let high = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
                crc =
                    t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                offset += 8
            }
            while offset < bytes.count {
                crc = t[Int((crc ^ UInt32(bytes[offset])) & 0xFF)] ^ (crc >> 8)
                offset += 1
            }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
