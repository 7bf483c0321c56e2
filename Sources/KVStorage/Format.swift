import FoundationEssentials
import KVValues

/// FORMAT — the state folder of kvd.
///
/// ```
/// STATE/                                 mode 0700
///   kvd.lock                             flock(LOCK_EX|LOCK_NB) by the one kvd using STATE
///   kvd.wal                              write-ahead log: header + one record per mutation
///   DOMAIN.json                          one file per domain, pretty JSON, sorted keys
///   DOMAIN.unreadable-20261129T181320Z.json   copy of an unreadable domain file (-2, -3 if taken)
///   kvd.wal.unreadable-20261129T181320Z  copy of a log with damage before its end
///   .DOMAIN.json.tmp, .kvd.wal.tmp       temporary files, renamed into place (never a domain)
/// ```
///
/// Domain file (`formatVersion` 1):
/// ```
/// {"format": "kvd-domain", "formatVersion": 1, "domain": "com.example.app",
///  "revision": 42,                       // the revision at which the domain last changed
///  "savedAt": "2026-11-29T18:13:20.250Z",// informational
///  "values": {"key": <typed JSON>, ...},
///  "revisions": {"key": 41, ...}}        // the revision at which each key last changed
/// ```
/// A value that is not valid typed JSON costs only its key: it is kept and written back verbatim.
///
/// Log `kvd.wal`: lines of `CRC SP JSON LF`, where CRC is the CRC-32 (IEEE) of the JSON bytes
/// as 8 lowercase hex digits and JSON is compact (so it holds no raw LF). The first line is the
/// header `{"format": "kvd-wal", "formatVersion": 1, "baseRevision": N}`; every later line is one
/// mutation `{"revision": N, "domain": "d", "kind": "set|delete|apply|deleteDomain",
/// "changes": [{"key": "k", "value": <typed JSON>}, {"key": "gone"}]}` with absolute values (a
/// change without `value` removes the key), so replaying is idempotent. Revisions rise strictly.
/// The file may end in zero bytes: space reserved ahead of the records (`fallocate`), so that a
/// commit's sync overwrites it instead of growing the file; they end the log as its end would.
/// Recovery loads the domain files, then applies each record whose revision is above the
/// domain file's `revision`; the first torn or corrupt record ends the log (it was never
/// acknowledged). The store revision is the largest of the header's base, the records' and
/// the domain files' revisions.
///
/// Version history of the domain file (one reader per version is kept):
/// - 0: a bare JSON object of typed values (no envelope, no revisions; keys load at revision 1).
/// - 1: the envelope above (kvd 1.0).
///
/// Version history of the log: 1: the format above (kvd 1.0).
public enum StorageFormat {
    static let domainFormat = "kvd-domain"
    /// The domain file version this kvd writes; see the history above.
    public static let domainFormatVersion: Int64 = 1
    static let logFormat = "kvd-wal"
    /// The log version this kvd writes and reads; see the history above.
    public static let logFormatVersion: Int64 = 1

    static let logFileName = "kvd.wal"
    static let lockFileName = "kvd.lock"
    static let domainSuffix = ".json"
    static let backupMarker = ".unreadable-"

    /// The domain whose file is named `name`, or nil for anything else in the folder (lock,
    /// log, temporary files, backups).
    static func domain(forFileName name: String) -> Domain? {
        guard name.hasSuffix(domainSuffix), !name.hasPrefix("."), !isBackup(name) else { return nil }
        return try? Domain(validating: String(name.dropLast(domainSuffix.count)))
    }

    /// Whether `name` is a backup made by ``backupName(for:stamp:attempt:)``: it contains
    /// `.unreadable-` followed by a timestamp like `20261129T181320Z`.
    /// Checked for every submitted change, so it scans bytes rather than searching substrings.
    static func isBackup(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            let marker = backupMarkerBytes
            guard bytes.count >= marker.count + 16 else { return false }
            for start in 0...(bytes.count - marker.count - 16) where bytes[start] == marker[0] {
                guard (0..<marker.count).allSatisfy({ bytes[start + $0] == marker[$0] }) else { continue }
                let stamp = Array(bytes[(start + marker.count)...].prefix(16))  // made only where the marker is
                if stamp[8] == UInt8(ascii: "T"), stamp[15] == UInt8(ascii: "Z"),
                    (stamp[0..<8] + stamp[9..<15]).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
                {
                    return true
                }
            }
            return false
        }
    }

    private static let backupMarkerBytes = Array(backupMarker.utf8)

    /// `com.x.unreadable-20261129T181320Z.json`, with `-2`, `-3`... before `.json` on retries.
    static func backupName(for fileName: String, stamp: String, attempt: Int) -> String {
        let counter = attempt > 1 ? "-\(attempt)" : ""
        if fileName.hasSuffix(domainSuffix) {
            return String(fileName.dropLast(domainSuffix.count)) + backupMarker + stamp + counter + domainSuffix
        }
        return fileName + backupMarker + stamp + counter
    }

    /// The current UTC time like `20261129T181320Z`.
    static func timestamp(_ date: Date = Date()) -> String {
        let text = RFC3339.format(date)  // 2026-11-29T18:13:20.250Z
        return String(text.prefix(19).filter { $0 != "-" && $0 != ":" }) + "Z"
    }
}
