import Glibc
import KVSystem
import KVValues

/// The history files: appended when the log is folded, pruned by rewriting, loaded when first
/// needed (by a fold into one, or by a reader), rewritten to forget, dropped to make room; and
/// what keeps no history (``exclusions``).
///
/// Owned by the store's commit queue (or recovery), hence `@unchecked Sendable`; it is not
/// thread-safe. While a fold runs, the fold's thread owns it (``StateFiles/fold(_:)``) and the
/// commit queue only reads ``exclusions`` and ``options`` (the queue changes ``exclusions``
/// only once it has waited for the fold: ``Store/awaitFold()``). ``cache`` is thread-safe.
/// Every method that writes blocks on I/O.
final class HistoryFiles: @unchecked Sendable {
    let folder: StateFolder
    /// How history is kept; nil when it is off.
    let options: StoreOptions?
    /// The layout of each loaded domain's history file (a domain without one has none yet).
    private var histories: [Domain: HistoryFileInfo] = [:]
    /// The domains whose history file has been looked for (and read, if there was one) since
    /// the store opened: history files are read when first needed, not at start.
    private var loaded: Set<Domain> = []
    /// What the loaded history files hold, for readers.
    let cache = HistoryCache()
    /// The revision of each domain file when the store opened, and the log's base then: what
    /// a history file is checked against when it is loaded (``load(_:current:revision:recent:keep:)``).
    private var start: [Domain: Int64] = [:]
    private var logBase: Int64 = 0
    /// The domains and keys that keep no history (``HistoryExclusions/fileName``).
    private(set) var exclusions = HistoryExclusions()

    init(folder: StateFolder, options: StoreOptions?) {
        self.folder = folder
        self.options = options
    }

    private var fileSystem: any FileSystem { folder.fileSystem }

    /// Notes what loading a history file later needs: each domain file's revision (`files`,
    /// before the log replay) and the log's base. Reads and writes no history file: each is
    /// read when first needed, so a start costs nothing per domain. Nothing when history is off.
    func noteStart(files: [Domain: Int64], logBase: Int64) {
        guard options != nil else { return }
        start = files
        self.logBase = logBase
    }

    /// Reads ``HistoryExclusions/fileName`` into ``exclusions`` (``HistoryExclusions/load(from:)``).
    func loadExclusions() throws(SystemError) {
        if let read = try HistoryExclusions.load(from: folder) { exclusions = read }
    }

    /// Marks `key` of `domain` (every key, if nil) to keep history or not, durably; on failure
    /// ``exclusions`` stay as they were. Not while a fold runs.
    func setExclusion(_ domain: Domain, key: Key?, keep: Bool) throws(SystemError) {
        var changed = exclusions
        changed.set(domain, key: key, keep: keep)
        try changed.save(to: folder)
        exclusions = changed
    }

    /// Appends each domain's commits above its file's last revision to its history file (a new
    /// file starts complete: since 0), or rewrites the file pruned once it has grown past its
    /// bound, each file synced (and a new one's folder) before returning. A file not loaded yet
    /// is loaded first (``load(_:current:revision:recent:keep:)``, with `domains` at
    /// `revision`, the committed state). `logLength` is the log's length at `revision` (it
    /// bounds the new lines' size). Nothing when history is off.
    func fold(
        _ history: [Domain: [RecentCommit]], domains: [Domain: DomainState], revision: Int64, logLength: Int64
    ) throws(SystemError) {
        guard let options else { return }
        let now = options.clock()
        for domain in history.keys.sorted() where !exclusions.excludes(domain) {
            let commits = history[domain]!
            try load(domain, current: domains[domain], revision: revision, recent: commits)
            let fresh = (histories[domain]?.mark ?? HistoryMark()).fresh(commits).filter {
                !exclusions.excludes(domain, $0.key)
            }
            guard !fresh.isEmpty else { continue }
            let maxBytes = HistoryRetention.maxBytes(domainBytes: domains[domain]?.budgetBytes ?? 0)
            guard var info = histories[domain],
                info.lines + fresh.count <= info.pruneAbove || !info.mayPrune(options, now: now),
                info.validLength + HistoryRetention.lineBytesBound(lines: fresh.count, logLength) <= maxBytes
                    || HistoryRetention.lineBytes(fresh, fitIn: Int64(maxBytes) - info.validLength)
            else {
                try rewrite(domain, adding: fresh, current: domains[domain], revision: revision)
                continue
            }
            let written: Int
            do { written = try append(domain, fresh, info: info) } catch {
                histories[domain]?.markTorn()  // part of it may be there: cut back before the next append
                throw error
            }
            info.appended(fresh, bytes: written)
            histories[domain] = info
            cache.append(domain, fresh)
        }
    }

    /// Appends the lines of `entries` after the file's last whole line, in pieces of at most
    /// ``chunkBytes`` (a fold of a 4 MiB log holds no second copy of it), then fsyncs once.
    /// Returns the bytes written.
    private func append(_ domain: Domain, _ entries: [HistoryEntry], info: HistoryFileInfo) throws(SystemError)
        -> Int
    {
        let descriptor = try fileSystem.open(
            folder.path(HistoryFormat.fileName(for: domain)), [.write, .noFollow], permissions: 0o600)
        defer { fileSystem.close(descriptor) }
        var offset = info.validLength
        var bytes: [UInt8] = []
        for (index, entry) in entries.enumerated() {
            HistoryFormat.append(entry, to: &bytes)
            guard bytes.count >= Self.chunkBytes || index == entries.count - 1 else { continue }
            try fileSystem.write(descriptor, bytes, at: offset)
            offset += Int64(bytes.count)
            bytes.removeAll(keepingCapacity: true)
        }
        if info.torn { try fileSystem.truncate(descriptor, to: offset) }
        try fileSystem.fsync(descriptor)
        return Int(offset - info.validLength)
    }

    /// The most a fold holds of a history file's new lines before writing them.
    static let chunkBytes = 256 << 10

    /// Rewrites `domain`'s history file with its entries and `adding`, pruned. Its entries come
    /// from memory if a reader asked for them, else from the file; a file that cannot be read
    /// is set aside, and the new one starts at `revision` with the values of `current`.
    private func rewrite(_ domain: Domain, adding: [HistoryEntry], current: DomainState?, revision: Int64)
        throws(SystemError)
    {
        if cache[domain] == nil, histories[domain] != nil, !exclusions.excludes(domain) {
            // The common prune: the lines it keeps copied, nothing decoded (else the general way).
            let maxBytes = HistoryRetention.pruneTarget(
                HistoryRetention.maxBytes(domainBytes: current?.budgetBytes ?? 0))
            do {
                let exclusions = self.exclusions
                if let info = try HistoryRewrite(folder, domain).prune(
                    adding: adding, options!, maxBytes: maxBytes,
                    {
                        !exclusions.excludes(domain, $0)
                    })
                {
                    try fileSystem.syncDirectory(folder.directory)
                    (histories[domain], _) = (info, loaded.insert(domain))
                    return
                }
            } catch {
                (histories[domain], loaded) = (nil, loaded.subtracting([domain]))  // as write(...) does
                throw error
            }
        }
        var (entries, since): ([HistoryEntry], Int64) = ([], 0)
        if let kept = cache[domain] {
            (entries, since) = (kept.entries, kept.since)
        } else if histories[domain] != nil {
            switch try read(domain) {
            case .content(let content): (entries, since) = (content.entries, content.since)
            case .missing: break
            case .unreadable: (entries, since) = (HistoryRetention.baseline(current), revision)
            }
        }
        try write(domain, entries + adding, since: since, current: current, whole: true)
    }

    /// Writes `domain`'s history file anew with `entries` as retention keeps them, complete
    /// from `since` on, and records what it holds (in ``histories``, and in ``cache`` with
    /// `keep` or if a reader asked for it before). Entries of keys that keep no history are
    /// left out (a domain that keeps none has its file removed instead); what is kept is
    /// within ``HistoryRetention/pruneTarget(_:)`` of the bound for `current` (the domain's
    /// committed state). On failure it forgets the file, which is then read again when next
    /// needed. `whole`: `entries` hold every entry of their last revision (a fold's rewrite).
    private func write(
        _ domain: Domain, _ entries: [HistoryEntry], since: Int64, current: DomainState?, keep: Bool = false,
        whole: Bool = false
    ) throws(SystemError) {
        let options = self.options!
        guard !exclusions.excludes(domain) else { return try remove(domain, since: since, keep: keep) }
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
            try fileSystem.replaceFile(folder.path(name), temporary: folder.path("." + name + ".tmp"), with: bytes)
            try fileSystem.syncDirectory(folder.directory)
        } catch {
            // The old file or the new one may be in place: read it again when next needed.
            (histories[domain], loaded) = (nil, loaded.subtracting([domain]))
            cache.set(domain, nil)
            throw error
        }
        var info = HistoryFileInfo(
            pruned.entries, lines: pruned.entries.count, validLength: Int64(bytes.count), torn: false)
        info.folded(all, whole: whole)  // what was pruned stays folded
        histories[domain] = info
        loaded.insert(domain)
        if keep || cache[domain] != nil {
            cache.set(domain, KeptHistory(entries: pruned.entries, since: pruned.since, mark: info.mark))
        }
    }

    /// What reading a domain's history file gave.
    private enum Read {
        case content(HistoryContent)
        case missing
        /// It could not be read; it was set aside (or, failing that, left) and logged.
        case unreadable
    }

    /// Reads `domain`'s history file; one that cannot be used is renamed aside and logged.
    /// Throws if reading it failed (I/O: nothing is set aside, the caller fails and retries).
    private func read(_ domain: Domain) throws(SystemError) -> Read {
        let name = HistoryFormat.fileName(for: domain)
        let path = folder.path(name)
        let reason: String
        do throws(HistoryFileError) {
            guard let content = try HistoryFile.read(fileSystem, path, domain: domain) else { return .missing }
            return .content(content)
        } catch {
            if let failure = error.system { throw failure }
            reason = error.reason
        }
        do {
            let backup = try folder.moveAside(name)
            folder.log(
                .error,
                "history file \(path) is unreadable (\(reason)); moved it to \(folder.path(backup)); the history of domain \(domain) starts again from its current values"
            )
        } catch {
            folder.log(.error, "history file \(path) is unreadable (\(reason)) and could not be moved aside: \(error)")
        }
        return .unreadable
    }

    /// Reads `domain`'s history file, once per store, and records how far it goes in
    /// ``histories``; with `keep` (a reader asks), also what it holds in ``cache``. Nothing if
    /// that was done before. A file that cannot be read is set aside; one that misses changes
    /// (kvd before history, history off meanwhile, a file set aside or lost) is completed from
    /// the domain's values and rewritten (see ``completion(of:_:current:recent:unreadable:)``).
    /// `current` is the domain's committed state at the store's `revision`, `recent` its commits
    /// still only in the log.
    ///
    /// - Throws: if reading or writing failed (I/O): nothing is recorded, the next need retries.
    func load(
        _ domain: Domain, current: DomainState?, revision: Int64, recent: [RecentCommit], keep: Bool = false
    ) throws(SystemError) {
        guard options != nil, !loaded.contains(domain) || (keep && cache[domain] == nil) else { return }
        var (content, present, unreadable) = (HistoryContent(), false, false)
        switch try read(domain) {
        case .content(let read): (content, present) = (read, true)
        case .missing: break
        case .unreadable: unreadable = true
        }
        // A file this store loaded before is complete: it kept it so (only the first load checks).
        let checked = loaded.contains(domain) && !unreadable
        if !checked,
            let (entries, since) = completion(
                of: content, domain, current: current, recent: recent, unreadable: unreadable)
        {
            try write(domain, entries, since: since, current: current, keep: keep)
            if !unreadable {
                folder.log(
                    .warning,
                    "history of domain \(domain) misses the changes up to revision \(since) (kvd before history, history was off, or a file was lost); it goes on from the domain's values then"
                )
            }
        } else if present {
            let info = HistoryFileInfo(
                content.entries, lines: content.entries.count, validLength: Int64(content.validLength),
                torn: content.tornTail != nil)
            histories[domain] = info
            if keep {
                cache.set(
                    domain,
                    KeptHistory(
                        entries: HistoryRetention.normalized(content.entries), since: content.since, mark: info.mark))
            }
        } else if keep {
            cache.set(domain, KeptHistory())  // none yet: the first fold writes it, complete from 0
        }
        loaded.insert(domain)
        start[domain] = nil
    }

    /// What a history file must become to be complete, or nil if it is. It misses changes
    /// when the domain file was newer than it at start (or the file is missing or unreadable
    /// beside a domain file), or when it shows values of a domain that had no file at start
    /// and no commit in the log made its last change (it was deleted while history was off):
    /// it then gets, at that base revision, the values the domain had (removals for the keys
    /// it no longer had). A key the log changed since has no known value at the base: states
    /// are kept from its first change in the log on (the new `since`).
    private func completion(
        of content: HistoryContent, _ domain: Domain, current: DomainState?, recent: [RecentCommit], unreadable: Bool
    ) -> (entries: [HistoryEntry], since: Int64)? {
        let last = content.lastRevision
        let start = self.start[domain]
        let live = HistoryRetention.state(of: HistoryRetention.normalized(content.entries), at: .max)
        let base: Int64
        if let start, start > last || unreadable {
            base = start
        } else if start == nil, unreadable || (!live.isEmpty && !recent.contains(where: { $0.revision == last })) {
            base = logBase
        } else {
            return nil
        }
        var firstChange: [Key: Int64] = [:]
        for commit in recent where commit.revision > base {
            for change in commit.changes where firstChange[change.key] == nil {
                firstChange[change.key] = commit.revision
            }
        }
        let values = HistoryRetention.baseline(current).filter { firstChange[$0.key] == nil }
        let removals = live.keys.filter { current?.entries[$0] == nil && firstChange[$0] == nil }
            .map { HistoryEntry(revision: base, time: nil, key: $0, value: nil) }
        return (content.entries + values + removals, max(content.since, base, firstChange.values.max() ?? 0))
    }

    /// Rewrites `domain`'s history file without the entries of `key` (of every key, if nil):
    /// the values `current` still holds stay, as values of no known time, and states are kept
    /// from the newest forgotten revision on. `recent` is the domain's commits still only in
    /// the log, the forgotten ones included. With history off, removes the file.
    /// The caller then compacts (the log holds the values too) and scrubs the copies
    /// (``CopiesSetAside/scrub(_:in:key:)``).
    func forget(_ domain: Domain, key: Key?, current: DomainState?, revision: Int64, recent: [RecentCommit])
        throws(SystemError)
    {
        guard options != nil else { return try remove(domain, since: revision, keep: false) }
        try load(domain, current: current, revision: revision, recent: recent)
        var (entries, since): ([HistoryEntry], Int64) = ([], 0)
        if let kept = cache[domain] {
            (entries, since) = (kept.entries, kept.since)
        } else if histories[domain] != nil, case .content(let content) = try read(domain) {
            (entries, since) = (content.entries, content.since)
        }
        let all = entries + (histories[domain]?.mark ?? HistoryMark()).fresh(recent)
        let forgotten = all.filter { key == nil || $0.key == key }
        guard !forgotten.isEmpty else { return }
        let rest = all.filter { key != nil && $0.key != key }
        let values = HistoryRetention.baseline(current).filter { key == nil || $0.key == key }
        try write(domain, rest + values, since: max(since, forgotten.lazy.map(\.revision).max() ?? 0), current: current)
    }

    /// Removes `domain`'s history file (if any) durably, and records that it has none:
    /// states are kept from `since` on.
    private func remove(_ domain: Domain, since: Int64, keep: Bool) throws(SystemError) {
        let name = HistoryFormat.fileName(for: domain)
        do {
            try fileSystem.unlink(folder.path(name))
            try fileSystem.syncDirectory(folder.directory)
        } catch  where error.code == ENOENT {}
        histories[domain] = nil
        loaded.insert(domain)
        start[domain] = nil
        if keep || cache[domain] != nil { cache.set(domain, KeptHistory(since: since)) }
    }

    /// Removes every history file, durably (to make room for the data when the disk is full),
    /// and starts each domain's history again from its values at `revision` when next needed.
    /// Returns whether any was removed.
    @discardableResult
    func drop(domains: [Domain: DomainState], revision: Int64) throws(SystemError) -> Bool {
        let names = try fileSystem.contentsOfDirectory(folder.directory).filter(HistoryFormat.isHistoryFile)
        for name in names { try fileSystem.unlink(folder.path(name)) }
        if !names.isEmpty { try fileSystem.syncDirectory(folder.directory) }
        histories = [:]
        loaded = []
        cache.removeAll()
        start = domains.mapValues { _ in revision }
        logBase = revision
        return !names.isEmpty
    }

    /// With history off: removes the history files and their copies set aside, durably (what
    /// was kept goes when history is turned off). Logged.
    func removeFiles() throws(SystemError) {
        let copyMarker = HistoryFormat.suffix + StorageFormat.backupMarker
        let names = try fileSystem.contentsOfDirectory(folder.directory).filter {
            HistoryFormat.isHistoryFile($0) || $0.contains(copyMarker)
        }
        guard !names.isEmpty else { return }
        for name in names { try fileSystem.unlink(folder.path(name)) }
        try fileSystem.syncDirectory(folder.directory)
        folder.log(.notice, "history is off: removed \(names.count) history files from \(folder.directory)")
    }
}
