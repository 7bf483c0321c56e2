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
    /// Every domain of the instance at one revision (kvd captures them at once and streams
    /// them in pieces). Holds the whole backup; blocks until the last reply.
    ///
    /// - Throws: `.protocolError` if the replies disagree on the revision or end early.
    public func backup() throws(ClientError) -> BackupSnapshot {
        var snapshot = BackupSnapshot(revision: 0, domains: [:])
        let revision = try backup { domain, values, unreadable in
            snapshot.domains[domain] = values
            if !unreadable.isEmpty { snapshot.unreadable[domain] = unreadable }
            return true
        }
        snapshot.revision = revision ?? 0  // never nil: every domain is taken
        return snapshot
    }

    /// Every domain of the instance at one revision, handed to `eachDomain` one domain at a time
    /// (its values, and the keys kvd cannot read with the reason), in the order kvd sends them
    /// (sorted by name), as soon as the domain's last piece arrived: only one domain is held
    /// at once. Returns the revision. `eachDomain` returning false stops the backup (the
    /// connection is then closed) and returns nil. Blocks until the last reply.
    ///
    /// - Throws: `.protocolError` if the replies disagree on the revision, end early, or give a
    ///   domain's pieces apart.
    @discardableResult
    public func backup(eachDomain: (Domain, [Key: Value], [Key: String]) -> Bool) throws(ClientError) -> Int64? {
        var revision: Int64?
        var finished = false
        var current: (domain: Domain, values: [Key: Value], unreadable: [Key: String])?
        var done: Set<Domain> = []
        var stopped = false
        try stream(.backup) { (reply) throws(ClientError) -> Bool in
            let replyRevision = try Decode.revision(reply)
            guard replyRevision == revision ?? replyRevision else {
                throw .protocolError("Backup replies at two revisions, \(replyRevision) and \(revision!)")
            }
            revision = replyRevision
            let domain = try Self.backupDomain(reply)
            if let held = current, held.domain != domain {
                current = nil
                done.insert(held.domain)
                guard eachDomain(held.domain, held.values, held.unreadable) else {
                    stopped = true
                    return false
                }
            }
            guard let domain else {
                finished = true  // the last reply: the stream ends with it
                return true
            }
            guard !done.contains(domain) else {
                throw .protocolError("Backup replies give domain \(domain.name) in two places")
            }
            var piece = current ?? (domain, [:], [:])
            current = nil  // held once, so adding to it copies nothing
            try Self.add(reply, to: &piece)
            current = piece
            return true
        }
        if stopped { return nil }
        guard finished, let revision else { throw .protocolError("the Backup replies ended before the last one") }
        return revision
    }

    /// The domain one `Backup` reply carries a piece of; nil for the last reply.
    private static func backupDomain(_ reply: VarlinkReply) throws(ClientError) -> Domain? {
        guard case .string(let name)? = reply.parameters["domain"] else { return nil }
        do { return try Domain(validating: name) } catch {
            throw .protocolError("Backup reply with an invalid domain: \(error)")
        }
    }

    /// Adds the values and the unreadable keys of one `Backup` reply to its domain's.
    private static func add(
        _ reply: VarlinkReply, to domain: inout (domain: Domain, values: [Key: Value], unreadable: [Key: String])
    ) throws(ClientError) {
        guard case .object(let values)? = reply.parameters["values"] else {
            throw .protocolError("Backup reply without a \"values\" object")
        }
        for (name, json) in values { domain.values[try Decode.key(name)] = try Decode.value(json, "values") }
        guard case .object(let unreadable)? = reply.parameters["unreadable"] else { return }
        for (name, reason) in unreadable {
            guard case .string(let text) = reason else {
                throw .protocolError("Backup reply with a reason that is not a string")
            }
            domain.unreadable[try Decode.key(name)] = text
        }
    }
}
