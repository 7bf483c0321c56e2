import KVSystem
import KVValues

/// One commit of one domain as the store keeps it in memory until the log is folded into the
/// files: what `History` serves of changes still only in the log.
struct RecentCommit: Sendable {
    let revision: Int64
    let time: Int64?
    let writer: Writer?
    let changes: [Change]

    /// This commit without its changes of `key`, or nil if it made no other.
    func dropping(_ key: Key) -> RecentCommit? {
        let kept = changes.filter { $0.key != key }
        return kept.isEmpty ? nil : RecentCommit(revision: revision, time: time, writer: writer, changes: kept)
    }

    /// One entry per key it changed (of a key changed twice, the final value), in order.
    var entries: [HistoryEntry] {
        var entries: [HistoryEntry] = []
        entries.reserveCapacity(changes.count)
        var index: [Key: Int] = [:]
        for change in changes {
            let entry = HistoryEntry(
                revision: revision, time: time, key: change.key, value: change.value, writer: writer)
            if changes.count > 1, let earlier = index[change.key] {
                entries[earlier] = entry
            } else {
                if changes.count > 1 { index[change.key] = entries.count }
                entries.append(entry)
            }
        }
        return entries
    }
}

/// What ``HistoryFiles`` knows of one domain's history file (what it holds is read from it, or
/// from ``HistoryCache`` if a reader asked for it).
struct HistoryFileInfo {
    private(set) var mark: HistoryMark
    /// Where the next line goes (after a torn tail, the file is cut back to it first).
    private(set) var validLength: Int64
    /// The file holds bytes after ``validLength`` (a torn append) to cut off.
    private(set) var torn: Bool
    private(set) var lines: Int
    /// The time of its oldest entry (`.min` for one without a time): while that is within
    /// the days retention keeps, nothing can be pruned, and the file is not rewritten to try.
    private(set) var oldestTime: Int64
    /// Past this many lines, the next fold prunes the file (rewrites it with what retention
    /// keeps) instead of appending: twice what the last prune kept, and 16 more.
    private(set) var pruneAbove: Int

    static func bound(keeping lines: Int) -> Int { 2 * lines + 16 }

    /// What a file holding `entries` (and `lines` lines, `validLength` bytes) knows.
    init(_ entries: [HistoryEntry], lines: Int, validLength: Int64, torn: Bool) {
        mark = HistoryMark(entries)
        self.validLength = validLength
        self.torn = torn
        self.lines = lines
        oldestTime = entries.lazy.map { $0.time ?? .min }.min() ?? .max
        pruneAbove = Self.bound(keeping: lines)
    }

    /// What a file rewritten with `kept` lines (`validLength` bytes) knows, its entries up to
    /// `lastRevision` folded (the pruned ones too).
    init(kept: [HistoryLine], validLength: Int64, lastRevision: Int64) {
        mark = HistoryMark(wholeAt: lastRevision)
        self.validLength = validLength
        torn = false
        lines = kept.count
        oldestTime = kept.lazy.map { $0.time ?? .min }.min() ?? .max
        pruneAbove = Self.bound(keeping: lines)
    }

    /// Whether a rewrite could drop anything at `now` (see ``oldestTime``).
    func mayPrune(_ options: StoreOptions, now: Int64) -> Bool {
        options.historyDays == 0 || oldestTime < now - Int64(options.historyDays) * 86_400_000
    }

    /// After a failed append: part of it may be there, to cut off before the next.
    mutating func markTorn() {
        torn = true
    }

    /// After a rewrite of `all` (normalized, pruned ones included: they stay folded); `whole`:
    /// they hold every entry of their last revision.
    mutating func folded(_ all: [HistoryEntry], whole: Bool) {
        mark = HistoryMark(all)
        if whole { mark.markWhole() }
    }

    /// After appending `entries` (in revision order).
    mutating func appended(_ entries: [HistoryEntry], bytes: Int) {
        for entry in entries { oldestTime = min(oldestTime, entry.time ?? .min) }
        mark.advance(entries)
        validLength += Int64(bytes)
        lines += entries.count
        torn = false
    }
}

/// Reading a history file from any thread.
enum HistoryFile {
    /// The content of the history file at `path` of `domain`, or nil if there is none. Throws
    /// why it cannot be used: not a regular file, or ``HistoryFormat/read(_:domain:)`` refuses
    /// it. Blocks on I/O; thread-safe.
    static func read(_ fileSystem: any FileSystem, _ path: String, domain: Domain) throws(HistoryFileError)
        -> HistoryContent?
    {
        let bytes: [UInt8]
        do {
            guard let read = try fileSystem.readRegularFile(path, limit: .max) else { return nil }
            bytes = read
        } catch {
            switch error {
            case .notRegular(let kind): throw HistoryFileError(reason: "it is \(kind), not a regular file")
            case .tooLarge(let size): throw HistoryFileError(reason: "it holds \(size) bytes")
            case .system(let error): throw HistoryFileError(reason: "it cannot be read: \(error)", system: error)
            }
        }
        return try HistoryFormat.read(bytes, domain: domain)
    }
}
