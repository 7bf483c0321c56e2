import KVValues

extension Recovery {
    /// Reads every history file (setting aside those that cannot be read) and makes each
    /// domain's history complete from its `since` on: a domain file without a history file (kvd
    /// before history, or history was off) gets one with its values; a history file that misses
    /// changes (history was off meanwhile) gets the domain's values and removals at the domain
    /// file's revision (or, for a domain with no file, the log's base). `loaded` is what the
    /// domain files held, before the log replay; `recent` the replayed commits. Nothing when
    /// history is off.
    func recoverHistory(loaded: [Domain: DomainState], recent: [Domain: [RecentCommit]], logBase: Int64) throws(StorageError) {
        guard journal.historyOptions != nil else { return }
        let files: [Domain]
        do { files = try historyFiles(known: Set(loaded.keys).union(recent.keys)) } catch {
            throw .failure("cannot list the history files in \(directory): \(error)")
        }
        do {
            for domain in files {
                try recoverHistory(of: domain, loaded: loaded[domain], recent: recent[domain] ?? [], logBase: logBase)
            }
            for (domain, state) in loaded.sorted(by: { $0.key < $1.key }) where journal.histories[domain] == nil && !files.contains(domain) {
                try journal.writeHistory(domain, Journal.baseline(state), since: state.revision)
                journal.log(.info, "history of domain \(domain) begins at revision \(state.revision) with its \(state.entries.count) values")
            }
        } catch {
            throw .failure("cannot write a history file in \(directory): \(error)")
        }
    }

    /// One domain's history file: read, and completed (or started again) where needed.
    private func recoverHistory(of domain: Domain, loaded: DomainState?, recent: [RecentCommit], logBase: Int64) throws(FileSystemError) {
        switch try journal.readHistory(domain) {
        case .missing: return
        case .unreadable:
            try journal.writeHistory(domain, Journal.baseline(loaded), since: loaded?.revision ?? logBase)
        case .content(let content):
            let last = content.lastRevision
            journal.histories[domain] = HistoryFileInfo(
                content.entries, lines: content.entries.count, validLength: Int64(content.validLength), torn: content.tornTail != nil)
            let live = HistoryRetention.state(of: HistoryRetention.normalized(content.entries), at: .max)
            let since: Int64
            if let loaded, loaded.revision > last {
                since = loaded.revision
            } else if loaded == nil, !live.isEmpty, !recent.contains(where: { $0.revision == last }) {
                since = logBase
            } else {
                return
            }
            let removals = live.keys.filter { loaded?.entries[$0] == nil }.map { HistoryEntry(revision: since, time: nil, key: $0, value: nil) }
            try journal.writeHistory(domain, content.entries + Journal.baseline(loaded) + removals, since: max(content.since, since))
            journal.log(
                .warning, "history of domain \(domain) misses the changes up to revision \(since) (history was off, or a file was lost); it goes on from the domain's values then")
        }
    }

    /// The domains that have a history file, sorted. A `PREFIX~HASH.history` is matched among
    /// `known` domains (a long-named domain no other file names is read from its header).
    private func historyFiles(known: Set<Domain>) throws(FileSystemError) -> [Domain] {
        let long = Dictionary(known.map { (HistoryFormat.fileName(for: $0), $0) }, uniquingKeysWith: { first, _ in first })
        var found: [Domain] = []
        for name in try fileSystem.contentsOfDirectory(directory) {
            guard name.hasSuffix(HistoryFormat.suffix), !name.hasPrefix("."), !StorageFormat.isBackup(name) else { continue }
            let stem = String(name.dropLast(HistoryFormat.suffix.count))
            if let domain = long[name] {
                found.append(domain)
            } else if !stem.contains("~"), let domain = try? Domain(stored: stem) {
                found.append(domain)
            } else if let domain = HistoryFormat.domain(inHeaderOf: (try? fileSystem.readRegularFile(journal.path(name), limit: .max)) ?? nil),
                HistoryFormat.fileName(for: domain) == name
            {
                found.append(domain)
            } else {
                journal.log(.warning, "\(journal.path(name)) is not the history file of any domain; it is left as it is")
            }
        }
        return found.sorted()
    }
}

extension HistoryFormat {
    /// The domain a history file's header names, if it can be read.
    static func domain(inHeaderOf bytes: [UInt8]?) -> Domain? {
        guard let bytes, let (header, _) = LogFormat.line(in: bytes, at: 0), let json = try? JSONParser.parse(bytes[header]),
            case .string(let name)? = json["domain"]
        else { return nil }
        return try? Domain(stored: name)
    }
}
