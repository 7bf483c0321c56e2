import KVProtocol
import KVStorage
import KVSystem
import KVValues

/// The system instance's drop-in layer (``DropIns``) and how it combines with what admins set
/// through kvctl or etcd (the store): what the `Mirror` sends users' kvds is the admins'
/// value of a key if there is one, else the files'; a key is locked if an admin or a file
/// locks it. Neither layer ever writes the other: an admin's `delete` uncovers the file's
/// value, an admin's `unlock` leaves a file's lock in force, and a reload never touches what
/// admins set.
///
/// A reload is one step: the new combination is read and parsed whole, then committed as one
/// durable marker (``Domain/dropInState``, its generation); when that commit is delivered, in
/// commit order with every other, the difference from the old combination goes to each mirror
/// as one batch at the marker's revision, and a user's kvd applies a batch at once (each app
/// watching a domain sees one change set). The files are the truth: after any crash the system
/// instance reads them again at start, whole.
///
/// Loop thread only.
final class DropInLayer {
    /// Where the folders are; nil: no drop-ins (a user's kvd, or tests).
    private(set) var reader: DropInReader?
    /// What users are given now: every file, each peer taking those for it.
    private(set) var current = DropInSet.empty
    /// Each peer profile's combination of ``current`` (which files apply), made when first asked.
    private var combinations: [[Bool]: DropIns] = [:]
    /// Sets read but not yet delivered, by the generation of their marker commit.
    private var pending: [(generation: Int64, set: DropInSet)] = []
    /// The generation of the last combination read.
    private(set) var generation: Int64 = 0
    /// The last read (which may not be delivered yet): its files and problems.
    private(set) var lastRead = DropInSet.empty
    /// Looks up group and user names of `"for"` (through the system-call seam).
    private var system: (any SystemCalls)?

    /// dconf's profiles' system databases at their last good read, in order (they select and
    /// order dconf's files while a profile cannot be read); nil: none read good since start
    /// (then every dconf file read or kept applies to everyone).
    private var dconfProfiles: [String: [String]]?

    static let generationKey = Key(constant: "generation")
    private var log: Logger?
    /// Where the last good content of every file is kept durably (nil: in memory only).
    private var kept: KeptDropInsFile?
    /// What ``kept`` holds now, to write it only when it changes.
    private var keptContent: [String: DropInContent] = [:]
    /// Why ``kept`` could not be read at start (for status while kvd runs), or written at the
    /// last try (nil: it was).
    private var loadProblem: DropIns.Problem?
    private var saveProblem: DropIns.Problem?

    /// How many times ``current`` was replaced: with ``profile(of:)``, what names a combination
    /// (a `Mirror` snapshot made of it is shared while both are unchanged, ``MirrorSnapshots``).
    private(set) var replacements = 0

    /// Which of ``current``'s files apply to `peer` (and its dconf profile): peers with the same
    /// profile get the same combination.
    func profile(of peer: DropInPeer?) -> [Bool] {
        current.profile(of: peer)
    }

    /// The combination `peer` gets now (nil: the files for everyone only).
    func combination(for peer: DropInPeer?) -> DropIns {
        let profile = current.profile(of: peer)
        if let made = combinations[profile] { return made }
        let made = current.combination(profile: profile)
        combinations[profile] = made
        return made
    }

    private func replace(with set: DropInSet) {
        current = set
        combinations = [:]
        replacements += 1
    }

    /// Reads the folders and looks up the names of every `"for"`; then keeps the last good
    /// content of every file applied, durably when it changed.
    private func read(keeping previous: [String: DropInContent]) -> DropInSet {
        guard let reader else { return .empty }
        let found = reader.read(guessingDatabases: dconfProfiles == nil)
        if let profiles = found.profiles { dconfProfiles = profiles }
        let selection = reader.dconfDirectory.map { DconfSelection(root: $0, profiles: dconfProfiles ?? [:]) }
        var set = DropInSet.read(found.files, keeping: previous) {
            selection?.rank($0, profile: DconfSelection.defaultProfile) ?? 0
        }
        set.dconf = selection
        set.skipped = found.skipped
        if let system { set = set.resolved(group: system.groupID(named:), user: system.userID(named:)) }
        keep(set.parsed)
        return set
    }

    /// Loads what ``kept`` holds (a problem saying why when it cannot be used).
    private func loadKept() -> [String: DropInContent] {
        guard let kept else { return [:] }
        do {
            keptContent = (try kept.load() ?? [:]).mapValues(DropInContent.init)
        } catch {
            log?.error("drop-in files: \(error)")
            loadProblem = .init(
                file: kept.path, reason: "\(error) (read at start: files that were bad then gave nothing)")
        }
        return keptContent
    }

    /// dconf's folders to watch now (``DropInReader/dconfFolders()``; none before start).
    func dconfFolders() -> [String] { reader?.dconfFolders() ?? [] }

    /// Whether the last good content could not be written at the last try (a full disk): the
    /// server calls ``retrySave()`` every ``saveRetry`` until it could.
    var isUnsaved: Bool { saveProblem != nil }
    static let saveRetry = Duration.seconds(5)

    /// Tries again to write the last good content of the last read.
    func retrySave() {
        keep(lastRead.parsed)
        if saveProblem == nil, let kept {
            log?.info("drop-in files: their last good content is saved in \(kept.path) again")
        }
    }

    /// Saves `content` as the last good content when it differs from what ``kept`` holds
    /// (audiences compared by name: their ids are looked up at each read).
    private func keep(_ content: [String: DropInContent]) {
        let named = content.mapValues(\.named)
        guard let kept, named != keptContent else { return }
        do {
            try kept.save(named.mapValues(\.kept))
            keptContent = named
            saveProblem = nil
        } catch {
            log?.error("drop-in files: \(error)")
            saveProblem = .init(
                file: kept.path,
                reason:
                    "\(error) (the last good content is kept in memory, and written every \(Self.saveRetry) until it can be)"
            )
        }
    }

    /// Reads the folders for the first time, before anyone is served: the combination applies
    /// at once. Returns the marker mutation to commit before serving when the store's last
    /// marker is of another combination (so users' kvds that saved the old layer see a newer
    /// revision), else nil (also when there are no files and never were: nothing is written).
    func start(_ reader: DropInReader, store: Store, log: Logger, kept: KeptDropInsFile? = nil) -> Mutation? {
        self.reader = reader
        self.log = log
        self.system = reader.system
        self.kept = kept
        let set = read(keeping: loadKept())
        replace(with: set)
        lastRead = set
        report(set, because: "start")
        let stored = Self.storedMarker(in: store)
        generation = stored?.generation ?? 0
        // Nothing to record: the files are as at the last start, or there never were any.
        guard stored?.digest != Self.digest(set), stored != nil || !set.files.isEmpty else { return nil }
        generation += 1
        return marker(for: set)
    }

    /// Reads the folders again (`reason`: what asked, for the log): the marker mutation to
    /// commit when the combination changed (delivered by ``deliver(_:)``), or nil when users
    /// would see no difference.
    func reload(because reason: String) -> Mutation? {
        guard reader != nil else { return nil }
        let set = read(keeping: lastRead.parsed)
        lastRead = set
        report(set, because: reason)
        // With a marker in flight (or one whose commit failed), commit again: a delivery that
        // changes nothing sends nothing, and a failed one is never waited for.
        guard set.files != current.files || set.dconf != current.dconf || !pending.isEmpty else { return nil }
        generation += 1
        pending.append((generation, set))
        return marker(for: set)
    }

    /// Logs what a read found: each problem as an error, then a summary.
    private func report(_ set: DropInSet, because reason: String) {
        for problem in set.problems { log?.error("drop-in file \(problem.file): \(problem.reason)") }
        let values = set.files.reduce(0) { $0 + $1.content.values.values.reduce(0) { $0 + $1.count } }
        let locks = set.files.reduce(0) { $0 + $1.content.locks.values.reduce(0) { $0 + $1.count } }
        let profiles = set.files.filter { $0.content.audience != nil }.count
        log?.info(
            "drop-in files (\(reason)): \(set.files.count) read (\(profiles) for some users or groups only), \(set.problems.count) not; \(values) value(s), \(locks) lock(s)"
        )
    }

    private func marker(for set: DropInSet) -> Mutation {
        .set(
            Self.generationKey,
            .dictionary(["generation": .integer(generation), "digest": .string(Self.digest(set))]),
            ifRevision: nil)
    }

    private static func storedMarker(in store: Store) -> (generation: Int64, digest: String)? {
        guard case .value(.dictionary(let members), _) = store.get(.dropInState, generationKey),
            case .integer(let generation)? = members["generation"], case .string(let digest)? = members["digest"]
        else { return nil }
        return (generation, digest)
    }

    /// A marker commit was delivered: the set it marks replaces the current one. Returns what
    /// each mirror is sent: for a peer, the Mirror replies of the difference between its old and
    /// its new combination (one batch), empty when there is none, with a key that is the same
    /// for peers given the same replies; nil when the commit marks no pending set.
    func deliver(_ commit: Commit, store: Store) -> ((DropInPeer?) -> (profile: [Bool], replies: [VarlinkReply]))? {
        guard case .dictionary(let members)? = commit.changes.first?.value,
            case .integer(let delivered)? = members["generation"],
            let index = pending.firstIndex(where: { $0.generation == delivered })
        else { return nil }
        let next = pending[index].set
        pending.removeFirst(index + 1)
        let old = current
        replace(with: next)
        var made: [[Bool]: [VarlinkReply]] = [:]
        return { peer in
            // Peers that take the same files before and after get the same replies.
            let key = old.profile(of: peer) + [false] + next.profile(of: peer)
            if let replies = made[key] { return (key, replies) }
            let replies = Self.batch(
                Self.difference(from: old.combination(for: peer), to: next.combination(for: peer), store: store),
                revision: commit.revision)
            made[key] = replies
            return (key, replies)
        }
    }

    /// What mirrors are sent for an admin's `commit`: its changes, with a removal uncovering
    /// the file's value and an unlock of a key a file locks left out.
    func mirrored(_ commit: Commit, for peer: DropInPeer?) -> [Change] {
        let current = combination(for: peer)
        if let target = commit.domain.lockedDomain {
            guard let locks = current.locks[target] else { return commit.changes }
            return commit.changes.filter { $0.value != nil || !locks.contains($0.key) }
        }
        guard let values = current.values[commit.domain] else { return commit.changes }
        return commit.changes.map { change in
            guard change.value == nil, let file = values[change.key] else { return change }
            return Change(key: change.key, value: file)
        }
    }

    /// The values a mirror's snapshot sends for `domain`: the files', then the admins' over them.
    static func snapshotValues(_ domain: Domain, admin: [Key: Value], files: DropIns) -> [Key: Value] {
        guard let values = files.values[domain] else { return admin }
        return values.merging(admin) { $1 }
    }

    /// Per domain, the changes users see when the files' combination goes from `old` to `new`
    /// with the admins' layer `store` above it.
    static func difference(from old: DropIns, to new: DropIns, store: Store) -> [Domain: (
        values: [Change], locks: [(key: Key, locked: Bool)]
    )] {
        var result: [Domain: (values: [Change], locks: [(key: Key, locked: Bool)])] = [:]
        for domain in old.domains.union(new.domains) {
            let before = old.values[domain] ?? [:]
            let after = new.values[domain] ?? [:]
            var values: [Change] = []
            for key in Set(before.keys).union(after.keys).sorted() where before[key] != after[key] {
                if case .value = store.get(domain, key) { continue }  // an admin's value stays above
                values.append(Change(key: key, value: after[key]))
            }
            let lockedBefore = old.locks[domain] ?? []
            let lockedAfter = new.locks[domain] ?? []
            var locks: [(key: Key, locked: Bool)] = []
            for key in lockedBefore.symmetricDifference(lockedAfter).sorted() {
                if case .value = store.get(Domain.locks(of: domain), key) { continue }  // an admin locks it too
                locks.append((key, lockedAfter.contains(key)))
            }
            if !values.isEmpty || !locks.isEmpty { result[domain] = (values, locks) }
        }
        return result
    }

    /// The Mirror replies of `difference`, one per domain in name order, at `revision`: all but
    /// the last with `batch: true` (a user's kvd applies them together).
    static func batch(
        _ difference: [Domain: (values: [Change], locks: [(key: Key, locked: Bool)])], revision: Int64
    ) -> [VarlinkReply] {
        let domains = difference.keys.sorted()
        return domains.enumerated().map { index, domain in
            let part = difference[domain]!
            return MirrorReply(
                revision: revision, synced: true, domain: domain, changes: part.values, locks: part.locks,
                batch: index < domains.count - 1
            ).reply
        }
    }

    /// A stable digest of what users are given (FNV-1a, 64 bits, over the values' and locks'
    /// sorted typed JSON), to tell at start whether the files changed while kvd was away.
    static func digest(_ set: DropInSet) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func add(_ text: String) {
            for byte in text.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x100_0000_01b3
            }
            hash ^= 0xff
            hash = hash &* 0x100_0000_01b3
        }
        for (name, databases) in (set.dconf?.profiles ?? [:]).sorted(by: { $0.key < $1.key }) {
            add("p" + name + ":" + databases.joined(separator: ","))
        }
        for file in set.files {
            add("f" + file.path)
            if let audience = file.content.audience {
                add("g" + audience.groups.joined(separator: ","))
                add("u" + audience.users.joined(separator: ","))
            }
            digest(file.content, into: add)
        }
        return String(hash, radix: 16)
    }

    private static func digest(_ content: DropInContent, into add: (String) -> Void) {
        let dropIns = content
        for domain in dropIns.values.keys.sorted() {
            add("v" + domain.name)
            for (key, value) in dropIns.values[domain]!.sorted(by: { $0.key < $1.key }) {
                add(key.name)
                add(JSONWriter(sortKeys: true).string(value.typedJSON))
            }
        }
        for domain in dropIns.locks.keys.sorted() {
            add("l" + domain.name)
            for key in dropIns.locks[domain]!.sorted() { add(key.name) }
        }
    }

    /// Where `key` of `domain` comes from on this instance (`io.kvd.System.Source`), for `peer`
    /// (the files for everyone, and those for some users or groups that `peer` is among), with
    /// the files' value and the admin group (`--admin-group`). `lockFile` names the file that
    /// locks the key also when an admin locks it too (`lock` is then `admin`).
    func source(_ domain: Domain, _ key: Key, store: Store, for peer: DropInPeer? = nil) -> [String: JSON] {
        let current = combination(for: peer)
        var parameters: [String: JSON] = [:]
        let admin: Bool
        if case .value = store.get(domain, key) { admin = true } else { admin = false }
        let file = current.valueFiles[domain]?[key]
        if admin {
            parameters["value"] = .string("admin")
        } else if file != nil {
            parameters["value"] = .string("file")
        }
        if let file {
            parameters["file"] = .string(file)
            parameters["fileValue"] = current.values[domain]?[key]?.typedJSON
        }
        if let reader { parameters["adminGroup"] = .string(reader.adminGroup) }
        let lockFile = current.lockFile(domain, key)
        if case .value = store.get(Domain.locks(of: domain), key) {
            parameters["lock"] = .string("admin")
        } else if lockFile != nil {
            parameters["lock"] = .string("file")
        }
        if let lockFile { parameters["lockFile"] = .string(lockFile) }
        return parameters
    }

    /// The `dropIns` member of `Status`.
    var status: DropInStatus? {
        guard let reader else { return nil }
        return DropInStatus(
            directory: reader.directory, files: lastRead.files.map(\.path),
            problems: (lastRead.problems + [loadProblem, saveProblem].compactMap { $0 }).map {
                .init(file: $0.file, reason: $0.reason)
            },
            generation: generation, skipped: lastRead.skipped)
    }
}
