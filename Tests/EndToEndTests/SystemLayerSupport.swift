import Foundation
import Glibc
import Testing

extension Trait where Self == ConditionTrait {
    /// Runs a suite or test that plays an admin and two users only where ``SystemAccounts`` can
    /// make them (root, the shadow tools, `setpriv`, `systemd-socket-activate`), and says so
    /// when it is skipped.
    static var needsSystemAccounts: Self {
        .enabled(
            if: SystemAccounts.available,
            "needs root, useradd, groupadd, setpriv and systemd-socket-activate to play an admin and two users")
    }
}

/// A local account the system-layer tests act as: its uid, gid and groups as the kernel would
/// report them for a process it runs (`SO_PEERCRED`, `SO_PEERGROUPS`).
struct TestAccount: Sendable {
    let name: String
    let uid: UInt32
    let gid: UInt32
    /// Every group it is in, its own included (what `setpriv --init-groups` gives it).
    let groups: [UInt32]
}

/// The accounts of the system-layer tests, made once per machine and kept (made again only if
/// missing, so runs and parallel tests share them): two plain users and one member of a group of
/// admins made for the tests (passed with `--admin-group`, so no test depends on the machine's
/// own `kvd-admin`).
struct SystemAccounts: Sendable {
    static let adminGroup = "kvd-e2e-admins"

    /// A user with a kvd of their own, not an admin.
    let user: TestAccount
    /// Another user who is not an admin.
    let other: TestAccount
    /// A member of ``adminGroup`` who is not root.
    let admin: TestAccount

    /// Whether accounts can be made and switched to here: root, with the shadow tools,
    /// `setpriv` and `systemd-socket-activate`.
    static var available: Bool {
        let tools: [String] = [
            "/usr/sbin/useradd", "/usr/sbin/groupadd", "/usr/sbin/usermod", "/usr/bin/setpriv",
            "/usr/bin/systemd-socket-activate",
        ]
        return getuid() == 0 && RawSyscalls.available && tools.allSatisfy { access($0, X_OK) == 0 }
    }

    /// Made on first use (once per test process).
    static func get() throws -> SystemAccounts { try made.get() }

    private static let made = Result { try SystemAccounts() }

    private init() throws {
        let group = try run("/usr/sbin/groupadd", ["-f", "--system", Self.adminGroup])
        guard group.status == 0 else { throw TestFailure("groupadd \(Self.adminGroup) failed: \(group.stderr)") }
        user = try Self.account("kvde2euser")
        other = try Self.account("kvde2eother")
        admin = try Self.account("kvde2eadmin", memberOf: Self.adminGroup)
    }

    /// The account `name`, made (`useradd`) if missing and put in `group` if asked. Retries a
    /// while: other tests run `useradd` and `userdel` meanwhile and hold `/etc/passwd`'s lock.
    private static func account(_ name: String, memberOf group: String? = nil) throws -> TestAccount {
        var complaint = ""
        for _ in 0..<50 {
            if getpwnam(name) == nil {
                complaint = try run(
                    "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
                ).stderr
            }
            if let group, getpwnam(name) != nil, !isMember(name, of: group) {
                complaint = try run("/usr/sbin/usermod", ["-a", "-G", group, name]).stderr
            }
            if let entry = getpwnam(name), group.map({ isMember(name, of: $0) }) ?? true {
                let uid = entry.pointee.pw_uid
                let gid = entry.pointee.pw_gid
                return TestAccount(name: name, uid: uid, gid: gid, groups: groups(of: name, gid))
            }
            usleep(100_000)
        }
        throw TestFailure("cannot make the account \(name): \(complaint)")
    }

    private static func isMember(_ name: String, of group: String) -> Bool {
        guard let entry = getgrnam(group), var member = entry.pointee.gr_mem else { return false }
        while let pointer = member.pointee {
            if String(cString: pointer) == name { return true }
            member += 1
        }
        return false
    }

    private static func groups(of name: String, _ gid: UInt32) -> [UInt32] {
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: 64)
        guard getgrouplist(name, gid, &groups, &count) >= 0 else { return [gid] }
        return Array(groups.prefix(Int(count)))
    }
}

/// Linux system calls made without glibc's wrappers: `setresuid` and friends change the
/// credentials of the calling thread only (glibc's wrappers change every thread's).
enum RawSyscalls {
    private typealias Call = @convention(c) (Int, Int, Int, Int) -> Int
    private static let call: Call? = dlsym(dlopen(nil, RTLD_NOW), "syscall").map { unsafeBitCast($0, to: Call.self) }

    #if arch(x86_64)
        private static let numbers: (setgroups: Int, setresgid: Int, setresuid: Int)? = (116, 119, 117)
    #elseif arch(arm64)
        private static let numbers: (setgroups: Int, setresgid: Int, setresuid: Int)? = (159, 149, 147)
    #else
        private static let numbers: (setgroups: Int, setresgid: Int, setresuid: Int)? = nil
    #endif

    static var available: Bool { call != nil && numbers != nil }

    /// Makes the calling thread `account` for good: its groups, gid and uid. Throws with errno.
    static func become(_ account: TestAccount) throws {
        guard let call, let numbers else { throw TestFailure("no raw system calls on this machine") }
        var groups = account.groups.map { gid_t($0) }
        let steps: [(String, () -> Int)] = [
            (
                "setgroups",
                {
                    groups.withUnsafeMutableBufferPointer {
                        call(numbers.setgroups, $0.count, Int(bitPattern: $0.baseAddress), 0)
                    }
                }
            ),
            ("setresgid", { call(numbers.setresgid, Int(account.gid), Int(account.gid), Int(account.gid)) }),
            ("setresuid", { call(numbers.setresuid, Int(account.uid), Int(account.uid), Int(account.uid)) }),
        ]
        for (name, step) in steps where step() != 0 {
            throw TestFailure("\(name) as \(account.name): \(String(cString: strerror(errno)))")
        }
    }
}

/// Carries a result out of a thread.
private final class Box<T>: @unchecked Sendable {
    var value: T?
}

extension RawClient {
    init(fd: Int32) { self.fd = fd }

    /// Connects to `path` as `account` (nil: as this process, root): from a thread of its own
    /// that becomes the account (``RawSyscalls/become(_:)``) and then ends. The kernel records
    /// the connecting thread's credentials, so the listener sees the account's uid and groups;
    /// the descriptor is the process's, usable from any thread.
    static func connect(_ path: String, as account: TestAccount?) throws -> RawClient {
        guard let account else { return try RawClient(path) }
        let box = Box<Result<Int32, any Error>>()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            box.value = Result {
                try RawSyscalls.become(account)
                return try RawClient.connect(path)
            }
            done.signal()
        }
        thread.start()
        done.wait()
        return RawClient(fd: try box.value!.get())
    }

    /// `method` with `parameters` (JSON-encoded here, so names may hold any byte); its reply.
    func call(_ method: String, _ parameters: [String: Any] = [:], more: Bool = false) throws -> [String: Any] {
        try call(Self.message(method, parameters, more: more))
    }

    /// Sends `method` with `parameters` without reading any reply.
    func send(_ method: String, _ parameters: [String: Any]) throws {
        send(try Self.message(method, parameters, more: false))
    }

    static func message(_ method: String, _ parameters: [String: Any], more: Bool) throws -> String {
        var message: [String: Any] = ["method": method, "parameters": parameters]
        if more { message["more"] = true }
        return String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self)
    }

    /// The next reply if one arrives within `seconds`, parsed; nil if none did.
    func reply(within seconds: Double) throws -> [String: Any]? {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, Int32(seconds * 1000)) == 1, let text = receive() else { return nil }
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }
}

/// A varlink reply's parts.
extension Dictionary where Key == String, Value == Any {
    var error: String? { self["error"] as? String }
    var parameters: [String: Any] { self["parameters"] as? [String: Any] ?? [:] }
    /// `value` of the parameters, as JSONSerialization reads it.
    var value: Any? { parameters["value"] }
    var source: String? { parameters["source"] as? String }
}

/// Polls `condition` every 20 ms for up to `seconds`; whether it became true.
func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        if try condition() { return true }
        usleep(20_000)
    } while Date() < deadline
    return try condition()
}

/// The system instance: `kvd --system`, under `systemd-socket-activate` or bound by hand.
final class SystemInstance {
    let process: ChildProcess
    let socket: String
    let logFile: String

    /// Starts it on `socket` (any old socket file removed first) with `state`; waits until it
    /// answers a call. Under `systemd-socket-activate`, the socket is made mode 0666 here, as the unit's
    /// `SocketMode=0666` would.
    init(socket: String, state: String, arguments: [String], activated: Bool, logFile: String) throws {
        self.socket = socket
        self.logFile = logFile
        unlink(socket)
        let kvdArguments = ["--system", "--state-dir", state] + arguments
        if activated {
            process = try ChildProcess(
                "/usr/bin/systemd-socket-activate", ["-l", socket, Binaries.kvd] + kvdArguments, stderr: logFile)
            let made = eventually(within: 10) { access(socket, F_OK) == 0 || !process.isRunning }
            guard made, chmod(socket, 0o666) == 0 else {
                throw TestFailure("systemd-socket-activate made no socket at \(socket)")
            }
        } else {
            process = try ChildProcess(Binaries.kvd, kvdArguments + ["--socket", socket], stderr: logFile)
        }
        try waitForListener(socket, of: process, log: errorOutput)
        // Under socket activation, the socket accepts before kvd runs: one answered call says it does.
        let client = try RawClient(socket)
        defer { client.close() }
        guard try client.call("org.varlink.service.GetInfo", [:]).error == nil else {
            throw TestFailure("kvd --system did not answer: \(errorOutput())")
        }
    }

    func errorOutput() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// Sends `signal` and waits (up to 20 s) for the exit; the exit status or 128+signal.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        process.signal(signal)
        return process.wait(timeout: 20)
    }

    deinit { stop() }
}

/// A user's own kvd, run as `account` (`setpriv`), with its socket and state in a folder of
/// that user's (mode 0700), following the system instance at `systemSocket`.
final class UserKvd {
    let account: TestAccount
    let folder: String
    let logFile: String
    let process: ChildProcess
    var socket: String { folder + "/kvd.sock" }
    var state: String { folder + "/state" }

    /// Starts it; `again`: in the folder a kvd of this user used before (its state kept).
    init(_ account: TestAccount, in root: String, systemSocket: String, idleExit: String = "0", again: Bool = false)
        throws
    {
        self.account = account
        folder = root + "/" + account.name
        logFile = root + "/" + account.name + (again ? "-again-\(UInt32.random(in: 0...UInt32.max))" : "") + ".log"
        guard again || (mkdir(folder, 0o700) == 0 && chown(folder, account.uid, account.gid) == 0) else {
            throw TestFailure("cannot make \(folder) for \(account.name): \(String(cString: strerror(errno)))")
        }
        let arguments = [
            "--socket", folder + "/kvd.sock", "--state-dir", folder + "/state", "--system-socket", systemSocket,
            "--idle-exit", idleExit,
        ]
        process = try ChildProcess(
            "/usr/bin/setpriv", asUser(account, home: folder, Binaries.kvd, arguments), stderr: logFile)
        try waitForListener(folder + "/kvd.sock", of: process, log: errorOutput)
    }

    func errorOutput() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// kvctl as this user, against this kvd.
    func kvctl(_ arguments: String...) throws -> Run { try kvctl(arguments) }

    func kvctl(_ arguments: [String]) throws -> Run {
        try run("/usr/bin/setpriv", asUser(account, home: folder, Binaries.kvctl, ["--socket", socket] + arguments))
    }

    /// A connection to this kvd, as its user.
    func connect() throws -> RawClient { try RawClient.connect(socket, as: account) }

    /// One call to this kvd, as its user, on a connection of its own.
    func call(_ method: String, _ parameters: [String: Any]) throws -> [String: Any] {
        let client = try connect()
        defer { client.close() }
        return try client.call(method, parameters)
    }

    func get(_ domain: String, _ key: String) throws -> [String: Any] {
        try call("io.kvd.Defaults.Get", ["domain": domain, "key": key])
    }

    /// Writes `text` to a file of this user's (readable by kvctl running as them); its path.
    func file(_ name: String, _ text: String) throws -> String {
        let path = folder + "/" + name
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        chown(path, account.uid, account.gid)
        return path
    }

    /// Stops it with SIGTERM; its exit status.
    @discardableResult
    func stop() -> Int32 {
        process.signal(SIGTERM)
        return process.wait(timeout: 10)
    }

    deinit { stop() }
}

/// `setpriv` arguments that run `program` as `account` (its uid, gid and groups) with `HOME`
/// = `home` and a clean environment, so nothing of the test's own (no `KVD_SOCKET`) leaks in.
func asUser(_ account: TestAccount, home: String, _ program: String, _ arguments: [String]) -> [String] {
    setprivArguments(
        uid: account.uid, gid: account.gid, home: home, environment: ["KVD_NO_AUTOSTART": "1"], program, arguments)
}
