import Foundation
import Glibc
import Testing

/// The programs under test, in a folder every test user can reach.
///
/// They are found beside the test bundle (`swift build` puts them together) or in `KVD_BIN_DIR`.
/// That folder may sit in a checkout other users cannot enter (root's home and Debian 12's new
/// homes are 0700, as is every `mktemp -d`), and the multi-user tests run programs as other uids;
/// so when any folder above the built programs is closed to others, they are copied once per run
/// into a 0755 folder under `/tmp`, removed when the test process exits. The user's own folders are
/// never loosened. `.ci/run` runs `make test` from a clone inside a 0700 folder, so a test that
/// reaches past this breaks CI.
enum Binaries {
    /// The programs the end-to-end tests run (copied together: kvctl finds kvctl-plist beside it).
    static let programs = ["kvd", "kvctl", "kvctl-plist", "habits", "kvclient-probe"]

    /// Where the built programs are (not necessarily reachable by other users).
    static let built: String = {
        if let dir = ProcessInfo.processInfo.environment["KVD_BIN_DIR"], !dir.isEmpty { return dir }
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("kvd").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url.path
    }()

    /// `built`, or a copy of its programs in a folder every user can search and read.
    static let directory: String = {
        if everyoneCanReach(built) { return built }
        var template = Array("/tmp/kvd-e2e-bin-XXXXXX".utf8CString)
        let copy = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        chmod(copy, 0o755)
        for program in programs where FileManager.default.fileExists(atPath: built + "/" + program) {
            try! FileManager.default.copyItem(atPath: built + "/" + program, toPath: copy + "/" + program)
            chmod(copy + "/" + program, 0o755)
        }
        copiedFolder = strdup(copy)
        atexit {
            if let folder = Binaries.copiedFolder {
                _ = try? FileManager.default.removeItem(atPath: String(cString: folder))
            }
        }
        return copy
    }()

    /// The copy's folder, for the exit handler (a C string: `atexit` takes no context).
    nonisolated(unsafe) private static var copiedFolder: UnsafeMutablePointer<CChar>?

    /// Whether every folder from `/` down to `path` lets others search it (mode `o+x`).
    static func everyoneCanReach(_ path: String) -> Bool {
        var folder = URL(fileURLWithPath: path).standardizedFileURL
        while true {
            var status = stat()
            guard stat(folder.path, &status) == 0, status.st_mode & 0o001 != 0 else { return false }
            if folder.path == "/" { return true }
            folder.deleteLastPathComponent()
        }
    }

    static var kvd: String { directory + "/kvd" }
    static var kvctl: String { directory + "/kvctl" }
}

/// A private folder for one test: state, socket; removed when the test ends.
final class Sandbox {
    let root: String
    var state: String { root + "/state" }
    var socket: String { root + "/kvd.sock" }

    init() {
        var template = Array("/tmp/kvd-e2e-XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    func file(_ name: String) -> String { state + "/" + name }

    func write(_ name: String, _ text: String) throws {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try text.write(toFile: file(name), atomically: false, encoding: .utf8)
    }

    func read(_ name: String) -> String? { try? String(contentsOfFile: file(name), encoding: .utf8) }

    func stateFiles() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []).sorted() }
}

/// A child process started with `posix_spawn` and reaped with `waitpid`.
///
/// Not Foundation's `Process`: its child monitor can sit in a blocking `wait4` on one child
/// (a daemon that keeps running) and leave another (a finished kvctl) unreaped, hanging the test.
final class ChildProcess {
    let pid: pid_t
    private var status: Int32?

    /// Starts `program`; standard streams come from and go to the given files (`/dev/null` if nil).
    init(
        _ program: String, _ arguments: [String], environment: [String: String]? = nil,
        stdin: String? = nil, stdout: String? = nil, stderr: String? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        let env = environment ?? ProcessInfo.processInfo.environment
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, program, &actions, nil, argv, envp)
        guard result == 0 else { throw TestFailure("cannot start \(program): \(String(cString: strerror(result)))") }
        pid = child
    }

    /// Whether the child is still running (reaps it if it has exited).
    var isRunning: Bool {
        guard status == nil else { return false }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return true }
        status = Self.decode(raw)
        return false
    }

    /// The exit status, or 128 + signal; nil while running.
    var exitStatus: Int32? { isRunning ? nil : status }

    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits up to `timeout` seconds; then SIGKILLs and returns -1.
    @discardableResult
    func wait(timeout: Double) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning, Date() < deadline { usleep(5_000) }
        if let status { return status }
        kill(pid, SIGKILL)
        var raw: Int32 = 0
        waitpid(pid, &raw, 0)
        status = Self.decode(raw)
        return -1
    }

    private static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7F
        return signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            var raw: Int32 = 0
            waitpid(pid, &raw, 0)
        }
    }
}

/// A running daemon: started by hand or under `systemd-socket-activate`; killed at deinit.
final class Daemon {
    let process: ChildProcess
    let sandbox: Sandbox
    /// kvd's standard error, one file per start.
    let logFile: String

    enum Mode { case byHand, socketActivated }

    init(_ sandbox: Sandbox, mode: Mode = .byHand, idleExit: Double = 0, extra: [String] = []) throws {
        self.sandbox = sandbox
        logFile = sandbox.root + "/kvd-\(UInt32.random(in: 0...UInt32.max)).log"
        let daemonArguments = ["--state-dir", sandbox.state, "--idle-exit", String(idleExit)] + extra
        switch mode {
        case .byHand:
            process = try ChildProcess(Binaries.kvd, ["--socket", sandbox.socket] + daemonArguments, stderr: logFile)
        case .socketActivated:
            unlink(sandbox.socket)
            process = try ChildProcess(
                "/usr/bin/systemd-socket-activate", ["-l", sandbox.socket, Binaries.kvd] + daemonArguments,
                stderr: logFile)
        }
        try waitForSocket()
    }

    /// Waits until the socket accepts connections (the daemon, or systemd's stand-in, listens).
    func waitForSocket(timeout: Double = 10) throws {
        try waitForListener(sandbox.socket, of: process, timeout: timeout, log: errorOutput)
    }

    /// What kvd has logged so far.
    func errorOutput() -> String {
        (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
    }

    /// Sends `signal` and waits for the exit; returns the exit status (or 128+signal).
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, timeout: Double = 20) -> Int32 {
        process.signal(signal)
        return waitForExit(timeout: timeout)
    }

    @discardableResult
    func waitForExit(timeout: Double) -> Int32 {
        process.wait(timeout: timeout)
    }
}

/// Waits until `socket` accepts connections; fails early, with `log()`, if `process` exits.
func waitForListener(_ socket: String, of process: ChildProcess, timeout: Double = 10, log: () -> String) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if let fd = try? RawClient.connect(socket) {
            close(fd)
            return
        }
        guard process.isRunning else { throw TestFailure("kvd exited early: \(log())") }
        usleep(10_000)
    }
    throw TestFailure("kvd did not listen on \(socket) within \(timeout) s")
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The result of running a program to its end.
struct Run {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `kvctl` (or another program) with `arguments`, feeding `input`, and waits (up to a
/// minute) for it. Output goes through files, so a grandchild (an autostarted kvd) holding a
/// descriptor cannot make the test wait.
func run(
    _ program: String = Binaries.kvctl, _ arguments: [String], input: String? = nil, environment: [String: String] = [:]
) throws -> Run {
    var template = Array("/tmp/kvd-run-XXXXXX".utf8CString)
    let folder = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    defer { try? FileManager.default.removeItem(atPath: folder) }
    var env = ProcessInfo.processInfo.environment
    env["KVD_NO_AUTOSTART"] = "1"
    for (name, value) in environment { env[name] = value }
    try (input ?? "").write(toFile: folder + "/in", atomically: false, encoding: .utf8)
    let child = try ChildProcess(
        program, arguments, environment: env, stdin: folder + "/in", stdout: folder + "/out", stderr: folder + "/err")
    let status = child.wait(timeout: 60)
    func text(_ name: String) -> String { (try? String(contentsOfFile: folder + "/" + name, encoding: .utf8)) ?? "" }
    return Run(status: status, stdout: text("out"), stderr: text("err"))
}

/// kvctl against the sandbox's socket.
func kvctl(_ sandbox: Sandbox, _ arguments: String..., input: String? = nil) throws -> Run {
    try run(Binaries.kvctl, ["--socket", sandbox.socket] + arguments, input: input)
}

/// Calls `body` with `path` as a socket address (`connect`, `bind`).
func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8)
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A bare varlink client over a blocking Unix socket, for sending exactly the bytes a test wants.
struct RawClient {
    let fd: Int32

    /// Connects to `path`. The socket is close-on-exec: a program a test starts meanwhile must not
    /// inherit other tests' connections (500 of them filled a kvd's 64-descriptor limit).
    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let result = withUnixAddress(path) { Glibc.connect(fd, $0, $1) }
        guard result == 0 else {
            let error = errno
            Glibc.close(fd)
            throw TestFailure("connect \(path): \(String(cString: strerror(error)))")
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    init(_ path: String) throws {
        fd = try Self.connect(path)
    }

    func close() { Glibc.close(fd) }

    /// Sends raw bytes; returns false if the daemon closed the connection.
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    func send(_ text: String) { send(Array(text.utf8) + [0]) }

    /// Reads one NUL-terminated reply; `nil` if the connection closed first.
    func receive() -> String? {
        var message: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n <= 0 { return nil }
            if byte == 0 { return String(decoding: message, as: UTF8.self) }
            message.append(byte)
        }
    }

    /// One call, one reply, parsed as a JSON object.
    func call(_ text: String) throws -> [String: Any] {
        send(text)
        guard let reply = receive() else {
            throw TestFailure("connection closed instead of a reply to \(text.prefix(100))")
        }
        return try JSONSerialization.jsonObject(with: Data(reply.utf8)) as! [String: Any]
    }
}

/// `setpriv` arguments that run `program` as `uid`/`gid` with that user's groups
/// (`--init-groups`), a home, a `PATH` and `environment`: nothing of the test's own environment
/// (no `XDG_RUNTIME_DIR`, no `KVD_SOCKET`).
func setprivArguments(
    uid: UInt32, gid: UInt32, home: String, environment: [String: String], _ program: String, _ arguments: [String]
) -> [String] {
    var clean = ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"]
    for (key, value) in environment { clean[key] = value }
    let command = ["/usr/bin/env", "-i"] + clean.map { "\($0.key)=\($0.value)" } + [program] + arguments
    return ["--reuid", String(uid), "--regid", String(gid), "--init-groups", "--"] + command
}

/// A client that writes on its own thread, one `step` after another (given its connection and
/// a rising index from `first`), until ``stop()``, which waits for the thread to end.
final class BackgroundWriter: @unchecked Sendable {  // `stopped` is guarded by `lock`
    private let lock = NSLock()
    private var stopped = false
    private let client: RawClient
    private var thread: Thread?

    init(_ sandbox: Sandbox, first: Int = 0, step: @escaping @Sendable (RawClient, Int) -> Void) throws {
        client = try RawClient(sandbox.socket)
        let thread = Thread { [self] in
            var index = first
            while !lock.withLock({ stopped }) {
                step(client, index)
                index += 1
            }
        }
        self.thread = thread
        thread.start()
    }

    func stop() {
        lock.withLock { stopped = true }
        while thread?.isFinished == false { usleep(1000) }
        client.close()
    }
}

extension RawClient {
    /// Reads and drops everything until the daemon closes the connection (true) or the receive
    /// timeout passes (false).
    func drainUntilClosed() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    /// Send and receive timeouts, so a test never hangs on a daemon that stopped reading.
    func setTimeouts(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }
}
