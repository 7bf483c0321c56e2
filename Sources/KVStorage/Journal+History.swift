import Glibc
import KVSystem
import KVValues

/// One commit of one domain as the store keeps it in memory until the log is folded into the
/// files: what `History` serves of changes still only in the log.
struct RecentCommit: Sendable {
    var revision: Int64
    var time: Int64?
    var uid: UInt32?
    var changes: [Change]

    /// One entry per key it changed (of a key changed twice, the final value), in order.
    var entries: [HistoryEntry] {
        var entries: [HistoryEntry] = []
        entries.reserveCapacity(changes.count)
        var index: [Key: Int] = [:]
        for change in changes {
            let entry = HistoryEntry(revision: revision, time: time, key: change.key, value: change.value, uid: uid)
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

/// What the journal knows of one domain's history file (what it holds is read from it, or
/// from ``HistoryCache`` if a reader asked for it).
struct HistoryFileInfo {
    var mark: HistoryMark
    /// Where the next line goes (after a torn tail, the file is cut back to it first).
    var validLength: Int64
    /// The file holds bytes after ``validLength`` (a torn append) to cut off.
    var torn: Bool
    var lines: Int
    /// The time of its oldest entry (`.min` for one without a time): while that is within
    /// the days retention keeps, nothing can be pruned, and the file is not rewritten to try.
    var oldestTime: Int64
    /// Past this many lines, the next fold prunes the file (rewrites it with what retention
    /// keeps) instead of appending: twice what the last prune kept, and 16 more.
    var pruneAbove: Int

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

    /// Whether a rewrite could drop anything at `now` (see ``oldestTime``).
    func mayPrune(_ options: StoreOptions, now: Int64) -> Bool {
        options.historyDays == 0 || oldestTime < now - Int64(options.historyDays) * 86_400_000
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

/// History files: appended when the log is folded, pruned by rewriting. Commit queue only
/// (or recovery); every method blocks on I/O.
extension Journal {
    /// Appends each domain's commits above its file's last revision to its history file (a new
    /// file starts complete: since 0), or rewrites the file pruned once it has grown past its
    /// bound, each file synced (and a new one's folder) before returning. A file not loaded yet
    /// is loaded first (``loadHistory(_:current:revision:recent:)``, with `domains` at
    /// `revision`, the committed state). `logLength` is the log's length at `revision` (it
    /// bounds the new lines' size). Nothing when history is off.
    func foldHistory(
        _ history: [Domain: [RecentCommit]], domains: [Domain: DomainState], revision: Int64, logLength: Int64
    ) throws(SystemError) {
        guard let options = historyOptions else { return }
        let now = options.clock()
        for domain in history.keys.sorted() where !exclusions.excludes(domain) {
            let commits = history[domain]!
            try loadHistory(domain, current: domains[domain], revision: revision, recent: commits)
            let fresh = (histories[domain]?.mark ?? HistoryMark()).fresh(commits).filter {
                !exclusions.excludes(domain, $0.key)
            }
            guard !fresh.isEmpty else { continue }
            let maxBytes = HistoryRetention.maxBytes(domainBytes: domains[domain]?.budgetBytes ?? 0)
            guard var info = histories[domain],
                info.lines + fresh.count <= info.pruneAbove || !info.mayPrune(options, now: now),
                info.validLength + Self.lineBytesBound(lines: fresh.count, logLength) <= maxBytes
                    || Self.lineBytes(fresh, fitIn: Int64(maxBytes) - info.validLength)
            else {
                try rewriteHistory(domain, adding: fresh, current: domains[domain], revision: revision)
                continue
            }
            let written: Int
            do { written = try appendHistory(domain, fresh, info: info) } catch {
                histories[domain]?.torn = true  // part of it may be there: cut back before the next append
                throw error
            }
            info.appended(fresh, bytes: written)
            histories[domain] = info
            historyCache.append(domain, fresh)
        }
    }

    /// Appends the lines of `entries` after the file's last whole line, in pieces of at most
    /// ``historyChunkBytes`` (a fold of a 4 MiB log holds no second copy of it), then fsyncs
    /// once. Returns the bytes written.
    private func appendHistory(_ domain: Domain, _ entries: [HistoryEntry], info: HistoryFileInfo)
        throws(SystemError) -> Int
    {
        let descriptor = try fileSystem.open(
            path(HistoryFormat.fileName(for: domain)), [.write, .noFollow], permissions: 0o600)
        defer { fileSystem.close(descriptor) }
        var offset = info.validLength
        var bytes: [UInt8] = []
        for (index, entry) in entries.enumerated() {
            HistoryFormat.append(entry, to: &bytes)
            guard bytes.count >= Self.historyChunkBytes || index == entries.count - 1 else { continue }
            try fileSystem.write(descriptor, bytes, at: offset)
            offset += Int64(bytes.count)
            bytes.removeAll(keepingCapacity: true)
        }
        if info.torn { try fileSystem.truncate(descriptor, to: offset) }
        try fileSystem.fsync(descriptor)
        return Int(offset - info.validLength)
    }

    /// The most a fold holds of a history file's new lines before writing them.
    static let historyChunkBytes = 256 << 10

    /// At least the bytes `lines` history lines take, without encoding them: the log's length
    /// (`logLength`, which holds their values and keys) and 128 bytes a line for the rest.
    static func lineBytesBound(lines: Int, _ logLength: Int64) -> Int64 {
        logLength + 128 * Int64(lines)
    }

    /// Whether the lines of `entries` take at most `room` bytes (measured one by one, no copy
    /// of them all; it stops at the first line past `room`, so a fold bound to rewrite the file
    /// does not encode every new entry to learn it).
    static func lineBytes(_ entries: [HistoryEntry], fitIn room: Int64) -> Bool {
        var scratch: [UInt8] = []
        var total: Int64 = 0
        for entry in entries {
            total += Int64(HistoryRetention.lineBytes(entry, scratch: &scratch))
            if total > room { return false }
        }
        return true
    }

    /// Rewrites `domain`'s history file with its entries and `adding`, pruned. Its entries come
    /// from memory if a reader asked for them, else from the file; a file that cannot be read
    /// is set aside, and the new one starts at `revision` with the values of `current`.
    private func rewriteHistory(_ domain: Domain, adding: [HistoryEntry], current: DomainState?, revision: Int64)
        throws(SystemError)
    {
        var (entries, since): ([HistoryEntry], Int64) = ([], 0)
        if let kept = historyCache[domain] {
            (entries, since) = (kept.entries, kept.since)
        } else if histories[domain] != nil {
            switch try readHistory(domain) {
            case .content(let content): (entries, since) = (content.entries, content.since)
            case .missing: break
            case .unreadable: (entries, since) = (Self.baseline(current), revision)
            }
        }
        try writeHistory(domain, entries + adding, since: since, current: current, whole: true)
    }

    /// Writes `domain`'s history file anew with `entries` as retention keeps them, complete
    /// from `since` on, and records what it holds (in ``histories``, and in ``historyCache``
    /// with `keep` or if a reader asked for it before). Entries of keys that keep no history
    /// are left out (a domain that keeps none has its file removed instead); what is kept is
    /// within ``HistoryRetention/pruneTarget(_:)`` of the bound for `current` (the domain's
    /// committed state). On failure it forgets the file, which is then read again when next
    /// needed. `whole`: `entries` hold every entry of their last revision (a fold's rewrite).
    func writeHistory(
        _ domain: Domain, _ entries: [HistoryEntry], since: Int64, current: DomainState?, keep: Bool = false,
        whole: Bool = false
    ) throws(SystemError) {
        let options = historyOptions!
        guard !exclusions.excludes(domain) else { return try removeHistory(domain, since: since, keep: keep) }
        let all = HistoryRetention.normalized(entries)
        let maxBytes = HistoryRetention.pruneTarget(HistoryRetention.maxBytes(domainBytes: current?.budgetBytes ?? 0))
        let pruned = HistoryRetention.prune(
            all.filter { !exclusions.excludes(domain, $0.key) }, since: since, keep: options.historyKeep,
            days: options.historyDays,
            now: options.clock(), maxBytes: maxBytes)
        var bytes = HistoryFormat.header(domain, since: pruned.since)
        for entry in pruned.entries { HistoryFormat.append(entry, to: &bytes) }
        let name = HistoryFormat.fileName(for: domain)
        do {
            try fileSystem.replaceFile(path(name), temporary: path("." + name + ".tmp"), with: bytes)
            try fileSystem.syncDirectory(directory)
        } catch {
            // The old file or the new one may be in place: read it again when next needed.
            (histories[domain], loadedHistories) = (nil, loadedHistories.subtracting([domain]))
            historyCache.set(domain, nil)
            throw error
        }
        var info = HistoryFileInfo(
            pruned.entries, lines: pruned.entries.count, validLength: Int64(bytes.count), torn: false)
        info.mark = HistoryMark(all)  // what was pruned stays folded
        if whole { info.mark.markWhole() }
        histories[domain] = info
        loadedHistories.insert(domain)
        if keep || historyCache[domain] != nil {
            historyCache.set(domain, KeptHistory(entries: pruned.entries, since: pruned.since, mark: info.mark))
        }
    }

    /// The values of `state` as history entries of no known time (values a domain has when its
    /// history begins).
    static func baseline(_ state: DomainState?) -> [HistoryEntry] {
        guard let state else { return [] }
        return state.entries.compactMap { key, entry in
            guard case .value(let value) = entry.content else { return nil }
            return HistoryEntry(revision: entry.revision, time: nil, key: key, value: value)
        }
    }

    /// What reading a domain's history file gave.
    enum HistoryRead {
        case content(HistoryContent)
        case missing
        /// It could not be read; it was set aside (or, failing that, left) and logged.
        case unreadable
    }

    /// Reads `domain`'s history file; one that cannot be used is renamed aside and logged.
    /// Throws if reading it failed (I/O: nothing is set aside, the caller fails and retries).
    func readHistory(_ domain: Domain) throws(SystemError) -> HistoryRead {
        let name = HistoryFormat.fileName(for: domain)
        let reason: String
        do throws(HistoryFileError) {
            guard let content = try HistoryFile.read(fileSystem, path(name), domain: domain) else { return .missing }
            return .content(content)
        } catch {
            if let failure = error.system { throw failure }
            reason = error.reason
        }
        do {
            let backup = try moveAside(name)
            log(
                .error,
                "history file \(path(name)) is unreadable (\(reason)); moved it to \(path(backup)); the history of domain \(domain) starts again from its current values"
            )
        } catch {
            log(.error, "history file \(path(name)) is unreadable (\(reason)) and could not be moved aside: \(error)")
        }
        return .unreadable
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
