import Dispatch
import Glibc
import KVSystem
import KVValues
import Synchronization

@testable import KVStorage

/// What a store holds, as the test's own oracle computes it (independent of the engine's
/// planner) or as read back from a store through its public API.
struct StoreContent: Hashable, CustomStringConvertible {
    struct Stored: Hashable {
        var value: Value
        var revision: Int64
    }

    var domains: [Domain: [Key: Stored]] = [:]
    var domainRevisions: [Domain: Int64] = [:]
    var revision: Int64 = 0
    /// Every committed change per domain, sorted by revision and key (the oracle's); or, read
    /// from a store, what its history serves. Not part of `==` (``CrashChecker/judgeHistory``
    /// compares it, allowing for retention).
    var history: [Domain: [HistoryEntry]] = [:]
    /// A store's states rebuilt from history at some revisions (``CrashChecker/rebuildStates``).
    var rebuilt: [Domain: [Int64: [Key: Value]]] = [:]

    init() {}

    static func == (left: StoreContent, right: StoreContent) -> Bool {
        (left.domains, left.domainRevisions, left.revision) == (right.domains, right.domainRevisions, right.revision)
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(domains)
        hasher.combine(domainRevisions)
        hasher.combine(revision)
    }

    /// Reads the history of `domains` from `store` (entries sorted by revision and key).
    mutating func readHistory(of store: Store, _ domains: [Domain]) throws {
        for domain in domains {
            let entries = try store.history(domain).entries.map {
                HistoryEntry(revision: $0.revision, time: nil, key: $0.key, value: $0.value)
            }
            if !entries.isEmpty { history[domain] = entries.sorted(by: Self.historyOrder) }
        }
    }

    static func historyOrder(_ a: HistoryEntry, _ b: HistoryEntry) -> Bool { (a.revision, a.key) < (b.revision, b.key) }

    /// Adds the oracle's history entries of one commit at `revision` (the final value of each key).
    private mutating func record(_ domain: Domain, _ changes: [Key: Value?], at revision: Int64) {
        let entries = changes.map { HistoryEntry(revision: revision, time: nil, key: $0.key, value: $0.value) }.sorted(
            by: Self.historyOrder)
        history[domain, default: []] += entries
    }

    /// Reads everything a store serves.
    init(of store: Store) {
        for domain in store.domains() {
            guard let snapshot = store.list(domain) else { continue }
            var entries: [Key: Stored] = [:]
            for (key, value) in snapshot.values {
                entries[key] = Stored(value: value, revision: snapshot.revisions[key] ?? -1)
            }
            for key in snapshot.unreadable.keys { entries[key] = Stored(value: .string("UNREADABLE"), revision: -1) }
            domains[domain] = entries
            domainRevisions[domain] = snapshot.revision
        }
        revision = store.revision
    }

    /// Applies a mutation as a successful commit would: the oracle.
    mutating func apply(_ domain: Domain, _ mutation: Mutation) {
        var entries = domains[domain] ?? [:]
        var changed: [Key: Value?] = [:]
        let next = revision + 1
        switch mutation {
        case .set(let key, let value, _):
            entries[key] = Stored(value: value, revision: next)
            changed[key] = .some(value)
        case .delete(let key):
            if entries.removeValue(forKey: key) != nil { changed[key] = .some(nil) }
        case .apply(let changes, _):
            for change in changes {
                if let value = change.value {
                    entries[change.key] = Stored(value: value, revision: next)
                    changed[change.key] = .some(value)
                } else if entries.removeValue(forKey: change.key) != nil {
                    changed[change.key] = .some(nil)
                }
            }
        case .deleteDomain:
            for key in entries.keys { changed[key] = .some(nil) }
            entries = [:]
        }
        guard !changed.isEmpty else { return }
        record(domain, changed, at: next)
        revision = next
        domains[domain] = entries.isEmpty ? nil : entries
        domainRevisions[domain] = entries.isEmpty ? nil : next
    }

    /// Applies a group as a successful group commit would: every domain's changes at one
    /// revision, or (nothing changes) none.
    mutating func applyGroup(_ parts: [DomainChanges]) {
        var after = self
        after.revision = revision
        var changed = false
        for part in parts {
            var entries = after.domains[part.domain] ?? [:]
            var domainChanged: [Key: Value?] = [:]
            for change in part.changes {
                if let value = change.value {
                    entries[change.key] = Stored(value: value, revision: revision + 1)
                    domainChanged[change.key] = .some(value)
                } else if entries.removeValue(forKey: change.key) != nil {
                    domainChanged[change.key] = .some(nil)
                }
            }
            guard !domainChanged.isEmpty else { continue }
            after.record(part.domain, domainChanged, at: revision + 1)
            changed = true
            after.domains[part.domain] = entries.isEmpty ? nil : entries
            after.domainRevisions[part.domain] = entries.isEmpty ? nil : revision + 1
        }
        guard changed else { return }
        after.revision = revision + 1
        self = after
    }

    var description: String {
        let parts = domains.keys.sorted().map { domain in
            let keys = domains[domain]!.keys.sorted().map { "\($0)@\(domains[domain]![$0]!.revision)" }
            return "\(domain)@\(domainRevisions[domain] ?? -1)[\(keys.joined(separator: " "))]"
        }
        return "revision \(revision): " + parts.joined(separator: "; ")
    }
}

/// One commit the workload asked for and what became of it.
struct Attempt {
    var domain: Domain
    var mutation: Mutation
    /// A group commit's parts (then `domain` and `mutation` are its first part's, unused).
    var group: [DomainChanges]?
    var outcome: Result<Commit, StorageError>
    /// Disk operations recorded when its completion ran: a crash at or after this point must
    /// keep it if it succeeded, and must not show it if it failed.
    var completedAt: Int

    var succeeded: Bool { (try? outcome.get()) != nil }

    /// What the store holds after `content` once this attempt succeeded: the oracle.
    func apply(to content: inout StoreContent) {
        if let group { content.applyGroup(group) } else { content.apply(domain, mutation) }
    }
}

extension StorageError {
    var isStorageFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

/// Runs commits one at a time against a store on a ``SimulatedFileSystem`` and records each
/// attempt with the operation index at which its completion ran.
final class CrashWorkload {
    let fileSystem: SimulatedFileSystem
    let directory: String
    let options: StoreOptions
    /// What the disk held before the workload.
    let base: StoreContent
    var store: Store?
    var attempts: [Attempt] = []
    /// Why opening the store failed (only with injected faults); each failure is retried.
    var failedOpens: [String] = []
    /// Each history change asked for (``changeHistory(_:)``), with the operation index at
    /// which it completed and whether it succeeded.
    var historyChanges: [(change: HistoryChange, completedAt: Int, succeeded: Bool)] = []

    init(
        fileSystem: SimulatedFileSystem, directory: String = "/data/state", options: StoreOptions,
        base: StoreContent = StoreContent()
    ) {
        self.fileSystem = fileSystem
        self.directory = directory
        self.options = options
        self.base = base
    }

    /// Opens the store, retrying (as a restarted daemon would) if recovery fails.
    func open() {
        for _ in 0..<3 {
            do {
                store = try Store(directory: directory, options: options, fileSystem: fileSystem)
                return
            } catch {
                failedOpens.append(error.description)
            }
        }
    }

    func commit(_ domain: Domain, _ mutation: Mutation) {
        guard let store else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Result<Commit, StorageError>, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submit(domain, mutation) { result in
            outcome.withLock { $0 = (result, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (result, index) = outcome.withLock { $0! }
        attempts.append(Attempt(domain: domain, mutation: mutation, outcome: result, completedAt: index))
    }

    /// Commits `parts` as one group (``Store/submitGroup(_:completion:)``).
    func commitGroup(_ parts: [DomainChanges]) {
        guard let store, let first = parts.first else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Result<[Commit], StorageError>, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submitGroup(parts) { result in
            outcome.withLock { $0 = (result, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (result, index) = outcome.withLock { $0! }
        let commit = result.map { $0.first ?? Commit(revision: store.revision, domain: first.domain, changes: []) }
        attempts.append(
            Attempt(
                domain: first.domain, mutation: .apply(first.changes, ifRevision: nil), group: parts, outcome: commit,
                completedAt: index))
    }

    /// Forgets history, or marks what keeps none (``Store/submitHistoryChange(_:completion:)``).
    func changeHistory(_ change: HistoryChange) {
        guard let store else { return }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<(Bool, Int)?>(nil)
        let fileSystem = self.fileSystem
        store.submitHistoryChange(change) { result in
            outcome.withLock { $0 = ((try? result.get()) != nil, fileSystem.operationCount) }
            done.signal()
        }
        done.wait()
        let (succeeded, index) = outcome.withLock { $0! }
        historyChanges.append((change, index, succeeded))
    }

    /// Stops as a crash of the process would (no compaction) and opens the folder again.
    func restart() {
        store?.abandon()
        store = nil
        open()
    }

    func close() {
        store?.close()
        store = nil
    }

    /// The contents a recovery from a crash after `operations` disk operations may show: every
    /// commit that completed successfully by then, plus (optionally) the one in flight.
    func allowedContents(after operations: Int) -> [StoreContent] {
        var content = base
        for attempt in attempts {
            guard attempt.completedAt <= operations else {
                // refused: never written
                if case .failure(let error) = attempt.outcome, !error.isStorageFailure { return [content] }
                var withInFlight = content
                attempt.apply(to: &withInFlight)
                return withInFlight == content ? [content] : [content, withInFlight]
            }
            if attempt.succeeded { attempt.apply(to: &content) }
        }
        return [content]
    }

    /// The value every key of an apply holds: `apply-N`, so that a half-visible apply shows.
    static func marker(_ number: Int) -> Value { .string("apply-\(number)") }

    /// A group setting keys `mN-0`, `mN-1`... of each of `domains` to the marker of apply N
    /// (applies and groups share the numbers: the marker check covers every domain).
    static func markedGroup(_ number: Int, keys: Int, in domains: [Domain]) -> [DomainChanges] {
        domains.map { domain in
            DomainChanges(
                domain: domain, changes: (0..<keys).map { Change(key: key("m\(number)-\($0)"), value: marker(number)) })
        }
    }

    /// An apply setting keys `mN-0`, `mN-1`... to the marker of apply N, then `extra`.
    static func markedApply(_ number: Int, keys: Int, also extra: [Change] = []) -> Mutation {
        let changes = (0..<keys).map { Change(key: key("m\(number)-\($0)"), value: marker(number)) }
        return .apply(changes + extra, ifRevision: nil)
    }
}

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
