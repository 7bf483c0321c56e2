import KVProtocol
import KVValues

/// Every domain of a kvd instance at one revision, as `Backup` gives it.
public struct BackupSnapshot: Sendable, Equatable {
    /// The store revision of the copy: every change up to it is in, no later one.
    public var revision: Int64
    /// Each domain's values.
    public var domains: [Domain: [Key: Value]]
    /// The keys kvd cannot read (not in ``domains``), with the reason.
    public var unreadable: [Domain: [Key: String]]

    /// A snapshot at `revision` holding `domains`, and `unreadable` keys left out.
    public init(revision: Int64, domains: [Domain: [Key: Value]], unreadable: [Domain: [Key: String]] = [:]) {
        self.revision = revision
        self.domains = domains
        self.unreadable = unreadable
    }
}

extension Connection {
    /// Every domain of the instance at one revision (kvd captures them at once and streams one
    /// reply per domain). Blocks until the last reply.
    ///
    /// - Throws: `.protocolError` if the replies disagree on the revision or end early.
    public func backup() throws(ClientError) -> BackupSnapshot {
        var snapshot: BackupSnapshot?
        var finished = false
        try stream(.backup) { (reply) throws(ClientError) -> Bool in
            let revision = try Decode.revision(reply)
            guard revision == snapshot?.revision ?? revision else { throw .protocolError("Backup replies at two revisions, \(revision) and \(snapshot!.revision)") }
            if snapshot == nil { snapshot = BackupSnapshot(revision: revision, domains: [:]) }
            guard case .string(let name)? = reply.parameters["domain"] else {
                finished = true  // the last reply: the stream ends with it
                return true
            }
            let domain: Domain
            do { domain = try Domain(validating: name) } catch { throw .protocolError("Backup reply with an invalid domain: \(error)") }
            guard case .object(let values)? = reply.parameters["values"] else { throw .protocolError("Backup reply without a \"values\" object") }
            for (name, json) in values { snapshot!.domains[domain, default: [:]][try Decode.key(name)] = try Decode.value(json, "values") }
            if case .object(let unreadable)? = reply.parameters["unreadable"] {
                for (name, reason) in unreadable {
                    guard case .string(let text) = reason else { throw .protocolError("Backup reply with a reason that is not a string") }
                    snapshot!.unreadable[domain, default: [:]][try Decode.key(name)] = text
                }
            }
            return true
        }
        guard finished, let snapshot else { throw .protocolError("the Backup replies ended before the last one") }
        return snapshot
    }
}
