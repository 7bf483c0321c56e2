import Foundation
import Glibc
import Testing

/// A machine with a system instance, run as root under `systemd-socket-activate`, and users'
/// kvds run as users made for the tests: a folder of the test's (mode 0755, so those users
/// reach what they need), the system socket's folder (root's, 0755, as `/run/kvd`), the system
/// state folder (root's, 0700), and one folder per user kvd (that user's, 0700). Removed at the
/// end, with every process stopped.
final class SystemScene {
    let root: String
    let accounts: SystemAccounts
    var systemSocket: String { root + "/run/system.sock" }
    var systemState: String { root + "/system-state" }
    let systemArguments: [String]
    var system: SystemInstance?
    private(set) var users: [UserKvd] = []

    init(maxConnectionsPerUID: Int = 64, systemArguments extra: [String] = []) throws {
        accounts = try SystemAccounts.get()
        var template = Array("/tmp/kvd-e2e-system-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        chmod(root, 0o755)
        mkdir(root + "/run", 0o755)
        mkdir(root + "/system-state", 0o700)
        // The machine's own /etc/kvd and /etc/dconf are never read: the folders are the scene's (none, unless given).
        let dropIns =
            (extra.contains("--config-dir") ? [] : ["--config-dir", root + "/etc"])
            + (extra.contains("--dconf-dir") ? [] : ["--dconf-dir", root + "/dconf"])
        systemArguments =
            ["--admin-group", SystemAccounts.adminGroup, "--max-connections-per-uid", String(maxConnectionsPerUID)]
            + dropIns + extra
        system = try startSystem()
    }

    /// A system instance on `socket` (the scene's by default) with the scene's state.
    func startSystem(on socket: String? = nil, activated: Bool = true) throws -> SystemInstance {
        let log = root + "/system-\(UInt32.random(in: 0...UInt32.max)).log"
        return try SystemInstance(
            socket: socket ?? systemSocket, state: systemState, arguments: systemArguments, activated: activated,
            logFile: log)
    }

    /// Starts `account`'s own kvd, following the system instance.
    @discardableResult
    func startUser(_ account: TestAccount) throws -> UserKvd {
        let user = try UserKvd(account, in: root, systemSocket: systemSocket)
        users.append(user)
        return user
    }

    /// Stops `user`'s kvd and starts it again on the same state folder.
    func restart(_ user: UserKvd) throws -> UserKvd {
        #expect(user.stop() == 0, "\(user.errorOutput())")
        users.removeAll { $0 === user }
        let again = try UserKvd(user.account, in: root, systemSocket: systemSocket, again: true)
        users.append(again)
        return again
    }

    /// One call to the system instance as `account` (nil: root), on a connection of its own.
    func systemCall(
        _ method: String, _ parameters: [String: Any], as account: TestAccount? = nil, on socket: String? = nil
    ) throws -> [String: Any] {
        let client = try RawClient.connect(socket ?? systemSocket, as: account)
        defer { client.close() }
        return try client.call(method, parameters)
    }

    /// The system instance's value of `key` (as root).
    func systemValue(_ domain: String, _ key: String) throws -> Any? {
        try systemCall("io.kvd.Defaults.Get", ["domain": domain, "key": key]).value
    }

    /// The system instance's locks of `domain`, as keys (as root).
    func systemLocks(_ domain: String) throws -> [String] {
        let locks =
            try systemCall("io.kvd.System.Locks", ["domain": domain]).parameters["locks"] as? [[String: Any]] ?? []
        return locks.compactMap { $0["key"] as? String }.sorted()
    }

    /// Sets `key` of the system instance and locks it, as root; fails the test if refused.
    func setAndLock(_ domain: String, _ key: String, _ value: Any) throws {
        let set = try systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": key, "value": value])
        let lock = try systemCall("io.kvd.System.Lock", ["domain": domain, "key": key])
        #expect(set.error == nil && lock.error == nil, "\(set) \(lock)")
    }

    /// Every log, for failure messages.
    func logs() -> String {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0.hasSuffix(".log") }
            .sorted()
        return names.map { "\($0): " + ((try? String(contentsOfFile: root + "/" + $0, encoding: .utf8)) ?? "") }.joined(
            separator: "\n")
    }

    deinit {
        users.removeAll()
        system = nil
        try? FileManager.default.removeItem(atPath: root)
    }
}
