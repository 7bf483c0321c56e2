import KVValues

/// Why a log cannot be used at all.
enum LogHeaderProblem: Error {
    /// The header line is torn, corrupt or not a kvd log.
    case damaged(String)
    /// The log was written by a newer kvd; the folder must not be touched.
    case newer(Int64)
}

extension LogFormat {
    /// Reads the header and every valid record of a whole log. Scanning ends cleanly at the
    /// end of the file or where only zeros (space reserved ahead) follow; it stops at the
    /// first torn or corrupt record (or one whose revision does not rise), and
    /// ``LogScan/dataAfterDamage`` tells whether valid-looking records follow it.
    static func scan(_ bytes: [UInt8]) throws(LogHeaderProblem) -> LogScan {
        guard let (header, start) = line(in: bytes, at: 0) else {
            throw .damaged("the header line is torn or fails its checksum")
        }
        let base = try baseRevision(of: header)
        var scan = LogScan(baseRevision: base, records: [], validLength: start, damage: nil, dataAfterDamage: false)
        var position = start
        var last = base
        while position < bytes.count {
            if bytes[position] == 0, onlyZeros(bytes, from: position) { break }  // space reserved ahead
            guard let (json, next) = line(in: bytes, at: position), let record = decodeRecord(json), record.revision > last else {
                scan.damage = "the record at byte \(position) is torn or corrupt"
                scan.dataAfterDamage = hasValidLine(in: bytes, after: position)
                break
            }
            scan.records.append(record)
            last = record.revision
            position = next
            scan.validLength = next
        }
        return scan
    }

    private static func baseRevision(of header: JSON) throws(LogHeaderProblem) -> Int64 {
        guard header["format"] == .string(StorageFormat.logFormat), case .integer(let version)? = header["formatVersion"] else {
            throw .damaged("the header does not name the format \"\(StorageFormat.logFormat)\"")
        }
        guard version <= StorageFormat.logFormatVersion else { throw .newer(version) }
        guard version == 1, case .integer(let base)? = header["baseRevision"], base >= 0 else {
            throw .damaged("the header has no valid formatVersion and baseRevision")
        }
        return base
    }

    /// Whether `bytes` holds only zeros from `start` on (8 bytes at a time: it runs over the
    /// reserved space at every start).
    static func onlyZeros(_ bytes: [UInt8], from start: Int) -> Bool {
        bytes.withUnsafeBytes { raw in
            var index = start
            while index < raw.count, index % 8 != 0 {
                if raw[index] != 0 { return false }
                index += 1
            }
            while index + 8 <= raw.count {
                if raw.loadUnaligned(fromByteOffset: index, as: UInt64.self) != 0 { return false }
                index += 8
            }
            while index < raw.count {
                if raw[index] != 0 { return false }
                index += 1
            }
            return true
        }
    }

    /// Whether any complete, checksummed line starts after the line at `position`.
    private static func hasValidLine(in bytes: [UInt8], after position: Int) -> Bool {
        var index = position
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            index = newline + 1
            if index < bytes.count, line(in: bytes, at: index) != nil { return true }
        }
        return false
    }

    /// The record a checksummed payload holds, or nil if it is not a valid record.
    static func decodeRecord(_ json: JSON) -> LogRecord? {
        guard case .integer(let revision)? = json["revision"], revision > 0,
            case .string(let domainName)? = json["domain"], let domain = try? Domain(validating: domainName),
            case .array(let items)? = json["changes"]
        else { return nil }
        var kind = "apply"
        if case .string(let found)? = json["kind"] { kind = found }
        var changes: [Change] = []
        changes.reserveCapacity(items.count)
        for item in items {
            guard case .string(let name)? = item["key"], let key = try? Key(validating: name) else { return nil }
            var value: Value?
            if let json = item["value"] {
                guard let decoded = try? Value(typedJSON: json) else { return nil }
                value = decoded
            }
            changes.append(Change(key: key, value: value))
        }
        return LogRecord(revision: revision, domain: domain, kind: kind, changes: changes)
    }
}
