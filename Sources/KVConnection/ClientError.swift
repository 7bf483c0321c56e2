import KVProtocol
import KVSystem
import KVValues

/// Why a call to kvd failed. Each description is one line that says what happened and, where
/// there is something to do, what to do.
///
/// kvd's error replies are decoded once, by ``init(errorReply:)``, into the cases from
/// ``notFound(domain:key:)`` to ``methodNotFound(method:)``: callers match cases and never
/// compare error names. An error kvd may add later gets a case there; until then it is
/// ``remote(name:parameters:)``.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing accepted the connection at `path`; `reason` is the system's word for it.
    case cannotConnect(path: String, reason: String)
    /// kvd could not be started to serve `path` (autostart).
    case cannotStart(path: String, reason: String)
    /// The socket's folder may belong to another user: nothing was sent and no kvd started.
    case unsafeSocketFolder(SocketFolderError)

    /// `NotFound`: no such domain, or no such key in it.
    case notFound(domain: String, key: String?)
    /// `RevisionMismatch`: a conditional write found the data changed since; nothing changed.
    /// `current` is the revision now (if kvd said).
    case revisionMismatch(current: Int64?)
    /// `InvalidName`: a domain or key name breaks the naming rule (`reason` says which).
    case invalidName(name: String, reason: String)
    /// `InvalidValue`: the value cannot be stored.
    case invalidValue(reason: String)
    /// `StorageFailure`: kvd could not make the change durable, so nothing changed.
    case storageFailure(reason: String)
    /// `OutcomeUnknown`: a fleet change was sent to etcd and its answer lost; it may or may not
    /// have been made (read the value back).
    case outcomeUnknown(reason: String)
    /// `TooLarge`: the request, or the domain after it, was over what one message carries
    /// (`limit` bytes, if kvd said); nothing changed.
    case tooLarge(limit: Int64?)
    /// `UnreadableValue`: the stored value cannot be read; kvd keeps it as it is.
    case unreadableValue(domain: String, key: String, reason: String)
    /// `KeyLocked`: the machine's administrator locked the key (`kvctl --system lock`),
    /// or a drop-in file locks it, so nothing changed; root or a member of the system
    /// instance's admin group (`--admin-group`, default `kvd-admin`) can lift the lock.
    case keyLocked(domain: String, key: String)
    /// `HistoryTruncated`: the revision asked for is older than the history kvd keeps of the
    /// domain; `oldestRevision` is the oldest it can answer for.
    case historyTruncated(domain: String, oldestRevision: Int64)
    /// `org.varlink.service.PermissionDenied`: the system instance (`kvd --system`) lets only
    /// root and members of the group `kvd-admin` change anything; nothing changed.
    case permissionDenied
    /// `org.varlink.service.MethodNotFound`: kvd is older than this client.
    case methodNotFound(method: String)
    /// Any other error reply (`InvalidParameter`, `InterfaceNotFound`, a name this client does
    /// not know), with its parameters.
    case remote(name: String, parameters: [String: JSON])

    /// kvd's reply broke the protocol.
    case protocolError(String)
    /// Sending to or receiving from kvd failed (the system's error).
    case connectionFailed(SystemError)
    /// kvd closed the connection before replying.
    case connectionClosed

    /// The error kvd replied with: the one place where error names are read.
    public init(errorReply reply: VarlinkReply) {
        let parameters = reply.parameters
        func text(_ member: String) -> String {
            if case .string(let value)? = parameters[member] { return value }
            return "?"
        }
        func number(_ member: String) -> Int64? {
            if case .integer(let value)? = parameters[member] { return value }
            return nil
        }
        typealias Names = DefaultsInterface.Error
        switch reply.error ?? "" {
        case Names.notFound: self = .notFound(domain: text("domain"), key: parameters["key"] == nil ? nil : text("key"))
        case Names.revisionMismatch: self = .revisionMismatch(current: number("revision"))
        case Names.invalidName: self = .invalidName(name: text("name"), reason: text("reason"))
        case Names.invalidValue: self = .invalidValue(reason: text("reason"))
        case Names.storageFailure: self = .storageFailure(reason: text("reason"))
        case Names.tooLarge: self = .tooLarge(limit: number("limit"))
        case Names.outcomeUnknown: self = .outcomeUnknown(reason: text("reason"))
        case Names.unreadableValue:
            self = .unreadableValue(domain: text("domain"), key: text("key"), reason: text("reason"))
        case Names.keyLocked: self = .keyLocked(domain: text("domain"), key: text("key"))
        case Names.historyTruncated:
            self = .historyTruncated(domain: text("domain"), oldestRevision: number("oldestRevision") ?? 0)
        case ServiceInterface.Error.permissionDenied: self = .permissionDenied
        case ServiceInterface.Error.methodNotFound: self = .methodNotFound(method: text("method"))
        case let name: self = .remote(name: name, parameters: parameters)
        }
    }

    /// Whether kvd answered with this error (the connection is fine), rather than the
    /// connection or the reply failing.
    public var isErrorReply: Bool {
        switch self {
        case .notFound, .revisionMismatch, .invalidName, .invalidValue, .storageFailure, .outcomeUnknown, .tooLarge,
            .unreadableValue, .keyLocked,
            .historyTruncated, .permissionDenied, .methodNotFound, .remote:
            true
        case .cannotConnect, .cannotStart, .unsafeSocketFolder, .protocolError, .connectionFailed, .connectionClosed:
            false
        }
    }

    /// Whether the connection went away (kvd stopped or restarted): a new one may succeed.
    public var isConnectionLost: Bool {
        switch self {
        case .connectionClosed, .connectionFailed: true
        default: false
        }
    }

    public var description: String {
        switch self {
        // A file stands at the path: no kvd can listen there, so no hint to start one.
        case .cannotConnect(let path, let reason) where reason.hasSuffix(Connection.notASocketAdvice):
            "cannot connect to kvd at \(path): \(reason)"
        case .cannotConnect(let path, let reason):
            "cannot connect to kvd at \(path): \(reason) (is kvd running? start it with `systemctl --user start kvd.socket` or run `kvd`)"
        case .cannotStart(let path, let reason):
            "cannot start kvd for \(path): \(reason)"
        case .unsafeSocketFolder(let error):
            error.description
        case .notFound(let domain, let key?):
            "no key \"\(key)\" in domain \"\(domain)\""
        case .notFound(let domain, nil):
            "no domain \"\(domain)\""
        case .revisionMismatch(let current):
            "the value changed meanwhile\(current.map { " (now at revision \($0))" } ?? ""); read it again and retry"
        case .invalidName(let name, let reason):
            "invalid name \"\(name)\": \(reason)"
        case .invalidValue(let reason):
            "invalid value: \(reason)"
        case .storageFailure(let reason):
            "kvd could not store the change, so nothing changed: \(reason)"
        case .outcomeUnknown(let reason):
            "kvd cannot tell whether the change was made: \(reason)"
        case .tooLarge(let limit):
            "the request, or the domain after it, is larger than kvd's limit\(limit.map { " of \($0) bytes" } ?? "") (one message); store less under one key, or in one domain"
        case .unreadableValue(let domain, let key, let reason):
            "the stored value of \"\(key)\" in \(domain) cannot be read (\(reason)); kvd keeps it as it is. "
                + "Replace it with `kvctl set \(domain) \(key) ...` or remove it with `kvctl delete \(domain) \(key)`"
        case .keyLocked(let domain, let key):
            "\(Self.shellWord(domain)) \(Self.shellWord(key)) is locked by the system administrator; root or a member of the system instance's "
                + "admin group can lift it (kvctl --system source \(Self.shellWord(domain)) \(Self.shellWord(key)) says where the lock comes from)"
        case .historyTruncated(let domain, let oldest):
            "kvd keeps the history of \(Self.shellWord(domain)) from revision \(oldest) on; ask for that revision or a later one (see: kvctl history \(Self.shellWord(domain)))"
        case .permissionDenied:
            "permission denied: only root and members of group kvd-admin may change the system instance"
        case .methodNotFound(let method):
            Self.olderKVD(method)
        case .remote(let name, let parameters):
            Self.describeOther(name: name, parameters)
        case .protocolError(let reason):
            "kvd sent an invalid reply: \(reason)"
        case .connectionFailed(let error):
            "the connection to kvd failed (\(error)); try again"
        case .connectionClosed:
            "kvd closed the connection before replying (did it stop or crash? see `journalctl --user -u kvd`)"
        }
    }

    /// `name` as one shell word: as it is when it holds only `A-Z a-z 0-9 . _ - / : @ + ,`,
    /// else in single quotes (a `'` inside written `'\''`), so a command in a message can be
    /// pasted as it is.
    public static func shellWord(_ name: String) -> String {
        let plain =
            !name.isEmpty
            && name.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                        || "._-/:@+,".unicodeScalars.contains(scalar))
            }
        return plain
            ? name : "'" + name.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    private static func olderKVD(_ method: String) -> String {
        "kvd does not implement \(method) (is kvd older than this client?)"
    }

    /// The varlink service's other errors, and errors this client does not know.
    private static func describeOther(name: String, _ parameters: [String: JSON]) -> String {
        func text(_ member: String) -> String? {
            if case .string(let value)? = parameters[member] { return value }
            return nil
        }
        typealias Service = ServiceInterface.Error
        switch name {
        case Service.methodNotImplemented:
            return olderKVD(text("method") ?? "the method")
        case Service.interfaceNotFound:
            return "kvd does not serve the interface \(text("interface") ?? "?") (is kvd older than this client?)"
        case Service.invalidParameter:
            return
                "kvd refused the parameter \"\(text("parameter") ?? "?")\" (is kvd a different version than this client?)"
        case Service.expectedMore:
            return "kvd expects this call with \"more\": true"
        default:
            let shown = parameters.isEmpty ? "" : " " + JSONWriter(sortKeys: true).string(.object(parameters))
            return "kvd replied with the error \(name)\(shown)"
        }
    }
}
