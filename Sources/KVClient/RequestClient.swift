import KVProtocol
import KVSystem
import KVValues
import Synchronization

/// The connection a suite makes its calls on (writes, `synchronize`), opened at first use and
/// opened again when kvd went away (idle exit, restart) since the last call; or the suite's
/// ``KVMemoryStore``.
final class RequestClient: Sendable {
    /// Where the calls and the watches go.
    enum Transport: Sendable {
        case kvd(connect: @Sendable () throws(ClientError) -> Connection)
        case memory(KVMemoryStore)
    }

    let transport: Transport
    private let current = Mutex<Connection?>(nil)

    init(_ configuration: KVDefaults.Configuration) {
        if let store = configuration.memoryStore {
            transport = .memory(store)
            return
        }
        let path = Paths.socket(explicit: configuration.socketPath, environment: configuration.environment)
        let environment = configuration.environment
        let autostart = configuration.autostart
        let daemon = configuration.daemonPath
        transport = .kvd { () throws(ClientError) -> Connection in
            try Autostart.connect(socketPath: path, daemonPath: daemon, enabled: autostart, environment: environment)
        }
    }

    /// Runs `body` on the connection; if the connection turns out closed, once more on a new one
    /// (a write repeated after kvd restarted stores the same value again, which is harmless).
    /// On a ``KVMemoryStore``, runs `body` on the store, once. `NotFound` gives `ifNotFound()`.
    func call<T>(
        _ body: (any SettingsBackend) throws(ClientError) -> T, ifNotFound: () -> T
    ) throws(KVDefaultsError) -> T {
        let connect: @Sendable () throws(ClientError) -> Connection
        switch transport {
        case .kvd(let connector): connect = connector
        case .memory(let store):
            do throws(ClientError) {
                return try body(store)
            } catch .notFound {
                return ifNotFound()
            } catch {
                throw .client(error)
            }
        }
        var attempt = 0
        while true {
            attempt += 1
            do throws(ClientError) {
                let connection = try connection(connect)
                do throws(ClientError) {
                    return try body(connection)
                } catch  where error.isConnectionLost {
                    current.withLock { if $0 === connection { $0 = nil } }
                    if attempt < 2 { continue }
                    throw error
                }
            } catch .notFound {
                return ifNotFound()
            } catch {
                throw .client(error)
            }
        }
    }

    private func connection(_ connect: () throws(ClientError) -> Connection) throws(ClientError) -> Connection {
        if let connection = current.withLock({ $0 }) { return connection }
        let connection = try connect()
        current.withLock { $0 = connection }
        return connection
    }
}

/// This process's environment, for programs built on KVClient that pass it on (as `habits` does).
public enum ProcessEnvironment {
    /// The environment, read from `environ`.
    public static func current() -> [String: String] {
        Paths.processEnvironment()
    }
}

/// Facts about this process: its environment and the domain of ``KVDefaults/standard``.
@usableFromInline
enum ProcessFacts {
    @usableFromInline
    static func environment() -> [String: String] {
        Paths.processEnvironment()
    }

    /// The executable's file name as a domain: characters outside `A-Z a-z 0-9 . _ -` become `_`.
    static func executableDomain() -> Domain {
        domain(forExecutable: LinuxSystem().executablePath() ?? CommandLine.arguments.first ?? "app")
    }

    static func domain(forExecutable path: String) -> Domain {
        let name = path.split(separator: "/").last.map(String.init) ?? "app"
        var cleaned = String(
            name.unicodeScalars.map { scalar -> Character in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                        || "._-".unicodeScalars.contains(scalar))
                    ? Character(scalar) : "_"
            }.prefix(255))
        while cleaned.hasPrefix(".") || cleaned.hasPrefix("-") { cleaned = "_" + cleaned.dropFirst() }
        return (try? Domain(validating: cleaned)) ?? Domain(constant: "app")
    }
}
