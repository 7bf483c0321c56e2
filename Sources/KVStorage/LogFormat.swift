import KVValues

/// One mutation as the log keeps it: absolute changes at one revision (see ``StorageFormat``).
struct LogRecord: Sendable, Equatable {
    var revision: Int64
    var domain: Domain
    /// `set`, `delete`, `apply` or `deleteDomain`; for people reading the log, not for replay.
    var kind: String
    var changes: [Change]
}

/// What a scan of the log found.
struct LogScan {
    var baseRevision: Int64
    var records: [LogRecord]
    /// Bytes of the header and the valid records: where the next record goes.
    var validLength: Int
    /// Why the scan stopped before the end of the file, if it did.
    var damage: String?
    /// Whether a valid-looking record follows the damage (then it was not a torn tail).
    var dataAfterDamage: Bool
}

/// Encodes and scans `kvd.wal`. Pure functions; thread-safe.
enum LogFormat {
    /// The framed header line for a log starting at `baseRevision`.
    static func header(baseRevision: Int64) -> [UInt8] {
        frame(.object([
            "format": .string(StorageFormat.logFormat),
            "formatVersion": .integer(StorageFormat.logFormatVersion),
            "baseRevision": .integer(baseRevision),
        ]))
    }

    /// The framed line of one record, written straight to bytes (it runs for every change).
    static func encode(_ record: LogRecord) -> [UInt8] {
        var payload: [UInt8] = []
        payload.reserveCapacity(128)
        payload.append(contentsOf: #"{"revision":"#.utf8)
        JSONWriter.writeInteger(record.revision, into: &payload)
        payload.append(contentsOf: #","domain":"#.utf8)
        JSONWriter.writeString(record.domain.name, into: &payload)
        payload.append(contentsOf: #","kind":"#.utf8)
        JSONWriter.writeString(record.kind, into: &payload)
        payload.append(contentsOf: #","changes":["#.utf8)
        let writer = JSONWriter()
        for (index, change) in record.changes.enumerated() {
            payload.append(contentsOf: (index == 0 ? #"{"key":"# : #",{"key":"#).utf8)
            JSONWriter.writeString(change.key.name, into: &payload)
            if let value = change.value {
                payload.append(contentsOf: #","value":"#.utf8)
                writer.write(value.typedJSON, into: &payload)
            }
            payload.append(UInt8(ascii: "}"))
        }
        payload.append(contentsOf: "]}".utf8)
        return frame(payload: payload)
    }

    /// `crc32hex SP json LF`.
    static func frame(_ json: JSON) -> [UInt8] {
        frame(payload: JSONWriter().bytes(json))
    }

    private static func frame(payload: [UInt8]) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(payload.count + 10)
        let crc = CRC32.checksum(payload)
        for shift in stride(from: 28, through: 0, by: -4) {
            line.append(hexDigits[Int((crc >> UInt32(shift)) & 0xF)])
        }
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: payload)
        line.append(UInt8(ascii: "\n"))
        return line
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The JSON payload of the line starting at `start`, and where the next line starts; nil
    /// if the line is torn (no LF) or its checksum or JSON is wrong.
    static func line(in bytes: [UInt8], at start: Int) -> (JSON, next: Int)? {
        guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")), end - start > 9,
            bytes[start + 8] == UInt8(ascii: " "),
            let crc = UInt32(String(decoding: bytes[start..<start + 8], as: UTF8.self), radix: 16)
        else { return nil }
        let payload = bytes[(start + 9)..<end]
        guard CRC32.checksum(payload) == crc, let json = try? JSONParser.parse(payload) else { return nil }
        return (json, end + 1)
    }
}

/// CRC-32 (IEEE 802.3, reflected, as in zlib).
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index)
        for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: some Collection<UInt8>) -> UInt32 {
        bytes.withContiguousStorageIfAvailable { checksum(UnsafeRawBufferPointer($0)) } ?? Array(bytes).withUnsafeBytes { checksum($0) }
    }

    private static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { table in
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
