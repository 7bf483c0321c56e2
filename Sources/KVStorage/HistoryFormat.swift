import KVSystem
import KVValues

/// One change of one key as history keeps it: the value the key got at `revision` (nil: it was
/// removed).
public struct HistoryEntry: Sendable, Equatable {
    public var revision: Int64
    /// When it was committed, in milliseconds since the Unix epoch (UTC); nil for a value the
    /// key already had when kvd began to keep its domain's history (the change is older).
    public var time: Int64?
    public var key: Key
    public var value: Value?
    /// Who made the change; nil when unknown (kvd's own commits, changes older than writer
    /// records or than history).
    public var writer: Writer?

    public init(revision: Int64, time: Int64?, key: Key, value: Value?, writer: Writer? = nil) {
        self.revision = revision
        self.time = time
        self.key = key
        self.value = value
        self.writer = writer
    }
}

/// A history file as read (see ``StorageFormat`` for the format).
struct HistoryContent {
    /// The entries in file order: rising revisions, except that the entries after a `since`
    /// line (values a domain already had) may go back below the lines before it.
    var entries: [HistoryEntry] = []
    /// The largest `since` (header or line): states of the domain at revisions from there on
    /// can be rebuilt from the entries.
    var since: Int64 = 0
    /// Bytes up to the end of the last whole line: where the next line goes.
    var validLength = 0
    /// Why the file ends before its last line does (a torn append, never part of a finished
    /// compaction); nil when whole.
    var tornTail: String?

    /// The largest revision of any entry (0 if none): a fold skips log entries at or below it.
    var lastRevision: Int64 { entries.lazy.map(\.revision).max() ?? 0 }
}

/// Why a history file cannot be used (it is set aside).
struct HistoryFileError: Error {
    var reason: String
    /// Reading failed (I/O), rather than the file being unusable: it must not be set aside.
    var system: SystemError?
}

/// Encodes and reads `DOMAIN.history`. Pure functions; thread-safe.
enum HistoryFormat {
    static let format = "kvd-history"
    /// The version this kvd writes and reads; see ``StorageFormat``.
    static let formatVersion: Int64 = 1
    static let suffix = ".history"

    /// Whether `name` is a history file (not a copy set aside, not a temporary file).
    static func isHistoryFile(_ name: String) -> Bool {
        name.hasSuffix(suffix) && !name.hasPrefix(".") && !StorageFormat.isBackup(name)
    }

    /// The history file of `domain`: its domain file's name with `.history` for `.json`
    /// (so a long name stays within 255 bytes the same way).
    static func fileName(for domain: Domain) -> String {
        String(StorageFormat.fileName(for: domain).dropLast(StorageFormat.domainSuffix.count)) + suffix
    }

    /// A value sits 1 level below the line (`{"value": V}`).
    static let limits = JSONLimits(framingDepth: 1, maxBytes: LogFormat.maxRecordBytes)

    /// The framed header line of a new history file of `domain`, complete from `since` on.
    static func header(_ domain: Domain, since: Int64) -> [UInt8] {
        LogFormat.frame(
            .object([
                "format": .string(format), "formatVersion": .integer(formatVersion), "domain": .string(domain.name),
                "since": .integer(since),
            ]))
    }

    /// Appends the framed line of `entry`:
    /// `{"revision":N,"time":T,"uid":U,"pid":P,"program":"…","app":"…","key":K,"value":V}` (no
    /// `time` for a value older than history, of the writer the parts known, no `value` for a
    /// removal).
    static func append(_ entry: HistoryEntry, to out: inout [UInt8]) {
        LogFormat.appendLine(to: &out) { out in  // written straight: a fold appends one per change
            LogFormat.openStamped(revision: entry.revision, time: entry.time, writer: entry.writer, into: &out)
            out.append(contentsOf: #","key":"#.utf8)
            JSONWriter.writeString(entry.key.name, into: &out)
            if let value = entry.value {
                out.append(contentsOf: #","value":"#.utf8)
                JSONWriter().write(value.typedJSON, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Reads a whole history file of `domain`. A torn last line (an append a crash cut short)
    /// ends it (``HistoryContent/tornTail``); any other line that cannot be used, or a header
    /// that is not a kvd history of `domain`, throws (the file is then set aside whole).
    static func read(_ bytes: [UInt8], domain: Domain) throws(HistoryFileError) -> HistoryContent {
        let (since, start) = try readHeader(bytes, domain: domain)
        var content = HistoryContent(since: since, validLength: start)
        var position = start
        while position < bytes.count {
            guard let (payload, next) = LogFormat.line(in: bytes, at: position) else {
                guard LogFormat.nextValidLine(in: bytes, after: position) == nil else {
                    throw HistoryFileError(
                        reason: "the line at byte \(position) fails its checksum, and lines follow it")
                }
                content.tornTail = "the line at byte \(position) is torn"
                break
            }
            try readLine(bytes[payload], at: position, into: &content)
            content.validLength = next
            position = next
        }
        return content
    }

    /// The header line at the start of `bytes` (a history file of `domain`, or its first
    /// part): its `since`, and where the first line after it starts. Throws as ``read(_:domain:)``.
    static func readHeader(_ bytes: [UInt8], domain: Domain) throws(HistoryFileError) -> (since: Int64, next: Int) {
        guard let (headerRange, start) = LogFormat.line(in: bytes, at: 0),
            let header = try? JSONParser.parse(bytes[headerRange])
        else {
            throw HistoryFileError(reason: "the header line is torn or fails its checksum")
        }
        guard header["format"] == .string(format), case .integer(let version)? = header["formatVersion"] else {
            throw HistoryFileError(reason: "the header does not name the format \"\(format)\"")
        }
        guard version <= formatVersion else {
            throw HistoryFileError(reason: "formatVersion \(version) was written by a newer kvd")
        }
        guard version == 1, case .integer(let since)? = header["since"], since >= 0 else {
            throw HistoryFileError(reason: "the header has no valid formatVersion and since")
        }
        guard header["domain"] == .string(domain.name) else {
            throw HistoryFileError(reason: "the header names another domain")
        }
        return (since, start)
    }

    /// Reads one checksummed line: a `since` line or an entry.
    private static func readLine(_ payload: ArraySlice<UInt8>, at position: Int, into content: inout HistoryContent)
        throws(HistoryFileError)
    {
        func refuse(_ reason: String) -> HistoryFileError {
            HistoryFileError(reason: "the line at byte \(position) \(reason)")
        }
        let json: JSON
        do { json = try JSONParser.parse(payload, limits: limits) } catch { throw refuse("cannot be read: \(error)") }
        if case .integer(let since)? = json["since"], json["key"] == nil {
            content.since = max(content.since, since)
            return
        }
        guard case .integer(let revision)? = json["revision"], revision > 0 else {
            throw refuse("has no positive \"revision\"")
        }
        guard case .string(let name)? = json["key"], let key = try? Key(validating: name) else {
            throw refuse("has no valid \"key\"")
        }
        let origin: (time: Int64?, writer: Writer?)
        do throws(RecordError) {
            origin = try LogFormat.origin(of: json) { RecordError(reason: $0) }
        } catch {
            throw refuse(error.reason)
        }
        var value: Value?
        if let found = json["value"] {
            do { value = try Value(typedJSON: found) } catch { throw refuse("holds an invalid value: \(error)") }
        }
        content.entries.append(
            HistoryEntry(revision: revision, time: origin.time, key: key, value: value, writer: origin.writer))
    }
}
