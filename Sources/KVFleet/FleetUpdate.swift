import KVValues

/// What the reflector hands the daemon to commit, each atomically, with its etcd revision
/// stored in the same commit (so a crash never applies an event twice or skips one).
public enum FleetUpdate: Sendable, Equatable {
    /// The whole fleet as of `revision`: every fleet domain of this host takes exactly these
    /// values and locks; a fleet value or lock missing here is removed (a fleet domain absent
    /// from the snapshot is emptied).
    case replace(FleetSnapshot, revision: Int64)
    /// The changes of one etcd revision, at most one per value or lock. Removing or unlocking
    /// a key the mirror does not hold changes nothing (the key may have been unreadable).
    case apply([FleetChange], revision: Int64)

    /// The etcd revision the mirror holds once this update is committed.
    public var revision: Int64 {
        switch self {
        case .replace(_, let revision), .apply(_, let revision): revision
        }
    }
}

/// One change to the mirror.
public enum FleetChange: Sendable, Equatable {
    case set(Domain, Key, Value)
    case remove(Domain, Key)
    case lock(Domain, Key)
    case unlock(Domain, Key)

    /// The value or lock this change is about.
    public var name: FleetName {
        switch self {
        case .set(let domain, let key, _), .remove(let domain, let key):
            FleetName(kind: .value, domain: domain, key: key)
        case .lock(let domain, let key), .unlock(let domain, let key): FleetName(kind: .lock, domain: domain, key: key)
        }
    }
}

/// Every fleet value and lock of this host at one etcd revision.
public struct FleetSnapshot: Sendable, Equatable {
    public var values: [Domain: [Key: Value]]
    public var locks: [Domain: Set<Key>]

    public init(values: [Domain: [Key: Value]] = [:], locks: [Domain: Set<Key>] = [:]) {
        self.values = values
        self.locks = locks
    }
}

/// An etcd key this host would mirror but cannot read; it is left out of the mirror (a value
/// that was there is removed) until a later revision fixes or deletes it.
public struct FleetProblem: Sendable, Equatable, CustomStringConvertible {
    /// The etcd key as text (invalid UTF-8 shown as U+FFFD).
    public var etcdKey: String
    /// The revision of the key's last change.
    public var revision: Int64
    public var reason: String

    public init(etcdKey: String, revision: Int64, reason: String) {
        self.etcdKey = etcdKey
        self.revision = revision
        self.reason = reason
    }

    public var description: String { "etcd key \"\(etcdKey)\" (revision \(revision)) is left out: \(reason)" }

    /// ``description`` with the key cut to `keyCharacters` and the reason to
    /// `reasonCharacters` (each cut one ends with "…" and says how long it was), for the
    /// status reply and the journal: an etcd key may be over a megabyte.
    public func shortened(keyCharacters: Int = 200, reasonCharacters: Int = 300) -> String {
        func cut(_ text: String, _ limit: Int) -> String {
            let scalars = text.unicodeScalars
            guard scalars.count > limit else { return text }
            return String(String.UnicodeScalarView(scalars.prefix(limit))) + "… (\(text.utf8.count) bytes)"
        }
        return
            "etcd key \"\(cut(etcdKey, keyCharacters))\" (revision \(revision)) is left out: \(cut(reason, reasonCharacters))"
    }
}

/// What the reflector is doing and how far it got; read it from any thread
/// (``FleetReflector/status``).
public struct FleetReflectorStatus: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        case starting, listing, watching, waitingToRetry, stopped
    }

    public var phase: Phase = .starting
    /// The etcd revision the mirror holds: the revision of the last update the sink committed
    /// (or the one the run started from).
    public var appliedRevision: Int64 = 0
    /// The newest etcd revision etcd has told of (headers, events, progress notifications);
    /// `seenRevision - appliedRevision` is how far the mirror may lag.
    public var seenRevision: Int64 = 0
    /// How many listings were started because etcd had compacted the revision the reflector
    /// needed (during a watch, or during a listing).
    public var relists: Int = 0
    /// The listings committed since the run began.
    public var listings: Int = 0
    /// The last failure (etcd, or the sink), as one line; nil until the first.
    public var lastError: String? = nil
    /// The first ``FleetReflector/statusProblemLimit`` entries left out of the mirror, in etcd
    /// key order.
    public var problems: [FleetProblem] = []
    /// How many entries are left out of the mirror in all.
    public var problemCount: Int = 0
}

/// A turn in the reflector's run, as the journal tells it.
public enum FleetReflectorEvent: Sendable, Equatable {
    /// A listing was committed: the mirror holds etcd's `revision`.
    case listed(revision: Int64)
    /// A watch starts at `from` (the applied revision + 1).
    case watching(from: Int64)
    /// etcd compacted the revisions the reflector needed (to go on watching, or to finish a
    /// listing): it lists again.
    case relisting
    /// etcd's history is not the one the mirror holds (its revision went back, or the fleet
    /// writer asked): it lists again now (why).
    case historyReplaced(String)
    /// Listing or watching failed; the next try comes after `retryingIn`.
    case failed(String, retryingIn: Duration)
    /// A committed listing or revision left these entries out (new or changed ones; a
    /// listing: all of them), in no particular order.
    case leftOut([FleetProblem])
}
