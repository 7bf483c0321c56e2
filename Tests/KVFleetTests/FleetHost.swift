import Foundation
import Glibc
import KVConnection
import KVProtocol
import KVValues
import Testing

/// The built programs, beside the test bundle.
let fleetBinaries: String = {
    var url = URL(
        fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0])
    while !FileManager.default.fileExists(atPath: url.appendingPathComponent("kvd").path), url.path != "/" {
        url.deleteLastPathComponent()
    }
    return url.path
}()

/// One machine of the fleet tests: its system instance (`kvd --system --etcd`, own state folder
/// and socket) mirroring `com.corp.*` from the cluster, and a user's kvd following it.
final class FleetHost: @unchecked Sendable {
    let folder: String
    let cluster: EtcdCluster
    /// `--etcd`'s URLs, in order (the gateway starts with the first).
    let endpoints: [String]
    let extraArguments: [String]
    var system: SpawnedProcess?
    var user: SpawnedProcess?
    var systemSocket: String { folder + "/run/system.sock" }
    var userSocket: String { folder + "/user.sock" }

    init(
        _ name: String, in root: String, cluster: EtcdCluster, endpoints: [String]? = nil,
        extraArguments: [String] = [], withUser: Bool = true
    ) throws {
        folder = root + "/" + name
        self.cluster = cluster
        self.endpoints = endpoints ?? cluster.clientURLs
        self.extraArguments = extraArguments
        try FileManager.default.createDirectory(
            atPath: folder + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        try startSystem()
        if withUser {
            user = try Self.start(
                [
                    "--socket", userSocket, "--state-dir", folder + "/user-state", "--system-socket", systemSocket,
                    "--idle-exit", "0",
                ], waitingFor: userSocket,
                log: folder + "/user.log")
        }
    }

    /// Starts (or restarts) the system instance; its log is appended to `system.log`.
    func startSystem() throws {
        system = try Self.start(
            [
                "--system", "--socket", systemSocket, "--state-dir", folder + "/system-state", "--etcd",
                endpoints.joined(separator: ","),
                "--fleet-domain", "com.corp.*", "--etcd-progress-interval", "0.5", "--verbose",
            ] + extraArguments, waitingFor: systemSocket, log: folder + "/system.log")
    }

    /// Stops the system instance: SIGTERM (orderly) or SIGKILL.
    func stopSystem(_ signal: Int32 = SIGTERM) {
        system?.signal(signal)
        system?.reap()
        system = nil
    }

    /// Starts kvd and waits (10 s at most) until it accepts connections at `socket`.
    static func start(_ arguments: [String], waitingFor socket: String, log: String) throws -> SpawnedProcess {
        unlink(socket)
        let process = try SpawnedProcess(fleetBinaries + "/kvd", arguments, output: log)
        // Until a connection is accepted: the file exists from bind(), a moment before listen().
        for _ in 0..<1000 {
            if let connection = try? Connection(socketPath: socket) {
                connection.close()
                break
            }
            usleep(10_000)
        }
        return process
    }

    /// `kvctl` on the user's kvd (`--system`: on the system instance): its status and output.
    func kvctl(_ arguments: String..., system: Bool = false) throws -> (status: Int32, output: String) {
        try kvctl(arguments, system: system)
    }

    func kvctl(_ arguments: [String], system: Bool = false) throws -> (status: Int32, output: String) {
        let output = folder + "/kvctl-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { unlink(output) }
        let target = system ? ["--system", "--socket", systemSocket] : ["--socket", userSocket, "--no-autostart"]
        let status = try SpawnedProcess(fleetBinaries + "/kvctl", target + arguments, output: output).reap()
        return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// Polls `kvctl ARGUMENTS` on the user's kvd (`system`: the system instance) until it
    /// prints `expected` (20 s at most).
    func eventually(_ expected: String, _ arguments: String..., system: Bool = false) throws -> Bool {
        for _ in 0..<400 {
            if try kvctl(arguments, system: system).output == expected + "\n" { return true }
            usleep(50_000)
        }
        return false
    }

    /// Polls `kvctl get DOMAIN KEY` on the user's kvd until it fails (the key is gone; 20 s at most).
    func eventuallyGone(_ domain: String, _ key: String) throws -> Bool {
        for _ in 0..<400 {
            if try kvctl("get", domain, key).status == 1 { return true }
            usleep(50_000)
        }
        return false
    }

    /// The system instance's status, through KVClient (as `kvctl --system status --json` reads it).
    func status() throws -> SystemStatus {
        let connection = try Connection(socketPath: systemSocket)
        defer { connection.close() }
        return try connection.status()
    }

    /// Polls the status until `condition` holds (20 s at most); the last status seen.
    func status(until condition: (SystemStatus) -> Bool) throws -> SystemStatus {
        var last = try status()
        for _ in 0..<400 where !condition(last) {
            usleep(50_000)
            last = try status()
        }
        return last
    }

    /// The system instance's whole log (``logs()`` keeps only the ends, for messages).
    func systemLog() -> String {
        (try? String(contentsOfFile: folder + "/system.log", encoding: .utf8)) ?? ""
    }

    func logs() -> String {
        ["system.log", "user.log"].map { name in
            "\(name): " + ((try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? "").suffix(3000)
        }
        .joined(separator: "\n")
    }

    deinit {
        for process in [user, system].compactMap({ $0 }) {
            process.signal(SIGTERM)
            process.reap()
        }
    }
}
