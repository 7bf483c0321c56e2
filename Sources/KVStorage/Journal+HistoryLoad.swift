import KVSystem
import KVValues

/// Loading a history file when it is first needed: by a fold into it, or by a reader.
/// Commit queue only (or recovery); blocks on I/O.
extension Journal {
    /// Reads `domain`'s history file, once per store, and records how far it goes in
    /// ``histories``; with `keep` (a reader asks), also what it holds in ``historyCache``.
    /// Nothing if that was done before. A file that cannot be read is set aside; one that
    /// misses changes (kvd before history, history off meanwhile, a file set aside or lost) is
    /// completed from the domain's values and rewritten (see
    /// ``completion(of:_:current:recent:unreadable:)``). `current` is the domain's committed
    /// state at the store's `revision`, `recent` its commits still only in the log.
    ///
    /// - Throws: if reading or writing failed (I/O): nothing is recorded, the next need retries.
    func loadHistory(
        _ domain: Domain, current: DomainState?, revision: Int64, recent: [RecentCommit], keep: Bool = false
    ) throws(SystemError) {
        guard historyOptions != nil, !loadedHistories.contains(domain) || (keep && historyCache[domain] == nil) else {
            return
        }
        var (content, present, unreadable) = (HistoryContent(), false, false)
        switch try readHistory(domain) {
        case .content(let read): (content, present) = (read, true)
        case .missing: break
        case .unreadable: unreadable = true
        }
        // A file this store loaded before is complete: it kept it so (only the first load checks).
        let checked = loadedHistories.contains(domain) && !unreadable
        if !checked,
            let (entries, since) = completion(
                of: content, domain, current: current, recent: recent, unreadable: unreadable)
        {
            try writeHistory(domain, entries, since: since, current: current, keep: keep)
            if !unreadable {
                log(
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
                historyCache.set(
                    domain,
                    KeptHistory(
                        entries: HistoryRetention.normalized(content.entries), since: content.since, mark: info.mark))
            }
        } else if keep {
            historyCache.set(domain, KeptHistory())  // none yet: the first fold writes it, complete from 0
        }
        loadedHistories.insert(domain)
        historyStart[domain] = nil
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
        let start = historyStart[domain]
        let live = HistoryRetention.state(of: HistoryRetention.normalized(content.entries), at: .max)
        let base: Int64
        if let start, start > last || unreadable {
            base = start
        } else if start == nil, unreadable || (!live.isEmpty && !recent.contains(where: { $0.revision == last })) {
            base = historyLogBase
        } else {
            return nil
        }
        var firstChange: [Key: Int64] = [:]
        for commit in recent where commit.revision > base {
            for change in commit.changes where firstChange[change.key] == nil {
                firstChange[change.key] = commit.revision
            }
        }
        let values = Self.baseline(current).filter { firstChange[$0.key] == nil }
        let removals = live.keys.filter { current?.entries[$0] == nil && firstChange[$0] == nil }
            .map { HistoryEntry(revision: base, time: nil, key: $0, value: nil) }
        return (content.entries + values + removals, max(content.since, base, firstChange.values.max() ?? 0))
    }
}
