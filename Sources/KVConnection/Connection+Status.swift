import KVProtocol

extension Connection {
    /// The system instance's status (revision, domains, fleet mirror). Anyone may ask; a user's kvd answers
    /// `org.varlink.service.MethodNotFound` (``ClientError/remote(name:parameters:)``).
    public func status() throws(ClientError) -> SystemStatus {
        let reply = try call(.status)
        guard let status = SystemStatus(json: reply.parameters) else {
            throw .protocolError("Status reply with a missing or mistyped member")
        }
        return status
    }
}
