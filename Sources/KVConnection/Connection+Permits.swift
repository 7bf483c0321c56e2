import KVProtocol
import KVValues

/// What users grant sandboxed apps (`Permit`, `Revoke`, `Permits`): kvd refuses all three to a
/// sandboxed caller, so only a program outside the sandbox (kvctl) can change or read them.
extension Connection {
    /// Grants `permit.app` the domains `permit.pattern` reaches (to read only, if
    /// `permit.readOnly`), replacing its grant for that pattern. Durable when it returns;
    /// returns the store's revision then.
    @discardableResult
    public func permit(_ permit: Permit) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.permit(permit)))
    }

    /// Takes back what `app` was granted for `pattern`; ``ClientError/notFound(domain:key:)``
    /// (the pattern, the app id) when nothing was.
    @discardableResult
    public func revoke(_ app: AppID, _ pattern: DomainPattern) throws(ClientError) -> Int64 {
        try Decode.revision(try call(.revoke(app, pattern)))
    }

    /// What users granted `app` (every app, if nil), sorted by app and pattern.
    public func permits(of app: AppID? = nil) throws(ClientError) -> [Permit] {
        guard let permits = Permit.list(decoding: try call(.permits(app))) else {
            throw .protocolError("Permits reply without a valid \"permits\" array")
        }
        return permits
    }
}
