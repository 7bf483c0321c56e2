import KVProtocol
import KVValues

/// Why a call to kvd failed. Each description is one line that says what happened and, where
/// there is something to do, what to do.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing accepted the connection at `path`; `reason` is the system's word for it.
    case cannotConnect(path: String, reason: String)
    /// kvd could not be started to serve `path` (autostart).
    case cannotStart(path: String, reason: String)
    /// The socket's folder may belong to another user: nothing was sent and no kvd started.
    case unsafeSocketFolder(SocketFolderError)
    /// kvd answered with the error `name` (`io.kvd.Defaults.NotFound`, ...).
    case remote(name: String, parameters: [String: JSON])
    /// kvd's reply broke the protocol.
    case protocolError(String)
    /// kvd closed the connection before replying.
    case connectionClosed

    public var description: String {
        switch self {
        case .cannotConnect(let path, let reason):
            "cannot connect to kvd at \(path): \(reason) (is kvd running? start it with `systemctl --user start kvd.socket` or run `kvd`)"
        case .cannotStart(let path, let reason):
            "cannot start kvd for \(path): \(reason)"
        case .unsafeSocketFolder(let error):
            error.description
        case .remote(let name, let parameters):
            Self.describeRemote(name: name, parameters)
        case .protocolError(let reason):
            "kvd sent an invalid reply: \(reason)"
        case .connectionClosed:
            "kvd closed the connection before replying (did it stop or crash? see `journalctl --user -u kvd`)"
        }
    }

    /// The error name when this is a ``remote(name:parameters:)`` error.
    public var remoteName: String? {
        if case .remote(let name, _) = self { return name }
        return nil
    }

    private static func describeRemote(name: String, _ parameters: [String: JSON]) -> String {
        func text(_ member: String) -> String? {
            if case .string(let value)? = parameters[member] { return value }
            return nil
        }
        func number(_ member: String) -> Int64? {
            if case .integer(let value)? = parameters[member] { return value }
            return nil
        }
        let domain = text("domain") ?? "?"
        typealias Names = DefaultsInterface.Error
        typealias Service = ServiceInterface.Error
        switch name {
        case Names.notFound:
            if let key = text("key") { return "no key \"\(key)\" in domain \"\(domain)\"" }
            return "no domain \"\(domain)\""
        case Names.revisionMismatch:
            let now = number("revision").map { " (now at revision \($0))" } ?? ""
            return "the value changed meanwhile\(now); read it again and retry"
        case Names.invalidName:
            return "invalid name \"\(text("name") ?? "?")\": \(text("reason") ?? "refused by kvd")"
        case Names.invalidValue:
            return "invalid value: \(text("reason") ?? "refused by kvd")"
        case Names.storageFailure:
            return "kvd could not store the change, so nothing changed: \(text("reason") ?? "unknown reason")"
        case Names.unreadableValue:
            let key = text("key") ?? "?"
            return "the stored value of \"\(key)\" in \(domain) cannot be read (\(text("reason") ?? "no reason given")); kvd keeps it as it is. Replace it with `kvctl set \(domain) \(key) ...` or remove it with `kvctl delete \(domain) \(key)`"
        case Names.tooLarge:
            let limit = number("limit").map { " of \($0) bytes" } ?? ""
            return "the request, or the domain after it, is larger than kvd's limit\(limit) (one message); store less under one key, or in one domain"
        case Service.methodNotFound, Service.methodNotImplemented:
            return "kvd does not implement \(text("method") ?? "the method") (is kvd older than this client?)"
        case Service.interfaceNotFound:
            return "kvd does not serve the interface \(text("interface") ?? "?") (is kvd older than this client?)"
        case Service.invalidParameter:
            return "kvd refused the parameter \"\(text("parameter") ?? "?")\" (is kvd a different version than this client?)"
        case Service.expectedMore:
            return "kvd expects this call with \"more\": true"
        case "org.varlink.service.PermissionDenied":
            return "kvd denied access"
        default:
            let shown = parameters.isEmpty ? "" : " " + JSONWriter(sortKeys: true).string(.object(parameters))
            return "kvd replied with the error \(name)\(shown)"
        }
    }
}
