import KVProtocol
import KVStorage
import KVValues

/// `Permit`, `Revoke` and `Permits`: what users granted sandboxed apps, kept in the internal
/// domain ``Domain/permits`` (so a grant is an ordinary durable commit, with the same log,
/// recovery and crash points as values; no client can name the domain, and
/// ``SandboxAccess`` refuses the three methods to a sandboxed caller).
extension RequestHandler {
    func handlePermits(_ request: DefaultsRequest) -> Outcome {
        switch request {
        case .permit(let permit):
            let key = PermitRecord.key(permit.app, permit.pattern)
            return .commit(.permits, .set(key, PermitRecord.value(readOnly: permit.readOnly), ifRevision: nil))
        case .revoke(let app, let pattern):
            let key = PermitRecord.key(app, pattern)
            guard store.list(.permits)?.values[key] != nil else {
                return .reply(
                    .failure(
                        DefaultsInterface.Error.notFound,
                        ["domain": .string(pattern.text), "key": .string(app.name)]))
            }
            return .commit(.permits, .delete(key))
        case .permits(let app):
            return .reply(.permits(permits(of: app)))
        default:
            preconditionFailure("\(request.call.method) is not a permits request")
        }
    }

    /// What users granted `app` (every app, if nil), as the store holds it now; a record kvd
    /// cannot read (written by another version) is left out.
    func permits(of app: AppID?) -> [Permit] {
        guard let values = store.list(.permits)?.values else { return [] }
        return values.compactMap { key, value in
            guard let permit = PermitRecord.permit(key, value), app == nil || permit.app == app else { return nil }
            return permit
        }
    }
}

/// How a grant is stored in ``Domain/permits``: the key `APPID PATTERN` (neither holds a
/// space), the value `"read"` or `"write"`.
enum PermitRecord {
    static func key(_ app: AppID, _ pattern: DomainPattern) -> Key {
        // At most 255 + 1 + 256 bytes, no NUL: always a key.
        do { return try Key(validating: "\(app.name) \(pattern.text)") } catch { preconditionFailure("\(error)") }
    }

    static func value(readOnly: Bool) -> Value { .string(readOnly ? "read" : "write") }

    /// The grant stored as `key` holding `value`; nil when it is not one.
    static func permit(_ key: Key, _ value: Value) -> Permit? {
        let parts = key.name.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 2, case .string(let mode) = value, mode == "read" || mode == "write",
            let app = try? AppID(validating: String(parts[0])),
            let pattern = try? DomainPattern(validating: String(parts[1]))
        else { return nil }
        return Permit(app: app, pattern: pattern, readOnly: mode == "read")
    }
}
