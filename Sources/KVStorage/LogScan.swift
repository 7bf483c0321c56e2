import KVValues

/// Why a log cannot be used at all.
enum LogHeaderProblem: Error {
    /// The header line is torn, corrupt or not a kvd log.
    case damaged(String)
    /// The log was written by a newer kvd; the folder must not be touched.
    case newer(Int64)
}

extension LogFormat {
    /// Reads the header and every usable record of a whole log. Scanning ends cleanly at the
    /// end of the file or where only zeros (space reserved ahead) follow. A torn or corrupt
    /// record with no valid line after it ends the log as its torn tail (``LogScan/tornTail``);
    /// any other record that cannot be used (see ``LogDamage``) is skipped and recorded, and
    /// the scan goes on with the next valid line.
    static func scan(_ bytes: [UInt8]) throws(LogHeaderProblem) -> LogScan {
        guard let (headerRange, start) = line(in: bytes, at: 0), let header = try? JSONParser.parse(bytes[headerRange])
        else {
            throw .damaged("the header line is torn or fails its checksum")
        }
        var scan = LogScan(baseRevision: try baseRevision(of: header), records: [], validLength: start)
        var position = start
        while position < bytes.count {
            if bytes[position] == 0, onlyZeros(bytes, from: position) { break }  // space reserved ahead
            guard let (payload, next) = line(in: bytes, at: position) else {
                guard let resume = nextValidLine(in: bytes, after: position) else {
                    scan.tornTail = "the record at byte \(position) is torn or corrupt"
                    break
                }
                scan.damage.append(
                    LogDamage(offset: position, reason: "fails its checksum, and valid records follow it"))
                position = resume
                continue
            }
            do throws(RecordError) {
                let record = try decodeRecord(bytes[payload])
                let last = scan.records.last?.revision ?? scan.baseRevision
                guard record.revision > last else {
                    throw RecordError(reason: "does not follow revision \(last)", revision: record.revision)
                }
                scan.records.append(record)
                scan.validLength = next
            } catch {
                scan.damage.append(
                    LogDamage(
                        offset: position, reason: error.reason,
                        revision: error.revision ?? leadingRevision(bytes[payload])))
            }
            position = next
        }
        return scan
    }

    private static func baseRevision(of header: JSON) throws(LogHeaderProblem) -> Int64 {
        guard header["format"] == .string(StorageFormat.logFormat),
            case .integer(let version)? = header["formatVersion"]
        else {
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

    /// Where the first whole line with a valid checksum after the line at `position` starts.
    static func nextValidLine(in bytes: [UInt8], after position: Int) -> Int? {
        var index = position
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            index = newline + 1
            if index < bytes.count, line(in: bytes, at: index) != nil { return index }
        }
        return nil
    }

    /// The revision a record payload starts with (`{"revision":N,`, as kvd writes it), for a
    /// record whose JSON cannot be read.
    private static func leadingRevision(_ payload: ArraySlice<UInt8>) -> Int64? {
        let prefix = Array(#"{"revision":"#.utf8)
        guard payload.starts(with: prefix) else { return nil }
        let digits = payload.dropFirst(prefix.count).prefix { $0 >= 0x30 && $0 <= 0x39 }
        return Int64(String(decoding: digits, as: UTF8.self))
    }

    /// The record a checksummed payload holds; the error says why it is not a valid record.
    static func decodeRecord(_ payload: ArraySlice<UInt8>) throws(RecordError) -> LogRecord {
        let json: JSON
        do { json = try JSONParser.parse(payload, limits: limits) } catch {
            throw RecordError(reason: "cannot be read: \(error)")
        }
        guard case .integer(let revision)? = json["revision"], revision > 0 else {
            throw RecordError(reason: "has no positive \"revision\"")
        }
        func refuse(_ reason: String) -> RecordError { RecordError(reason: reason, revision: revision) }
        var kind = "apply"
        if case .string(let found)? = json["kind"] { kind = found }
        let (time, writer) = try origin(of: json, refuse)
        guard case .array(let parts)? = json["parts"] else {
            let part = try decodePart(json, refuse)
            return LogRecord(
                revision: revision, domain: part.domain, kind: kind, changes: part.changes, time: time, writer: writer)
        }
        guard !parts.isEmpty else { throw refuse("has an empty \"parts\" array") }
        var decoded: [LogRecord.Part] = []
        for part in parts {
            let one = try decodePart(part, refuse)
            guard !decoded.contains(where: { $0.domain == one.domain }) else {
                throw refuse("names domain \(one.domain) in two parts")
            }
            decoded.append(one)
        }
        return LogRecord(revision: revision, kind: kind, parts: decoded, time: time, writer: writer)
    }

    /// The optional `time` (milliseconds since the epoch) and writer of a record or history line
    /// (none in a record of a kvd before writers: unknown; an old system instance's `uid` alone).
    static func origin(of json: JSON, _ refuse: (String) -> RecordError) throws(RecordError) -> (
        time: Int64?, writer: Writer?
    ) {
        var time: Int64?
        switch json["time"] {
        case nil: break
        case .integer(let found)?: time = found
        default: throw refuse("has a \"time\" that is not an integer")
        }
        return (time, try Writer.decode(members: json, refuse))
    }

    /// One part of a record (`{"domain": D, "changes": [...]}`, or the record itself).
    private static func decodePart(_ json: JSON, _ refuse: (String) -> RecordError) throws(RecordError)
        -> LogRecord.Part
    {
        guard case .string(let domainName)? = json["domain"], let domain = try? Domain(stored: domainName) else {
            throw refuse("names no valid domain")
        }
        guard case .array(let items)? = json["changes"] else { throw refuse("has no \"changes\" array") }
        var changes: [Change] = []
        changes.reserveCapacity(items.count)
        for item in items {
            guard case .string(let name)? = item["key"], let key = try? Key(validating: name) else {
                throw refuse("has a change without a valid key")
            }
            var value: Value?
            if let json = item["value"] {
                do { value = try Value(typedJSON: json) } catch {
                    throw refuse("holds an invalid value for key \"\(name)\": \(error)")
                }
            }
            changes.append(Change(key: key, value: value))
        }
        return LogRecord.Part(domain: domain, changes: changes)
    }
}

/// Why a checksummed log line is not a usable record.
struct RecordError: Error {
    var reason: String
    /// The record's revision, when it was read.
    var revision: Int64?
}
