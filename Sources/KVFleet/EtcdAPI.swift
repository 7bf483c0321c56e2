/// What kvd needs of etcd v3, as blocking calls for background threads: a paged range read
/// pinned to one revision, a conditional transaction, and a watch stream with progress
/// notifications. ``EtcdGateway`` speaks it over etcd's JSON gateway; tests may fake it.
///
/// Keys and values are bytes (etcd's), revisions etcd's `int64`. Conformers are thread-safe.
public protocol EtcdAPI: Sendable {
    /// One page of the keys in `[key, end)` (`end` empty: only `key`), at most `limit` of them
    /// (0: no limit), as of `revision` (nil: the newest). Throws ``EtcdError/compacted(_:)``
    /// when `revision` is older than etcd's compaction.
    func range(from key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) throws(EtcdError) -> EtcdRangePage

    /// Runs `transaction` atomically; returns whether its comparisons held (the success
    /// operations ran) and the revision after it.
    func commit(_ transaction: EtcdTransaction) throws(EtcdError) -> (succeeded: Bool, revision: Int64)

    /// Watches `[key, end)` from `startRevision` with progress notifications every
    /// `progressInterval` (etcd's own interval; kvd asks for them with `progress_notify`), and
    /// hands each message to `receive` until it returns false or the stream breaks. A stream
    /// with no message for twice `progressInterval` counts as broken. Throws why it ended when
    /// it did not end by `receive`'s choice (``EtcdError/compacted(_:)`` when `startRevision`
    /// was compacted away).
    func watch(
        from key: [UInt8], end: [UInt8], startRevision: Int64, progressInterval: Duration,
        receive: (EtcdWatchMessage) -> Bool
    ) throws(EtcdError)
}

/// One key as etcd holds it.
public struct EtcdKeyValue: Sendable, Equatable {
    public var key: [UInt8]
    public var value: [UInt8]
    /// The revision of the key's last change.
    public var modRevision: Int64

    public init(key: [UInt8], value: [UInt8], modRevision: Int64) {
        self.key = key
        self.value = value
        self.modRevision = modRevision
    }
}

/// A page of a range read.
public struct EtcdRangePage: Sendable, Equatable {
    public var keyValues: [EtcdKeyValue]
    /// More keys follow in the range (read on from the last key + a zero byte).
    public var more: Bool
    /// The revision the page was read at: the one asked for, else the header's (etcd's header
    /// always holds its newest revision, even for a read at an older one).
    public var revision: Int64

    public init(keyValues: [EtcdKeyValue], more: Bool, revision: Int64) {
        self.keyValues = keyValues
        self.more = more
        self.revision = revision
    }
}

/// A change seen by a watch: a put (the key's new value) or a delete (no value; its
/// `modRevision` is the revision of the deletion).
public struct EtcdEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable { case put, delete }
    public var kind: Kind
    public var keyValue: EtcdKeyValue

    public init(kind: Kind, keyValue: EtcdKeyValue) {
        self.kind = kind
        self.keyValue = keyValue
    }
}

/// One message of a watch stream.
public enum EtcdWatchMessage: Sendable, Equatable {
    /// Events, in revision order (one etcd revision may have several).
    case events([EtcdEvent], headerRevision: Int64)
    /// No event up to this revision (a progress notification).
    case progress(revision: Int64)

    /// etcd's revision when it sent the message (its header's).
    public var revision: Int64 {
        switch self {
        case .events(_, let revision), .progress(let revision): revision
        }
    }
}

/// A transaction: if every comparison holds, the success operations, else the failure ones.
public struct EtcdTransaction: Sendable, Equatable {
    public enum Comparison: Sendable, Equatable {
        /// The key's last change was at this revision (0: the key does not exist).
        case modRevision(key: [UInt8], equals: Int64)
        /// The key last changed before this revision (a key that does not exist holds 0).
        case modRevisionBelow(key: [UInt8], revision: Int64)
    }

    public enum Operation: Sendable, Equatable {
        case put(key: [UInt8], value: [UInt8])
        case delete(key: [UInt8])
        /// Deletes every key in `[key, end)`.
        case deleteRange(key: [UInt8], end: [UInt8])
    }

    public var comparisons: [Comparison]
    public var success: [Operation]
    public var failure: [Operation]

    public init(comparisons: [Comparison] = [], success: [Operation], failure: [Operation] = []) {
        self.comparisons = comparisons
        self.success = success
        self.failure = failure
    }
}

/// Why a call to etcd failed. One error type for the module.
public enum EtcdError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No endpoint answered (each one's reason, joined).
    case unreachable(String)
    /// The revision asked for is older than etcd's compaction (etcd's compact revision).
    case compacted(Int64)
    /// etcd refused the request as too large (its message).
    case tooLarge(String)
    /// Authentication failed (bad name or password, or no permission).
    case authentication(String)
    /// etcd's cluster ID is not the one this client talked to before (`was`, `now`, in hex): a
    /// new cluster on the same URLs, whose history is another. Thrown once by a read or a
    /// watch; the next call goes on with the new cluster.
    case clusterChanged(was: UInt64, now: UInt64)
    /// etcd answered something kvd cannot read, or an error it does not expect (its message).
    case protocolError(String)
    /// A transaction was sent but no answer came (the member hung or died, or lost its leader
    /// meanwhile): etcd may or may not have committed it. Read the keys to find out.
    case outcomeUnknown(String)
    /// The endpoints or the credentials given are unusable (what to fix).
    case badConfiguration(String)

    public var description: String {
        switch self {
        case .unreachable(let reason): "etcd cannot be reached: \(reason)"
        case .compacted(let revision): "etcd has compacted its history up to revision \(revision)"
        case .tooLarge(let message): "etcd refused the request as too large: \(message)"
        case .authentication(let message): "etcd refused the credentials: \(message)"
        case .clusterChanged(let was, let now):
            "etcd's cluster ID changed from \(String(was, radix: 16)) to \(String(now, radix: 16)): another cluster answers at these URLs"
        case .protocolError(let message): "etcd answered unexpectedly: \(message)"
        case .outcomeUnknown(let reason): "etcd may or may not have committed the transaction: \(reason)"
        case .badConfiguration(let message): message
        }
    }
}

/// The smallest key after every key that starts with `prefix`: the `end` of a prefix range.
public func etcdPrefixEnd(_ prefix: [UInt8]) -> [UInt8] {
    var end = prefix
    while let last = end.last {
        if last < 0xFF {
            end[end.count - 1] = last + 1
            return end
        }
        end.removeLast()
    }
    return [0]  // every key: etcd reads "\0" as "to the end"
}
