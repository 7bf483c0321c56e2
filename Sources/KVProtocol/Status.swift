import KVValues

/// What a system instance tells of itself (`io.kvd.System.Status`, `kvctl --system status`):
/// the daemon encodes it with ``json``, clients decode it with ``init(json:)``.
public struct SystemStatus: Sendable, Equatable {
    /// The instance's store revision.
    public var revision: Int64
    /// How many domains it holds (internal ones left out).
    public var domains: Int
    /// Its fleet mirror; nil when it was started without `--etcd`.
    public var fleet: FleetStatus?
    /// Its drop-in files (`--config-dir`); nil from an instance that reads none (an older one).
    public var dropIns: DropInStatus?

    public init(revision: Int64, domains: Int, fleet: FleetStatus?, dropIns: DropInStatus? = nil) {
        self.revision = revision
        self.domains = domains
        self.fleet = fleet
        self.dropIns = dropIns
    }

    /// The `Status` reply's parameters.
    public var json: [String: JSON] {
        var members: [String: JSON] = ["revision": .integer(revision), "domains": .integer(Int64(domains))]
        if let fleet { members["fleet"] = fleet.json }
        if let dropIns { members["dropIns"] = dropIns.json }
        return members
    }

    /// Reads a `Status` reply's parameters; nil when a member is missing or of the wrong type.
    public init?(json members: [String: JSON]) {
        guard case .integer(let revision)? = members["revision"], case .integer(let domains)? = members["domains"]
        else { return nil }
        var fleet: FleetStatus? = nil
        if let member = members["fleet"], member != .null {
            guard let decoded = FleetStatus(json: member) else { return nil }
            fleet = decoded
        }
        var dropIns: DropInStatus? = nil
        if let member = members["dropIns"], member != .null {
            guard let decoded = DropInStatus(json: member) else { return nil }
            dropIns = decoded
        }
        self.init(revision: revision, domains: Int(domains), fleet: fleet, dropIns: dropIns)
    }
}

/// The drop-in files of a system instance (type `DropInStatus` of ``SystemInterface``): the
/// folder holding `defaults.d` and `locks.d`, the files applied at the last read (in the order
/// they combine), the files that could not be read (each with why), and the generation of the
/// combination (it grows with each reload that changed what users get).
public struct DropInStatus: Sendable, Equatable {
    public struct Problem: Sendable, Equatable {
        public var file: String
        public var reason: String
        public init(file: String, reason: String) {
            self.file = file
            self.reason = reason
        }
    }

    public var directory: String
    public var files: [String]
    public var problems: [Problem]
    public var generation: Int64
    /// The names in the folders that are not read (not the hidden ones nor editors' or package
    /// managers' leftovers), as paths; empty from an older instance.
    public var skipped: [String]

    public init(directory: String, files: [String], problems: [Problem], generation: Int64, skipped: [String] = []) {
        self.directory = directory
        self.files = files
        self.problems = problems
        self.generation = generation
        self.skipped = skipped
    }

    public var json: JSON {
        .object([
            "directory": .string(directory), "files": .array(files.map(JSON.string)),
            "problems": .array(
                problems.map { .object(["file": .string($0.file), "reason": .string($0.reason)]) }),
            "generation": .integer(generation), "skipped": .array(skipped.map(JSON.string)),
        ])
    }

    /// Reads the `dropIns` member; nil when a member is missing or of the wrong type.
    public init?(json: JSON) {
        guard case .string(let directory)? = json["directory"], case .array(let fileItems)? = json["files"],
            case .array(let problemItems)? = json["problems"], case .integer(let generation)? = json["generation"]
        else { return nil }
        var files: [String] = []
        for case .string(let file) in fileItems { files.append(file) }
        var problems: [Problem] = []
        for item in problemItems {
            guard case .string(let file)? = item["file"], case .string(let reason)? = item["reason"] else {
                return nil
            }
            problems.append(Problem(file: file, reason: reason))
        }
        guard files.count == fileItems.count else { return nil }
        var skipped: [String] = []
        if case .array(let items)? = json["skipped"] { for case .string(let name) in items { skipped.append(name) } }
        self.init(directory: directory, files: files, problems: problems, generation: generation, skipped: skipped)
    }
}

/// The fleet mirror of a system instance started with `--etcd`.
public struct FleetStatus: Sendable, Equatable {
    /// The etcd members given with `--etcd`.
    public var endpoints: [String]
    /// The member the next etcd call goes to.
    public var memberInUse: String?
    /// `starting`, `listing`, `watching`, `waiting to retry` or `stopped`.
    public var phase: String
    /// The etcd revision the mirror holds.
    public var appliedRevision: Int64
    /// The newest etcd revision etcd told of.
    public var seenRevision: Int64
    /// `seenRevision - appliedRevision`: how far behind the mirror may be (revisions that
    /// changed only other hosts' domains count too, until the next change of this host's).
    public var lag: Int64
    /// Listings made again because etcd compacted the revisions the mirror needed.
    public var relists: Int
    /// The last failure talking to etcd, as one line.
    public var lastError: String?
    /// Etcd keys left out of the mirror because they cannot be read, each with its reason: at
    /// most the first 100 in etcd key order, each key cut to 200 characters (the reply stays
    /// small however many there are); ``problemCount`` counts them all.
    public var problems: [String]
    /// How many etcd keys are left out in all (a reply without the member: `problems.count`).
    public var problemCount: Int
    /// The etcd prefix (`--etcd-prefix`).
    public var prefix: String
    /// The fleet domain patterns (`--fleet-domain`).
    public var domains: [String]

    public init(
        endpoints: [String], memberInUse: String?, phase: String, appliedRevision: Int64, seenRevision: Int64,
        relists: Int,
        lastError: String?, problems: [String], problemCount: Int? = nil, prefix: String, domains: [String]
    ) {
        self.endpoints = endpoints
        self.memberInUse = memberInUse
        self.phase = phase
        self.appliedRevision = appliedRevision
        self.seenRevision = seenRevision
        self.lag = max(0, seenRevision - appliedRevision)
        self.relists = relists
        self.lastError = lastError
        self.problems = problems
        self.problemCount = max(problemCount ?? problems.count, problems.count)
        self.prefix = prefix
        self.domains = domains
    }

    /// The `fleet` member of a `Status` reply (type `FleetStatus` of ``SystemInterface``).
    public var json: JSON {
        var members: [String: JSON] = [
            "endpoints": .array(endpoints.map(JSON.string)), "phase": .string(phase),
            "appliedRevision": .integer(appliedRevision), "seenRevision": .integer(seenRevision), "lag": .integer(lag),
            "relists": .integer(Int64(relists)), "problems": .array(problems.map(JSON.string)),
            "problemCount": .integer(Int64(problemCount)), "prefix": .string(prefix),
            "domains": .array(domains.map(JSON.string)),
        ]
        if let memberInUse { members["memberInUse"] = .string(memberInUse) }
        if let lastError { members["lastError"] = .string(lastError) }
        return .object(members)
    }

    /// Reads the `fleet` member; nil when a member is missing or of the wrong type.
    public init?(json: JSON) {
        func strings(_ name: String) -> [String]? {
            guard case .array(let items)? = json[name] else { return nil }
            var texts: [String] = []
            for case .string(let text) in items { texts.append(text) }
            return texts.count == items.count ? texts : nil
        }
        func optional(_ name: String) -> String?? {
            switch json[name] {
            case nil, .null?: .some(nil)
            case .string(let text)?: .some(text)
            default: nil
            }
        }
        guard let endpoints = strings("endpoints"), let problems = strings("problems"),
            let domains = strings("domains"),
            case .string(let phase)? = json["phase"], case .string(let prefix)? = json["prefix"],
            case .integer(let applied)? = json["appliedRevision"], case .integer(let seen)? = json["seenRevision"],
            case .integer(let relists)? = json["relists"], let member = optional("memberInUse"),
            let lastError = optional("lastError")
        else { return nil }
        var count: Int? = nil
        switch json["problemCount"] {
        case nil, .null?: break
        case .integer(let number)?: count = Int(clamping: number)
        default: return nil
        }
        self.init(
            endpoints: endpoints, memberInUse: member, phase: phase, appliedRevision: applied, seenRevision: seen,
            relists: Int(relists),
            lastError: lastError, problems: problems, problemCount: count, prefix: prefix, domains: domains)
    }
}
