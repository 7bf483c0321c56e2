import FoundationEssentials
import KVValues

/// FORMAT — the state folder of kvd.
///
/// ```
/// STATE/                                 mode 0700
///   kvd.lock                             flock(LOCK_EX|LOCK_NB) by the one kvd using STATE
///   kvd.wal                              write-ahead log: header + one record per mutation
///   DOMAIN.json                          one file per domain, pretty JSON, sorted keys
///   DOMAIN.history                       the domain's kept changes (stays when the domain is deleted)
///   kvd.nohistory                        the domains and keys marked to keep no history
///   PREFIX~HASH.json                     the file of a domain named with over 200 bytes
///   DOMAIN.unreadable-20261129T181320Z.json   an unreadable domain file set aside (-2, -3 if taken)
///   kvd.wal.unreadable-20261129T181320Z  a copy of a log with damage before its end
///   kvd.system-layer                     a user's kvd: the last system layer received (SystemLayerFile)
///   kvd.drop-ins                         the system instance: each drop-in file's last good content (KeptDropInsFile)
///   kvd.wal.next                         while kvd.wal is folded: the log of the commits since
///   .DOMAIN.json.tmp, .kvd.wal.tmp       temporary files, renamed into place (never a domain)
/// ```
///
/// File names: a domain named with at most 200 bytes has the file `DOMAIN.json`; a longer one
/// (the contract allows 255) has `PREFIX~HASH.json`, where PREFIX is the name's first 167 bytes
/// and HASH the 32 hex digits of the name's FNV-1a 128-bit hash, so that the file, its temporary
/// file and its backups stay within the 255 bytes a Linux file name may have. `~` never occurs
/// in a domain name, so the two forms cannot collide; the domain of a `~` file is the one its
/// `domain` member names (a file whose member does not hash to its name is unreadable). A
/// `DOMAIN.json` of a longer name (written by hand, or by an older kvd) is still read, and
/// replaced by the `~` file when kvd next writes that domain.
///
/// Only regular files are read: a directory, FIFO, socket, device or symbolic link named like
/// a domain file is renamed aside (as `DOMAIN.unreadable-STAMP.json`) and logged, and so is a
/// domain file over ``maxDomainFileBytes``; the other domains are served. At `kvd.wal` such an
/// entry is renamed aside and a new log started, except a symbolic link, which may lead to the
/// log holding acknowledged writes: then kvd refuses to start and says so.
///
/// Domain file (`formatVersion` 1):
/// ```
/// {"format": "kvd-domain", "formatVersion": 1, "domain": "com.example.app",
///  "revision": 42,                       // the revision at which the domain last changed
///  "savedAt": "2026-11-29T18:13:20.250Z",// informational
///  "values": {"key": <typed JSON>, ...},
///  "revisions": {"key": 41, ...}}        // the revision at which each key last changed
/// ```
/// Written with sorted members, indented down to level ``maxIndentedLevel`` (a value's
/// members or elements and three levels below them); deeper levels go on one line. So
/// indentation adds at most `1 + 2 × 6` bytes per byte of compact JSON, and a domain within
/// ``Limits/domainBytes`` gives a file within ``maxDomainFileBytes`` (16 × 16 MiB): values at
/// most 14 times their compact size, `revisions` at most 2 times the entries' budget.
///
/// Reading is lenient where a hand edit costs only a key: a byte-order mark is skipped; each
/// value is read on its own, and one that is not valid typed JSON (an integer out of range, a
/// `null`, nesting over 512 levels, broken JSON inside the value) is kept verbatim and written
/// back as it was; a key no request can name (`""`, over 1024 bytes) is kept the same way; of a
/// key given twice the last is read (as JSON readers commonly do), and the file is copied aside
/// first, since the rewrite keeps only that one. Where the file's structure cannot be followed
/// (an unterminated string, unbalanced brackets, no envelope members), the whole file is set
/// aside and the domain starts empty.
///
/// Log `kvd.wal`: lines of `CRC SP JSON LF`, where CRC is the CRC-32 (IEEE) of the JSON bytes
/// as 8 lowercase hex digits and JSON is compact (so it holds no raw LF). The first line is the
/// header `{"format": "kvd-wal", "formatVersion": 1, "baseRevision": N}`; every later line is one
/// mutation `{"revision": N, "domain": "d", "kind": "set|delete|apply|deleteDomain",
/// "changes": [{"key": "k", "value": <typed JSON>}, {"key": "gone"}]}` with absolute values (a
/// change without `value` removes the key), so replaying is idempotent. Revisions rise strictly.
/// The file may end in zero bytes: space reserved ahead of the records (`fallocate`), so that a
/// commit's sync overwrites it instead of growing the file; they end the log as its end would.
/// A record's value nests at most 3 levels below the line (`LogFormat.limits`); the writer
/// refuses a change whose record would be larger than a reader takes, or whose changes, or
/// domain after it, would not fit one reply (``Limits``).
///
/// Recovery loads the domain files, then applies each record whose revision is above the
/// domain file's `revision`. A torn or corrupt record with no valid record after it is the
/// torn tail of a write never acknowledged: it is cut off. Any other record the reader cannot
/// use — a complete line (its checksum holds) that does not decode, or a corrupt line followed
/// by valid ones — costs only itself: the log is copied aside, the record is logged as an
/// error, the records after it are replayed, its revision (when it can be read) counts, and
/// the log is compacted at once so the damage is reported once. The store revision is the
/// largest of the header's base, every record's and the domain files' revisions.
///
/// History `DOMAIN.history` (`PREFIX~HASH.history` beside a `~` domain file): lines framed like
/// the log's. The header `{"format": "kvd-history", "formatVersion": 1, "domain": "d",
/// "since": S}`, then one line per change of one key, oldest first:
/// `{"revision": N, "time": T, "uid": U, "pid": P, "program": "…", "app": "…", "key": "k",
/// "value": <typed JSON>}` (`time`: milliseconds since the Unix epoch, UTC, absent for a value
/// the key already had when the domain's history began; the writer's parts (``Writer``) those
/// known; no `value`: removed), and `{"since": S}` lines.
/// The state of the domain at any revision from the largest `since` on is, for each key, its
/// newest entry at or below that revision. The log is folded into history before the domain
/// files are written: a fold appends each domain's new entries and fsyncs the file (a new file:
/// temporary file, fsync, rename, fsync of the folder), then the domain files, then the log is
/// reset; entries the file already holds (a crash after the append) are skipped, by revision and
/// key. Commits still in the log are served from memory. Retention (`StoreOptions.historyKeep`,
/// `historyDays`): each key keeps its newest entries while fewer than `keep` are kept or they are
/// at most `days` days old; once a file holds more than twice the lines its last rewrite kept,
/// and 16 more, the fold rewrites it (temporary file, fsync, rename, fsync of the folder) with
/// only what retention keeps, and `since` becomes the largest revision of a key's oldest kept
/// entry. A history file that cannot be read (not a regular file, a bad header, a line that
/// fails its checksum or does not decode, with lines after it) is renamed aside like a domain
/// file and the domain's history starts again from its values; a torn last line (a crash during
/// an append) is cut off at the next append. A domain file with no history file (kvd before
/// history, or history was off) gets one at start, holding its values (no `time`) from its
/// revision on; one whose history misses changes made while history was off gets the domain's
/// values and removals then, and `since` moves to that revision.
///
/// Bounds and secrets (since 0.2.0; no version change: every reader of version 1 reads such
/// files). A history file holds at most the larger of 1 MiB and 8 × its domain's
/// typed JSON: a fold that would take it past that rewrites it with the oldest entries
/// dropped, down to three quarters (a key's current value stays). When the disk is full (a log
/// append, or a fold, fails with `ENOSPC` or `EDQUOT`), every history file is removed and the
/// log compacted before the write is tried again: history starts again from the values. A
/// forget rewrites the domain's history file without the key's (or domain's) entries (values
/// the domain still has stay, with no `time`, and `since` moves to the newest forgotten
/// revision), compacts the log, and rewrites the copies of the log set aside without the lines
/// naming the domain and key, and removes the domain's history and domain file copies (of a
/// key: those naming it). `kvd.nohistory`: one line framed like the log's,
/// `{"format": "kvd-nohistory", "formatVersion": 1, "domains": ["d"], "keys": {"d": ["k"]}}`,
/// replaced like a domain file; the changes of what it names are left out of history (the log
/// holds them until its next fold). With history off, the history files and their copies are
/// removed at start.
///
/// Log records carry `"time": T` (milliseconds since the epoch, the same for one batch) and, on
/// the system instance, `"uid": U` after `revision` since 0.2.0, and every kvd the writer's
/// `uid`, `pid`, `program`, `app` after `time`; the log version is unchanged, since every reader
/// of version 1 ignores them, and a record without them is of an unknown writer.
///
/// Version history of the history file: 1: the format above (0.2.0).
///
/// Version history of the domain file (one reader per version is kept):
/// - 0: a bare JSON object of typed values (no envelope, no revisions; keys load at revision 1).
/// - 1: the envelope above (0.1.0). Since 0.2.0 kvd writes values deeper than
///   ``maxIndentedLevel`` on one line, and reads hand edits leniently as described above; the
///   version is unchanged, since every reader of version 1 reads such files.
///
/// Version history of the folder: since 0.2.0 the file of a domain over 200 bytes is
/// `PREFIX~HASH.json` (in 0.1.0 such names could not be compacted or backed up), and
/// `DOMAIN.json` is still read for any name. An older kvd does not see `~` files.
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
    /// The log commits go to while `kvd.wal` is folded (its base: the fold's revision); renamed
    /// over `kvd.wal` once the fold's files are synced. One whose base is at or below
    /// `kvd.wal`'s is stale (a compaction's leftover) and removed unread.
    static let nextLogFileName = "kvd.wal.next"
    static let lockFileName = "kvd.lock"
    static let domainSuffix = ".json"
    static let backupMarker = Domain.backupMarker

    /// What a name in the state folder is, for loading.
    enum Entry: Equatable {
        /// `DOMAIN.json`: the file of that domain (of any length, for older folders).
        case domainFile(Domain)
        /// `PREFIX~HASH.json`: the file of a long domain, named inside the file.
        case longDomainFile
    }

    /// What the file `name` holds, or nil for anything else in the folder (lock, log,
    /// temporary files, backups).
    static func entry(forFileName name: String) -> Entry? {
        guard name.hasSuffix(domainSuffix), !name.hasPrefix("."), !isBackup(name) else { return nil }
        let stem = name.dropLast(domainSuffix.count)
        if let tilde = stem.firstIndex(of: "~") {
            let hash = stem[stem.index(after: tilde)...]
            guard hash.count == 32, hash.allSatisfy(\.isHexDigit), (try? Domain(stored: String(stem[..<tilde]))) != nil
            else { return nil }
            return .longDomainFile
        }
        return (try? Domain(stored: String(stem))).map { .domainFile($0) }
    }

    /// Domain names longer than this have a `PREFIX~HASH.json` file (see the format above).
    static let plainFileNameBytes = 200
    static let longNamePrefixBytes = 167

    /// The name of `domain`'s file: `DOMAIN.json`, or `PREFIX~HASH.json` for a long name.
    static func fileName(for domain: Domain) -> String {
        let name = domain.name
        guard name.utf8.count > plainFileNameBytes else { return name + domainSuffix }
        let prefix = String(decoding: name.utf8.prefix(longNamePrefixBytes), as: UTF8.self)
        return prefix + "~" + hash128(name) + domainSuffix
    }

    /// FNV-1a, 128 bits, as 32 lowercase hex digits.
    static func hash128(_ text: String) -> String {
        var hash: UInt128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d
        let prime: UInt128 = 0x0000_0000_0100_0000_0000_0000_0000_013b
        for byte in text.utf8 {
            hash ^= UInt128(byte)
            hash &*= prime
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 32 - digits.count) + digits
    }

    /// The largest domain file read (16 × 16 MiB): the most a domain within
    /// ``Limits/domainBytes`` is written as (see the format above). Also the largest log record
    /// read, so that any record an older kvd wrote is read.
    static let maxDomainFileBytes = 16 * Limits.messageBytes

    /// The deepest level of a domain file put on lines of its own (the envelope is level 0, its
    /// members 1, the keys of `values` 2).
    static let maxIndentedLevel = 6

    /// Whether `name` is a backup made by ``backupName(for:stamp:attempt:)``: it contains
    /// `.unreadable-` followed by a timestamp like `20261129T181320Z` (``Domain`` refuses such
    /// names, so no domain's file is ever taken for a backup).
    static func isBackup(_ name: String) -> Bool {
        Domain.containsBackupStamp(name)
    }

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
