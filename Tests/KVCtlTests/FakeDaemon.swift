import KVClient
import KVProtocol
import KVTestSupport
import KVValues
import Synchronization

@testable import KVCtl

/// An in-memory kvd for kvctl's tests: serves io.kvd.Defaults (Get, Set, Delete, Apply, List,
/// Domains, Watch's initial reply) and io.kvd.System (Lock, Unlock, Locks) on the shared fake
/// varlink server, from a background thread. It plays both a user's kvd and the system
/// instance: writes touching a locked key fail with KeyLocked, Get says where a value comes from
/// (`sources`, set by a test; `locked` for a locked key), and with `writesDenied` every write
/// fails with PermissionDenied as the system instance answers a caller outside kvd-admin.
final class FakeDaemon: Sendable {
    private let server: FakeVarlinkServer
    let shared: Shared
    var path: String { server.path }

    /// The store, in a class so the serving thread can share it without keeping the daemon alive.
    final class Shared: Sendable {
        let store = Mutex(Store())
    }

    struct Store {
        var revision: Int64 = 0
        var domains: [Domain: [Key: (value: Value, revision: Int64)]] = [:]
        var locks: [Domain: Set<Key>] = [:]
        /// Where Get says a value comes from, when not the user and not locked.
        var sources: [Domain: [Key: ValueSource]] = [:]
        var writesDenied = false

        /// The KeyLocked error if `request` would change a locked key (a domain delete: any).
        func refusal(_ request: DefaultsRequest) -> RequestError? {
            let touched: (Domain, [Key]?)
            switch request {
            case .set(let domain, let key, _, _), .delete(let domain, let key?): touched = (domain, [key])
            case .apply(let domain, let changes, _): touched = (domain, changes.map(\.key))
            case .delete(let domain, nil): touched = (domain, nil)
            default: return nil
            }
            let locked = locks[touched.0] ?? []
            guard let key = touched.1.map({ $0.first(where: locked.contains) }) ?? locked.min() else { return nil }
            return RequestError(
                .failure(
                    DefaultsInterface.Error.keyLocked, ["domain": .string(touched.0.name), "key": .string(key.name)]))
        }

        func domainRevision(_ domain: Domain) -> Int64 {
            domains[domain]?.values.map(\.revision).max() ?? 0
        }
    }

    init() {
        let shared = Shared()
        self.shared = shared
        server = FakeVarlinkServer(prefix: "kvctl-test") { call in
            let reply = shared.store.withLock { store in
                do throws(RequestError) {
                    return try Self.handle(try DefaultsRequest(call: call), &store)
                } catch {
                    return error.reply
                }
            }
            return [reply]
        }
    }

    /// Runs kvctl against this daemon; returns the exit status, stdout and stderr.
    func kvctl(_ arguments: String..., stdin: String = "") -> (status: Int32, out: String, err: String) {
        kvctl(arguments, stdin: stdin)
    }

    func kvctl(_ arguments: [String], stdin: String = "") -> (status: Int32, out: String, err: String) {
        let console = RecordingConsole(stdin: stdin)
        let status = KVCtl.run(
            arguments: ["--socket", path, "--no-autostart"] + arguments, environment: [:], console: console)
        return (status, console.output, console.errors)
    }

    private static func notFound(_ domain: Domain, _ key: Key? = nil) -> RequestError {
        var parameters: [String: JSON] = ["domain": .string(domain.name)]
        if let key { parameters["key"] = .string(key.name) }
        return RequestError(.failure(DefaultsInterface.Error.notFound, parameters))
    }

    private static func mismatch(_ revision: Int64) -> RequestError {
        RequestError(.failure(DefaultsInterface.Error.revisionMismatch, ["revision": .integer(revision)]))
    }

    private static func handle(_ request: DefaultsRequest, _ store: inout Store) throws(RequestError) -> VarlinkReply {
        func revision(_ number: Int64) -> VarlinkReply { VarlinkReply(parameters: ["revision": .integer(number)]) }
        if store.writesDenied, request.isWrite { throw RequestError(.failure(ServiceInterface.Error.permissionDenied)) }
        if let refusal = store.refusal(request) { throw refusal }
        switch request {
        case .get(let domain, let key):
            guard let entry = store.domains[domain]?[key] else { throw notFound(domain, key) }
            let source: ValueSource =
                store.locks[domain]?.contains(key) == true ? .locked : store.sources[domain]?[key] ?? .user
            return VarlinkReply(parameters: [
                "value": entry.value.typedJSON, "revision": .integer(entry.revision),
                "source": .string(source.rawValue),
            ])
        case .set(let domain, let key, let value, let ifRevision):
            let current = store.domains[domain]?[key]?.revision ?? 0
            if let ifRevision, ifRevision != current { throw mismatch(current) }
            store.revision += 1
            store.domains[domain, default: [:]][key] = (value, store.revision)
            return revision(store.revision)
        case .delete(let domain, let key?):
            guard store.domains[domain]?.removeValue(forKey: key) != nil else { throw notFound(domain, key) }
            store.revision += 1
            return revision(store.revision)
        case .delete(let domain, nil):
            guard store.domains.removeValue(forKey: domain) != nil else { throw notFound(domain) }
            store.revision += 1
            return revision(store.revision)
        case .apply(let domain, let changes, let ifRevision):
            let current = store.domainRevision(domain)
            if let ifRevision, ifRevision != current { throw mismatch(current) }
            store.revision += 1
            for change in changes {
                store.domains[domain, default: [:]][change.key] = change.value.map { ($0, store.revision) }
            }
            return revision(store.revision)
        case .list(let domain):
            guard let values = store.domains[domain] else { throw notFound(domain) }
            let members = Dictionary(uniqueKeysWithValues: values.map { ($0.key.name, $0.value.value.typedJSON) })
            return VarlinkReply(parameters: [
                "values": .object(members), "revision": .integer(store.domainRevision(domain)),
            ])
        case .listAll:
            // Plays a kvd older than ListAll, so every kvctl unit test also runs the fallback to List.
            throw RequestError(
                .failure(ServiceInterface.Error.methodNotFound, ["method": .string("io.kvd.Defaults.ListAll")]))
        case .domains:
            return VarlinkReply(parameters: ["domains": .array(store.domains.keys.map { .string($0.name) })])
        case .watchAll, .snapshot:
            return VarlinkReply(parameters: [
                "revision": .integer(store.revision), "changes": .array([]), "initial": .bool(true),
            ])
        case .watch(let domain, _):
            let changes = (store.domains[domain] ?? [:]).map { Change(key: $0.key, value: $0.value.value).json }
            return VarlinkReply(parameters: [
                "revision": .integer(store.revision), "changes": .array(changes), "initial": .bool(true),
            ])
        case .lock(let domain, let key):
            store.locks[domain, default: []].insert(key)
            store.revision += 1
            return revision(store.revision)
        case .unlock(let domain, let key):
            guard store.locks[domain]?.remove(key) != nil else { throw notFound(domain, key) }
            store.revision += 1
            return revision(store.revision)
        case .locks(let only):
            let locks = store.locks.filter { only == nil || $0.key == only }.flatMap { domain, keys in
                keys.map { (domain, $0) }
            }
            let items = locks.sorted { ($0.0.name, $0.1) < ($1.0.name, $1.1) }.map {
                JSON.object(["domain": .string($0.0.name), "key": .string($0.1.name)])
            }
            return VarlinkReply(parameters: ["locks": .array(items)])
        // history, backup: tested against the real kvd
        case .getInfo, .getInterfaceDescription, .mirror, .status, .history, .blame, .backup, .permit, .revoke,
            .permits, .forgetHistory,
            .keepHistory,
            .reload, .systemSource:
            throw RequestError(.failure(ServiceInterface.Error.methodNotImplemented))
        }
    }
}

/// A console that keeps what kvctl prints.
final class RecordingConsole: Console {
    var output = ""
    var errors = ""
    let stdin: String

    init(stdin: String = "") {
        self.stdin = stdin
    }

    func out(_ text: String) { output += text }
    func err(_ text: String) { errors += text }
    func readStandardInput() throws(Failure) -> [UInt8] { Array(stdin.utf8) }
}
