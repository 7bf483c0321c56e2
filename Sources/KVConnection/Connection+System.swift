import KVProtocol
import KVValues

/// One key the system administrator locked.
public struct LockedKey: Sendable, Hashable {
    /// The domain the key is locked in.
    public var domain: Domain
    /// The locked key (holding `*`: a glob).
    public var key: Key
    /// The drop-in lock file that locks it, or nil for an admin's lock (`kvctl --system lock`).
    public var file: String?

    /// An admin's lock of `key` in `domain`.
    public init(domain: Domain, key: Key) {
        self.domain = domain
        self.key = key
    }

    /// The lock of `key` in `domain` by the drop-in lock file `file` (nil: an admin's).
    public init(domain: Domain, key: Key, file: String?) {
        self.domain = domain
        self.key = key
        self.file = file
    }
}

/// The methods of `io.kvd.System`, served only by the system instance (`kvd --system`). Lock and
/// Unlock need root or a member of the group `kvd-admin` (else
/// ``ClientError/permissionDenied``); anyone may list the locks.
extension Connection {
    /// Locks `key` in `domain` for every user of the machine. Returns the revision of the
    /// commit, durable when this returns.
    @discardableResult
    public func lock(_ domain: Domain, _ key: Key) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.lock(domain, key)))
    }

    /// Lifts the lock of `key` in `domain`; ``ClientError/notFound(domain:key:)`` if it is not
    /// locked. Returns the revision of the commit.
    @discardableResult
    public func unlock(_ domain: Domain, _ key: Key) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.unlock(domain, key)))
    }

    /// The locks of `domain`, or of every domain, sorted by domain and key: the admins' and the
    /// drop-in lock files' that apply to the caller (``LockedKey/file``).
    public func locks(_ domain: Domain? = nil) throws(ClientError) -> [LockedKey] {
        let reply = try call(.locks(domain))
        guard case .array(let items)? = reply.parameters["locks"] else {
            throw .protocolError("Locks reply without a \"locks\" array")
        }
        var locks: [LockedKey] = []
        for item in items {
            guard case .string(let domainName)? = item["domain"], case .string(let keyName)? = item["key"],
                let domain = try? Domain(validating: domainName)
            else { throw .protocolError("Locks reply with a lock that is not {domain, key}") }
            var file: String?
            if case .string(let path)? = item["file"] { file = path }
            locks.append(LockedKey(domain: domain, key: try Decode.key(keyName), file: file))
        }
        return locks
    }

    /// Reads the system instance's drop-in files again (admins): returns the revision at which
    /// users get the new combination (the current one when nothing they see changed).
    @discardableResult
    public func reload() throws(ClientError) -> Int64 {
        try Decode.revision(try call(.reload))
    }

    /// Where the system value and lock of `key` come from on the system instance.
    public func systemSource(_ domain: Domain, _ key: Key) throws(ClientError) -> SystemSource {
        let reply = try call(.systemSource(domain, key))
        func text(_ name: String) -> String? {
            if case .string(let value)? = reply.parameters[name] { return value }
            return nil
        }
        var source = SystemSource(
            value: text("value"), file: text("file"), lock: text("lock"), lockFile: text("lockFile"))
        source.fileValue = reply.parameters["fileValue"].flatMap { try? Value(typedJSON: $0) }
        source.adminGroup = text("adminGroup")
        return source
    }
}

/// Where a system value and lock come from (`io.kvd.System.Source`).
public struct SystemSource: Sendable, Equatable {
    /// `admin` (set through kvctl or etcd), `file` (a drop-in file), or nil: no system value.
    public var value: String?
    /// The drop-in file holding a value for the key (beneath an admin's, if ``value`` is `admin`).
    public var file: String?
    /// `admin`, `file`, or nil: not locked.
    public var lock: String?
    /// The drop-in file whose line locks the key.
    public var lockFile: String?
    /// The value the drop-in files give the key (beneath an admin's); nil from an older instance.
    public var fileValue: Value?
    /// The group whose members may change the system instance (`--admin-group`); nil from an
    /// older instance.
    public var adminGroup: String?

    /// A source as `io.kvd.System.Source` names it; each part nil where it has none.
    public init(value: String?, file: String?, lock: String?, lockFile: String?) {
        self.value = value
        self.file = file
        self.lock = lock
        self.lockFile = lockFile
    }
}
