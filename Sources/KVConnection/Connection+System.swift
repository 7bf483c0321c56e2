import KVProtocol
import KVValues

/// One key the system administrator locked.
public struct LockedKey: Sendable, Hashable {
    /// The domain the key is locked in.
    public var domain: Domain
    /// The locked key.
    public var key: Key

    /// The lock of `key` in `domain`.
    public init(domain: Domain, key: Key) {
        self.domain = domain
        self.key = key
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

    /// The locked keys of `domain`, or of every domain, sorted.
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
            locks.append(LockedKey(domain: domain, key: try Decode.key(keyName)))
        }
        return locks
    }
}
