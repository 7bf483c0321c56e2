import Glibc
import KVSystem
import KVValues

/// Forgetting history: a key's or a domain's past values removed from every file the store
/// keeps (``forgetHistory(_:key:current:revision:recent:)``), history dropped to make room for
/// the data (``dropHistory(domains:revision:)``), history files removed when history is off,
/// and the marks of what keeps no history. Commit queue only (or recovery); blocks on I/O.
extension Journal {
    /// Rewrites `domain`'s history file without the entries of `key` (of every key, if nil):
    /// the values `current` still holds stay, as values of no known time, and states are kept
    /// from the newest forgotten revision on. `recent` is the domain's commits still only in
    /// the log, the forgotten ones included. With history off, removes the file.
    /// The caller then compacts (the log holds the values too) and scrubs the copies
    /// (``scrubCopies(_:key:)``).
    func forgetHistory(_ domain: Domain, key: Key?, current: DomainState?, revision: Int64, recent: [RecentCommit])
        throws(SystemError)
    {
        guard historyOptions != nil else { return try removeHistory(domain, since: revision, keep: false) }
        try loadHistory(domain, current: current, revision: revision, recent: recent)
        var (entries, since): ([HistoryEntry], Int64) = ([], 0)
        if let kept = historyCache[domain] {
            (entries, since) = (kept.entries, kept.since)
        } else if histories[domain] != nil, case .content(let content) = try readHistory(domain) {
            (entries, since) = (content.entries, content.since)
        }
        let all = entries + (histories[domain]?.mark ?? HistoryMark()).fresh(recent)
        let forgotten = all.filter { key == nil || $0.key == key }
        guard !forgotten.isEmpty else { return }
        let rest = all.filter { key != nil && $0.key != key }
        let values = Self.baseline(current).filter { key == nil || $0.key == key }
        try writeHistory(
            domain, rest + values, since: max(since, forgotten.lazy.map(\.revision).max() ?? 0), current: current)
    }

    /// Removes `domain`'s history file (if any) durably, and records that it has none:
    /// states are kept from `since` on.
    func removeHistory(_ domain: Domain, since: Int64, keep: Bool) throws(SystemError) {
        let name = HistoryFormat.fileName(for: domain)
        do {
            try fileSystem.unlink(path(name))
            try fileSystem.syncDirectory(directory)
        } catch  where error.code == ENOENT {}
        histories[domain] = nil
        loadedHistories.insert(domain)
        historyStart[domain] = nil
        if keep || historyCache[domain] != nil { historyCache.set(domain, KeptHistory(since: since)) }
    }

    /// Removes or rewrites the copies set aside (``StorageFormat/isBackup(_:)``) that may hold
    /// past values of `key` of `domain` (of every key, if nil): the domain's history copies
    /// are removed, and so are its domain file copies (for a key: those that name it); a copy
    /// of the log is rewritten without the lines that name the domain (and the key), torn or
    /// not. Then syncs the folder.
    func scrubCopies(_ domain: Domain, key: Key?) throws(SystemError) {
        var domainName: [UInt8] = []
        var keyName: [UInt8] = []
        JSONWriter.writeString(domain.name, into: &domainName)
        if let key { JSONWriter.writeString(key.name, into: &keyName) }
        let historyCopy = HistoryFormat.fileName(for: domain) + StorageFormat.backupMarker
        let domainCopy =
            String(StorageFormat.fileName(for: domain).dropLast(StorageFormat.domainSuffix.count))
            + StorageFormat.backupMarker
        let logCopy = StorageFormat.logFileName + StorageFormat.backupMarker
        var changed = false
        for name in try fileSystem.contentsOfDirectory(directory) where StorageFormat.isBackup(name) {
            let json = name.hasSuffix(StorageFormat.domainSuffix)
            if name.hasPrefix(historyCopy), !json {
                try fileSystem.unlink(path(name))
                changed = true
            } else if name.hasPrefix(domainCopy), json {
                if key != nil {
                    guard let bytes = try readCopy(name), Self.contains(bytes, keyName) else { continue }
                }
                try fileSystem.unlink(path(name))
                changed = true
            } else if name.hasPrefix(logCopy), !json, let bytes = try readCopy(name) {
                let kept = Self.lines(of: bytes) { line in
                    !(Self.contains(line, domainName) && (key == nil || Self.contains(line, keyName)))
                }
                guard kept.count != bytes.count else { continue }
                try fileSystem.replaceFile(path(name), temporary: path("." + name + ".tmp"), with: kept)
                changed = true
            }
        }
        if changed { try fileSystem.syncDirectory(directory) }
    }

    private func readCopy(_ name: String) throws(SystemError) -> [UInt8]? {
        do { return try fileSystem.readRegularFile(path(name), limit: .max) } catch {
            if case .system(let failure) = error { throw failure }
            return nil  // not a regular file: kvd never wrote it
        }
    }

    /// The lines of `bytes` (split at LF, the last one maybe unterminated) that `keep` takes.
    static func lines(of bytes: [UInt8], keeping keep: (ArraySlice<UInt8>) -> Bool) -> [UInt8] {
        var out: [UInt8] = []
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? bytes.count
            if keep(bytes[start..<end]) { out.append(contentsOf: bytes[start..<end]) }
            start = end
        }
        return out
    }

    static func contains(_ bytes: some Collection<UInt8>, _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, bytes.count >= needle.count else { return needle.isEmpty }
        let bytes = Array(bytes)
        var index = 0
        while let first = bytes[index...].firstIndex(of: needle[0]), first + needle.count <= bytes.count {
            if bytes[first..<(first + needle.count)].elementsEqual(needle) { return true }
            index = first + 1
        }
        return false
    }

    /// Removes every history file, durably (to make room for the data when the disk is full),
    /// and starts each domain's history again from its values at `revision` when next needed.
    /// Returns whether any was removed.
    @discardableResult
    func dropHistory(domains: [Domain: DomainState], revision: Int64) throws(SystemError) -> Bool {
        let names = try fileSystem.contentsOfDirectory(directory).filter(Self.isHistoryFile)
        for name in names { try fileSystem.unlink(path(name)) }
        if !names.isEmpty { try fileSystem.syncDirectory(directory) }
        histories = [:]
        loadedHistories = []
        historyCache.removeAll()
        historyStart = domains.mapValues { _ in revision }
        historyLogBase = revision
        return !names.isEmpty
    }

    /// Whether `name` is a history file (not a copy set aside, not a temporary file).
    static func isHistoryFile(_ name: String) -> Bool {
        name.hasSuffix(HistoryFormat.suffix) && !name.hasPrefix(".") && !StorageFormat.isBackup(name)
    }

    /// With history off: removes the history files and their copies set aside, durably (what
    /// was kept goes when history is turned off). Logged.
    func removeHistoryFiles() throws(SystemError) {
        let copyMarker = HistoryFormat.suffix + StorageFormat.backupMarker
        let names = try fileSystem.contentsOfDirectory(directory).filter {
            Self.isHistoryFile($0) || $0.contains(copyMarker)
        }
        guard !names.isEmpty else { return }
        for name in names { try fileSystem.unlink(path(name)) }
        try fileSystem.syncDirectory(directory)
        log(.notice, "history is off: removed \(names.count) history files from \(directory)")
    }

    /// Reads ``HistoryExclusions/fileName`` into ``exclusions``. One that cannot be read is
    /// set aside and logged (every key then keeps history until marked again).
    func loadExclusions() throws(SystemError) {
        let name = HistoryExclusions.fileName
        let bytes: [UInt8]?
        do { bytes = try fileSystem.readRegularFile(path(name), limit: 16 << 20) } catch {
            if case .system(let failure) = error { throw failure }
            bytes = []
        }
        guard let bytes else { return }
        if let read = HistoryExclusions.decode(bytes) {
            exclusions = read
            return
        }
        let backup = try moveAside(name)
        log(
            .error,
            "\(path(name)) cannot be read; moved it to \(path(backup)): every key keeps history until marked again (kvctl history --keep-none)"
        )
    }

    /// Writes ``exclusions`` to ``HistoryExclusions/fileName`` durably (removes it when empty).
    func saveExclusions() throws(SystemError) {
        let name = HistoryExclusions.fileName
        if exclusions.isEmpty {
            do { try fileSystem.unlink(path(name)) } catch  where error.code == ENOENT { return }
        } else {
            try fileSystem.replaceFile(path(name), temporary: path("." + name + ".tmp"), with: exclusions.encoded())
        }
        try fileSystem.syncDirectory(directory)
    }
}
