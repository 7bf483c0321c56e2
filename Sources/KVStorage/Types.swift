import Glibc
import KVValues

/// What a caller asks the store to do to one domain. Each mutation that changes anything becomes
/// one new store-wide revision and one log record.
public enum Mutation: Sendable {
    /// Sets one key. With `ifRevision: r` it commits only if the key last changed at `r`
    /// (`0`: the key must not exist); otherwise ``StorageError/revisionMismatch(current:)``.
    case set(Key, Value, ifRevision: Int64?)
    /// Removes one key; ``StorageError/notFound(_:_:)`` if it does not exist.
    case delete(Key)
    /// Applies all changes atomically, in order. With `ifRevision: r` it commits only if the
    /// domain last changed at `r` (`0`: the domain must not exist). Removing a missing key is a
    /// no-op; if nothing changes at all, no revision is used and the commit lists no changes.
    case apply([Change], ifRevision: Int64?)
    /// Removes the whole domain; ``StorageError/notFound(_:_:)`` if it does not exist.
    case deleteDomain
}

/// One domain's part of a group commit (``Store/submitGroup(_:completion:)``): absolute changes.
public struct DomainChanges: Sendable, Equatable {
    public var domain: Domain
    public var changes: [Change]

    public init(domain: Domain, changes: [Change]) {
        self.domain = domain
        self.changes = changes
    }
}

/// A committed, durable mutation: its revision and the changes actually applied (for
/// `deleteDomain`, one removal per key that existed, sorted by key).
public struct Commit: Sendable, Equatable {
    public var revision: Int64
    public var domain: Domain
    public var changes: [Change]
    /// Who asked for it (nil: unknown, or kvd's own commit).
    public var writer: Writer?

    public init(revision: Int64, domain: Domain, changes: [Change], writer: Writer? = nil) {
        self.revision = revision
        self.domain = domain
        self.changes = changes
        self.writer = writer
    }
}

/// The answer to ``Store/get(_:_:)``.
public enum KeyLookup: Sendable, Equatable {
    /// The value and the revision at which the key last changed.
    case value(Value, revision: Int64)
    case missing
    /// The key exists on disk but its stored JSON is not a valid typed value; it is kept verbatim.
    case unreadable(reason: String)
}

/// The answer to ``Store/withValueJSON(_:_:_:)``: ``KeyLookup`` with the value as the
/// compact typed JSON the store keeps it in, valid only during the call.
public enum ValueJSON {
    /// The value's typed JSON and the revision at which the key last changed.
    case value(UnsafeBufferPointer<UInt8>, revision: Int64)
    case missing
    /// The key exists on disk but its stored JSON is not a valid typed value; it is kept verbatim.
    case unreadable(reason: String)
}

/// A ``KeyLookup`` whose value is still its stored typed JSON (copied out of the store's lock,
/// decoded outside it).
enum RawLookup: Sendable {
    case value([UInt8], revision: Int64)
    case missing
    case unreadable(reason: String)
}

/// A consistent copy of one domain, as of one committed revision.
public struct DomainSnapshot: Sendable, Equatable {
    /// The readable values.
    public var values: [Key: Value]
    /// The revision at which each key (readable or not) last changed.
    public var revisions: [Key: Int64]
    /// Keys whose stored JSON could not be read, with the reason; kept verbatim on disk.
    public var unreadable: [Key: String]
    /// The revision at which the domain last changed.
    public var revision: Int64
    /// What the domain's entries take of ``Limits/domainBytes`` (see ``DomainBudget``): above
    /// it, a `List` or `Watch` reply of the whole domain would not fit in one message (only a
    /// domain file made by hand can be that large; writes that would make it so are refused).
    public var budgetBytes: Int

    public init(
        values: [Key: Value], revisions: [Key: Int64], unreadable: [Key: String], revision: Int64, budgetBytes: Int = 0
    ) {
        self.values = values
        self.revisions = revisions
        self.unreadable = unreadable
        self.revision = revision
        self.budgetBytes = budgetBytes
    }
}

/// Why the store refused or failed a request. One error type for the module.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The domain, or the key in it, does not exist.
    case notFound(Domain, Key?)
    /// A conditional change found another revision: `current` is the key's (or domain's) one.
    case revisionMismatch(current: Int64)
    /// I/O failed; nothing changed, in memory or (after recovery) on disk.
    case failure(String)
    /// The change is refused because a reader could not take it back: its typed JSON, or the
    /// domain after it, would exceed `limit` bytes (one reply). Nothing changed.
    case tooLarge(limit: Int, reason: String)
    /// A value breaks a rule of the contract (`reason` names it). Nothing changed.
    case invalidValue(String)
    /// Another kvd holds the state folder; the message names the folder and the lock file.
    case locked(String)
    /// The state folder cannot be used (not a folder, not accessible, written by a newer kvd).
    case invalidStateDirectory(String)
    /// The change was handed to a store kvd does not own (etcd, for the fleet) and no answer
    /// came back: it may or may not have been made (`reason` says what to do).
    case outcomeUnknown(String)

    public var description: String {
        switch self {
        case .notFound(let domain, nil): "domain \(domain) does not exist"
        case .notFound(let domain, let key?): "key \"\(key)\" does not exist in domain \(domain)"
        case .revisionMismatch(let current): "revision mismatch: the current revision is \(current)"
        case .failure(let reason): "storage failure: \(reason)"
        case .tooLarge(let limit, let reason): "too large (limit \(limit) bytes): \(reason)"
        case .invalidValue(let reason): "invalid value: \(reason)"
        case .locked(let message): message
        case .invalidStateDirectory(let message): message
        case .outcomeUnknown(let reason): "outcome unknown: \(reason)"
        }
    }
}

/// Severity of a message given to the store's `log` callback.
public enum LogLevel: Sendable, Comparable {
    case debug, info, notice, warning, error
}

/// Tunables of a ``Store``.
public struct StoreOptions: Sendable {
    /// The log is compacted into the domain files once it grows past this many bytes.
    public var compactionLogBytes: Int

    /// Space reserved ahead at the end of the log and written with zeros, so that a commit's
    /// sync overwrites blocks already written instead of growing the file or converting
    /// allocated blocks (cheaper: the sync writes data only, no metadata).
    public var logReservationBytes: Int

    /// History keeps at least each key's last this many values (``HistoryRetention``).
    public var historyKeep: Int
    /// History keeps every value of the last this many days.
    public var historyDays: Int
    /// The time of a commit, in milliseconds since the Unix epoch: the wall clock (tests set
    /// another). Called on the commit queue, once per batch.
    public var clock: @Sendable () -> Int64

    /// Runs a fold of the log into the files (for tests, which step it by hand); nil: the
    /// store's fold queue.
    var foldRunner: (@Sendable (@escaping @Sendable () -> Void) -> Void)?

    /// Whether history is kept: not when both ``historyKeep`` and ``historyDays`` are 0.
    public var keepsHistory: Bool { historyKeep > 0 || historyDays > 0 }

    public init(
        compactionLogBytes: Int = 4 << 20, logReservationBytes: Int = 256 << 10, historyKeep: Int = 20,
        historyDays: Int = 30,
        clock: @escaping @Sendable () -> Int64 = StoreOptions.wallClock
    ) {
        self.compactionLogBytes = compactionLogBytes
        self.logReservationBytes = logReservationBytes
        self.historyKeep = max(historyKeep, 0)
        self.historyDays = max(historyDays, 0)
        self.clock = clock
    }

    /// Milliseconds since the Unix epoch, from `CLOCK_REALTIME`.
    public static let wallClock: @Sendable () -> Int64 = {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
