import KVSystem
import KVValues

@testable import KVStorage

/// Checks the state a crash left: that the files parse, that recovery succeeds and shows one of
/// the allowed contents, that every apply is all or nothing, and that the state recovery leaves
/// is durable and takes new commits at a higher revision.
struct CrashChecker {
    let directory: String
    let options: StoreOptions
    /// For each marked apply: its number and key count.
    let applies: [Int: Int]
    static let probe = domain("com.example.probe")
    /// Whether each recovered disk's history is read and judged, and its states rebuilt from it
    /// (costly: off for the crashes during recovery, whose disks the outer run has checked so).
    var checksHistory = true

    /// What recovering a disk gives, or why it failed. Deterministic, so cached per disk.
    enum Recovered: Equatable {
        case content(StoreContent)
        case failed(String)
    }

    func recover(_ disk: Disk) -> Recovered {
        if let problem = unparsableFile(on: disk) { return .failed(problem) }
        let fileSystem = SimulatedFileSystem(disk)
        let content: StoreContent
        do {
            let store = try Store(directory: directory, options: options, fileSystem: fileSystem)
            var read = StoreContent(of: store)
            if checksHistory { try read.readHistory(of: store, Self.historyDomains) }
            if checksHistory, let problem = rebuildStates(store, into: &read) { return .failed(problem) }
            content = read
            // The revision never goes back: a new commit gets a higher one than anything seen.
            let probe = try store.commit(Self.probe, .set(key("p"), .integer(1), ifRevision: nil))
            guard probe.revision == content.revision + 1 else {
                return .failed("a new commit got revision \(probe.revision) after recovery at \(content.revision)")
            }
            store.close()
        } catch {
            return .failed("recovery or the first commit after it failed: \(error)")
        }
        if let backup = fileSystem.model.current.files(in: directory).keys.first(where: { StorageFormat.isBackup($0) })
        {
            return .failed("recovery found damage and made the backup \(backup)")
        }
        // What recovery, the commit and the close wrote must itself survive a crash.
        var expected = content
        expected.apply(Self.probe, .set(key("p"), .integer(1), ifRevision: nil))
        do {
            let store = try Store(
                directory: directory, options: options,
                fileSystem: SimulatedFileSystem(fileSystem.model.durable.reachable()))
            defer { store.close() }
            var reread = StoreContent(of: store)
            if checksHistory { try reread.readHistory(of: store, Self.historyDomains) }
            guard reread == expected else {
                return .failed("after recovery, a commit, close and crash: \(reread), expected \(expected)")
            }
            if let problem = judgeHistory(reread, expected: expected) {
                return .failed("after recovery, a commit, close and crash: \(problem)")
            }
        } catch {
            return .failed("the second recovery failed: \(error)")
        }
        return .content(content)
    }

    /// Every domain file on the crashed disk must parse (they are only ever renamed into place
    /// once synced), and the log must have an intact header and at most a torn tail.
    func unparsableFile(on disk: Disk) -> String? {
        for (name, bytes) in disk.files(in: directory) {
            if name == StorageFormat.logFileName {
                do {
                    let scan = try LogFormat.scan(bytes)
                    if !scan.damage.isEmpty { return "the log has damage besides a torn tail: \(scan.damage)" }
                } catch {
                    return "the log does not parse: \(error)"
                }
            } else if let entry = StorageFormat.entry(forFileName: name) {
                var domain: Domain?
                if case .domainFile(let known) = entry { domain = known }
                do { _ = try DomainFile.decode(bytes, domain: domain) } catch {
                    return "domain file \(name) does not parse: \(error.reason)"
                }
            }
        }
        return nil
    }

    /// Nil if `content` is one of `allowed` and every apply in it is whole; else why not.
    func judge(_ content: StoreContent, allowed: [StoreContent]) -> String? {
        for (number, count) in applies {
            var visible = 0
            for entries in content.domains.values {
                visible += entries.values.filter { $0.value == CrashWorkload.marker(number) }.count
            }
            if visible != 0, visible != count {
                return "apply \(number) is half visible: \(visible) of its \(count) keys"
            }
        }
        guard let match = allowed.first(where: { $0 == content }) else {
            return "recovered \(content)\n  allowed:\n" + allowed.map { "    \($0)" }.joined(separator: "\n")
        }
        return judgeHistory(content, expected: match)
    }

    /// The domains whose history the checks read (every domain of the workloads).
    static let historyDomains = [
        "com.example.a", "com.example.b", "com.example.c", "NSGlobalDomain", "com.example.probe",
    ].map(domain)
        .flatMap { [$0, Domain.locks(of: $0)] }

    /// Nil if the history `content` serves is what `expected` (the oracle) committed, as
    /// retention keeps it: of each key, the newest entries, at least `options.historyKeep` of
    /// them (all, while `historyDays` keeps everything), and nothing else; else why not.
    func judgeHistory(_ content: StoreContent, expected: StoreContent) -> String? {
        guard checksHistory else { return nil }
        let keep = options.historyDays > 0 ? Int.max : options.historyKeep
        for domain in Set(content.history.keys).union(expected.history.keys) {
            let served = content.history[domain] ?? []
            let committed = expected.history[domain] ?? []
            for key in Set(committed.map(\.key)).union(served.map(\.key)) {
                let mine = served.filter { $0.key == key }
                let theirs = committed.filter { $0.key == key }
                guard mine.count >= min(keep, theirs.count), Array(theirs.suffix(mine.count)) == mine else {
                    return
                        "history of \(domain) key \(key): served \(mine.map(Self.describe)), committed \(theirs.map(Self.describe))"
                }
            }
        }
        for (domain, states) in content.rebuilt {
            for (revision, values) in states {
                let committed = HistoryRetention.state(of: expected.history[domain] ?? [], at: revision).mapValues {
                    $0.value!
                }
                guard values == committed else {
                    return "history of \(domain) at revision \(revision) gives \(values), committed \(committed)"
                }
            }
        }
        return nil
    }

    /// Rebuilds each domain's state from history at its oldest revision, halfway and now, into
    /// ``StoreContent/rebuilt`` (``judgeHistory`` compares them with the oracle's); a revision
    /// just before the oldest must be refused. Nil, or why history failed.
    func rebuildStates(_ store: Store, into content: inout StoreContent) -> String? {
        let now = store.revision
        for domain in Self.historyDomains {
            guard let page = try? store.history(domain) else { return "no history of \(domain)" }
            guard !page.entries.isEmpty || page.oldestRevision > 0 else { continue }
            for revision in Set([page.oldestRevision, (page.oldestRevision + now) / 2, now]) {
                guard let rebuilt = try? store.history(domain, at: revision) else {
                    return "history of \(domain) at \(revision) cannot be rebuilt"
                }
                content.rebuilt[domain, default: [:]][revision] = Dictionary(
                    uniqueKeysWithValues: rebuilt.map { ($0.key, $0.value!) })
            }
            if page.oldestRevision > 0, (try? store.history(domain, at: page.oldestRevision - 1)) != nil {
                return
                    "history of \(domain) rebuilds revision \(page.oldestRevision - 1), before its oldest \(page.oldestRevision)"
            }
        }
        return nil
    }

    static func describe(_ entry: HistoryEntry) -> String {
        "\(entry.revision):\(entry.value.map { "\($0)" } ?? "removed")"
    }
}

/// Walks the operations of a recorded workload and checks every crash state after each.
enum CrashEnumeration {
    struct Report {
        var points = 0
        var states = 0
        var distinct = 0
        var failures: [String] = []
        /// Each distinct disk checked, with what recovering it gave.
        var recovered: [Disk: CrashChecker.Recovered] = [:]
    }

    /// Recovers each distinct crashed disk of `outer` again, crashing at every operation of
    /// that recovery and of `then` (a commit and a close, say): recovery itself must be
    /// crash-safe, and once it has returned, what it served must survive.
    static func crashDuringRecovery(
        of outer: Report, directory: String, options: StoreOptions, checker: CrashChecker, then: (CrashWorkload) -> Void
    ) -> Report {
        var total = Report()
        total.recovered = outer.recovered
        for (disk, recovered) in outer.recovered {
            guard case .content(let content) = recovered else { continue }
            let fileSystem = SimulatedFileSystem(disk)
            let work = CrashWorkload(fileSystem: fileSystem, directory: directory, options: options, base: content)
            work.open()
            then(work)
            work.close()
            var light = checker
            light.checksHistory = false
            let report = run(fileSystem, work, light, known: total.recovered)
            total.recovered = report.recovered
            total.distinct += report.distinct
            total.points += report.points
            total.states += report.states
            total.failures += report.failures
        }
        return total
    }

    /// Checks the crash states after each operation (and before the first).
    /// `known` holds disks already recovered (recovery is deterministic), to skip them.
    static func run(
        _ fileSystem: SimulatedFileSystem, _ work: CrashWorkload, _ checker: CrashChecker,
        known: [Disk: CrashChecker.Recovered] = [:]
    ) -> Report {
        let operations = fileSystem.operations
        let labels = fileSystem.labels
        var model = DiskModel(fileSystem.initial)
        var report = Report(points: operations.count)
        report.recovered = known
        let before = known.count
        for point in 0...operations.count {
            if point > 0 { model.apply(operations[point - 1]) }
            let allowed = work.allowedContents(after: point)
            for disk in model.crashStates() {
                report.states += 1
                let recovered = report.recovered[disk] ?? checker.recover(disk)
                report.recovered[disk] = recovered
                let problem: String? =
                    switch recovered {
                    case .failed(let reason): reason
                    case .content(let content): checker.judge(content, allowed: allowed)
                    }
                if let problem {
                    let last = point > 0 ? labels[point - 1] : "nothing"
                    report.failures.append(
                        "crash after operation \(point) (\(last)): \(problem)\n  disk: \(describe(disk, checker.directory))"
                    )
                }
            }
        }
        report.distinct = report.recovered.count - before
        return report
    }

    static func describe(_ disk: Disk, _ directory: String) -> String {
        disk.files(in: directory).sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value.count) bytes)" }.joined(
            separator: ", ")
    }
}
