import CLinux
import Foundation
import Glibc
import Synchronization
import Testing

/// A real etcd cluster for one test or suite: members on 127.0.0.1 high ports, data in a private
/// temp folder, started as child processes; `stop()` kills them and removes the folder.
///
/// Flags: short heartbeat (50 ms) and election timeout (500 ms) so elections after a kill take
/// well under a second; `--experimental-watch-progress-notify-interval` (etcd 3.4.11+) so idle
/// watches get progress notifications every ``progressInterval``; `--unsafe-no-fsync` (3.4.10+):
/// a test cluster need not survive power loss, and fsync dominates its write latency.
final class EtcdCluster: @unchecked Sendable {
    static let etcd = "/usr/bin/etcd"
    static let etcdctl = "/usr/bin/etcdctl"
    static var isInstalled: Bool { access(etcd, X_OK) == 0 && access(etcdctl, X_OK) == 0 }
    static let notInstalled = Comment(
        rawValue: "etcd is not installed: run scripts/install-deps.sh (Debian's etcd-server and etcd-client)")

    /// The cluster a suite's ``SharedEtcdCluster`` trait started.
    @TaskLocal static var shared: EtcdCluster?

    let folder: String
    let clientURLs: [String]
    let progressInterval: Duration = .milliseconds(500)
    private var arguments: [[String]]
    private let lock = NSLock()
    private var members: [SpawnedProcess?]

    /// With `tls`, the certificate authority (PEM) that signed the members' https certificates.
    let caFile: String?

    /// Starts `count` members (with `extraFlags` each) and waits until every one is healthy.
    /// `tls`: clients reach the members over https, with a certificate for 127.0.0.1 signed by a
    /// throwaway authority (``caFile``) made with openssl.
    init(members count: Int = 3, extraFlags: [String] = [], tls: Bool = false) throws {
        Self.removeOrphans()
        var template = Array("/tmp/kvd-etcd-XXXXXX".utf8CString)
        let folder = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        self.folder = folder
        let ports = try freePorts(2 * count)
        let peers = (0..<count).map { "m\($0)=http://127.0.0.1:\(ports[2 * $0 + 1])" }.joined(separator: ",")
        let scheme = tls ? "https" : "http"
        let clientURLs = (0..<count).map { "\(scheme)://127.0.0.1:\(ports[2 * $0])" }
        self.clientURLs = clientURLs
        caFile = tls ? try Self.makeCertificates(in: folder) : nil
        let tlsFlags = tls ? ["--cert-file", "\(folder)/server.pem", "--key-file", "\(folder)/server.key"] : []
        arguments = (0..<count).map { index in
            let client = clientURLs[index]
            let peer = "http://127.0.0.1:\(ports[2 * index + 1])"
            return [
                "--name", "m\(index)", "--data-dir", "\(folder)/m\(index)",
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", peers, "--initial-cluster-state", "new",
                "--initial-cluster-token", URL(fileURLWithPath: folder).lastPathComponent,
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--experimental-watch-progress-notify-interval", "500ms",
                "--unsafe-no-fsync", "--logger", "zap", "--log-level", "warn",
            ] + tlsFlags + extraFlags
        }
        members = Array(repeating: nil, count: count)
        try String(getpid()).write(toFile: "\(folder)/owner", atomically: true, encoding: .utf8)
        try Data().write(to: URL(fileURLWithPath: "\(folder)/pids"))
        for index in 0..<count { try start(index) }
        try waitUntilHealthy()
    }

    deinit { stop() }

    /// Kills every member and removes the folder. Safe to call twice.
    func stop() {
        let running = lock.withLock { () -> [SpawnedProcess?] in
            defer { members = members.map { _ in nil } }
            return members
        }
        for case let process? in running {
            process.signal(SIGCONT)
            process.signal(SIGKILL)
            process.reap()
        }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Starts member `index` again (after a kill) with its data folder.
    func start(_ index: Int) throws {
        let process = try SpawnedProcess(Self.etcd, arguments[index], output: "\(folder)/m\(index).log")
        lock.withLock { members[index] = process }
        // For removeOrphans, should this test process die without stopping the cluster.
        if let pids = FileHandle(forUpdatingAtPath: "\(folder)/pids") {
            pids.seekToEndOfFile()
            pids.write(Data("\(process.pid)\n".utf8))
            try? pids.close()
        }
    }

    /// Kills every member, removes their data folders and starts them again: a new cluster on
    /// the same URLs, its revision back to 1; with `newToken`, another `--initial-cluster-token`
    /// (so another cluster ID). Waits until it is healthy.
    func wipe(newToken: String? = nil) throws {
        for index in clientURLs.indices { signal(SIGKILL, member: index) }
        for index in clientURLs.indices { try FileManager.default.removeItem(atPath: "\(folder)/m\(index)") }
        if let newToken {
            arguments = arguments.map { flags in
                var flags = flags
                if let at = flags.firstIndex(of: "--initial-cluster-token") { flags[at + 1] = newToken }
                return flags
            }
        }
        for index in clientURLs.indices { try start(index) }
        try waitUntilHealthy()
    }

    /// A certificate authority and a server certificate for 127.0.0.1 it signed, in `folder`
    /// (`ca.pem`, `server.pem`, `server.key`); returns the authority's file.
    static func makeCertificates(in folder: String) throws -> String {
        let script = """
            set -e
            cd "$1"
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=kvd test authority"
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1"
            printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
            """
        let status = try SpawnedProcess("/bin/sh", ["-c", script, "sh", folder], output: "\(folder)/openssl.log").reap()
        guard status == 0 else {
            throw ClusterFailure(
                "openssl could not make the test certificates: \((try? String(contentsOfFile: "\(folder)/openssl.log", encoding: .utf8)) ?? "")"
            )
        }
        return "\(folder)/ca.pem"
    }

    /// Sends `signal` (SIGKILL, SIGSTOP, SIGCONT) to member `index`; after SIGKILL, reaps it.
    func signal(_ signal: Int32, member index: Int) {
        guard let process = lock.withLock({ members[index] }) else { return }
        process.signal(signal)
        if signal == SIGKILL {
            process.reap()
            lock.withLock { members[index] = nil }
        }
    }

    /// Runs etcdctl (API 3) against `endpoints` (default: every member); returns its exit status
    /// and output (standard output and error together).
    @discardableResult
    func etcdctl(_ arguments: [String], endpoints: [String]? = nil) throws -> (status: Int32, output: String) {
        let output = "\(folder)/etcdctl-\(UInt32.random(in: 0...UInt32.max)).out"
        defer { unlink(output) }
        var environment = ProcessInfo.processInfo.environment
        environment["ETCDCTL_API"] = "3"
        let all =
            [
                "--endpoints", (endpoints ?? clientURLs).joined(separator: ","), "--dial-timeout", "2s",
                "--command-timeout", "5s",
            ]
            + (caFile.map { ["--cacert", $0] } ?? [])
        let process = try SpawnedProcess(Self.etcdctl, all + arguments, output: output, environment: environment)
        let status = process.reap()
        return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// Runs etcdctl and fails the test when it exits with an error.
    @discardableResult
    func mustEtcdctl(_ arguments: [String], endpoints: [String]? = nil) throws -> String {
        let (status, output) = try etcdctl(arguments, endpoints: endpoints)
        guard status == 0 else {
            throw ClusterFailure("etcdctl \(arguments.joined(separator: " ")) exited with \(status): \(output)")
        }
        return output
    }

    /// Kills the members of clusters whose test process died (crashed, or was killed) before it
    /// could stop them, and removes their folders: each folder names its owner and its members'
    /// pids, and a pid is killed only while its command line still names that folder.
    static func removeOrphans() {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: "/tmp")) ?? []
        for name in folders where name.hasPrefix("kvd-etcd-") {
            let folder = "/tmp/\(name)"
            guard let owner = try? String(contentsOfFile: "\(folder)/owner", encoding: .utf8), let pid = pid_t(owner),
                kill(pid, 0) != 0, errno == ESRCH
            else { continue }
            let pids = (try? String(contentsOfFile: "\(folder)/pids", encoding: .utf8)) ?? ""
            for member in pids.split(separator: "\n").compactMap({ pid_t($0) }) {
                let command = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(member)/cmdline"))) ?? Data()
                if String(decoding: command, as: UTF8.self).contains(folder + "/") { kill(member, SIGKILL) }
            }
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    /// A member that is not the leader (so killing it needs no election), from `etcdctl endpoint
    /// status` (its fifth column says whether the member is the leader).
    func follower() throws -> Int {
        let output = try mustEtcdctl(["endpoint", "status"])
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if fields.count > 4, fields[4] == "false", let index = clientURLs.firstIndex(of: fields[0]) { return index }
        }
        throw ClusterFailure("no follower in etcdctl endpoint status: \(output)")
    }

    /// The client URLs with member `first` first (a gateway starts with its first endpoint).
    func endpoints(startingWith first: Int) -> [String] {
        [clientURLs[first]] + clientURLs.indices.filter { $0 != first }.map { clientURLs[$0] }
    }

    /// Polls `etcdctl endpoint health` on the running members for up to 60 s (a loaded machine can take long to elect after SIGCONT).
    func waitUntilHealthy(members indexes: [Int]? = nil) throws {
        let endpoints = (indexes ?? Array(clientURLs.indices)).map { clientURLs[$0] }
        let deadline = Date().addingTimeInterval(60)
        var last = ""
        while Date() < deadline {
            let (status, output) = try etcdctl(["endpoint", "health"], endpoints: endpoints)
            if status == 0 { return }
            last = output
            usleep(100_000)
        }
        let logs = clientURLs.indices.map {
            "m\($0): " + ((try? String(contentsOfFile: "\(folder)/m\($0).log", encoding: .utf8)) ?? "").suffix(1500)
        }
        throw ClusterFailure("etcd did not become healthy within 60 s: \(last)\nlogs: \(logs.joined(separator: "\n"))")
    }
}

struct ClusterFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Ports this process has handed to etcd members, never handed out again: a member killed by a
/// test and started again later gets its port back, and no cluster started meanwhile can take it
/// (when ports came from binding port 0, the kernel could hand a stopped member's port to the
/// next cluster, and the restarted member's clients met another cluster).
private let handedOutPorts = Mutex<Set<Int>>([])

/// Free TCP ports on 127.0.0.1, below the kernel's ephemeral range (32768-60999 here), so that no
/// socket bound to port 0 takes one either: picked at random from 20000-32767, never one this
/// process handed out before, each checked by binding it (then released: etcd binds it next).
private func freePorts(_ count: Int) throws -> [Int] {
    try handedOutPorts.withLock { handed in
        var ports: [Int] = []
        for _ in 0..<10_000 where ports.count < count {
            let port = Int.random(in: 20_000...32_767)
            guard !handed.contains(port), canBind(port) else { continue }
            handed.insert(port)
            ports.append(port)
        }
        guard ports.count == count else { throw ClusterFailure("cannot find \(count) free ports in 20000-32767") }
        return ports
    }
}

/// Whether a TCP socket can bind 127.0.0.1:`port` now (it is closed again at once).
private func canBind(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// A child process started with posix_spawn; its output goes to a file.
final class SpawnedProcess: @unchecked Sendable {
    let pid: pid_t
    private var status: Int32?

    init(_ program: String, _ arguments: [String], output: String, environment: [String: String]? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)  // no other test's descriptor lives on in the child
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([program] + arguments).map { strdup($0) } + [nil]
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var child: pid_t = 0
        let result = posix_spawn(&child, program, &actions, nil, argv, envp)
        guard result == 0 else { throw ClusterFailure("cannot start \(program): \(String(cString: strerror(result)))") }
        pid = child
    }

    func signal(_ signal: Int32) {
        if status == nil { kill(pid, signal) }
    }

    /// Waits for the process to end; its exit status, or 128 + the signal that ended it.
    @discardableResult
    func reap() -> Int32 {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        let signal = raw & 0x7F
        let status = signal == 0 ? (raw >> 8) & 0xFF : 128 + signal
        self.status = status
        return status
    }
}

/// Starts one cluster for a whole suite (visible to its tests as ``EtcdCluster/shared``) and
/// stops it when the suite ends.
struct SharedEtcdCluster: SuiteTrait, TestScoping {
    var members: Int
    var extraFlags: [String]
    /// Runs once the cluster is healthy, before the suite's tests.
    var setup: (@Sendable (EtcdCluster) throws -> Void)?

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void)
        async throws
    {
        guard EtcdCluster.isInstalled else { return try await function() }
        let cluster = try EtcdCluster(members: members, extraFlags: extraFlags)
        defer { cluster.stop() }
        try setup?(cluster)
        try await EtcdCluster.$shared.withValue(cluster) { try await function() }
    }
}

extension Trait where Self == SharedEtcdCluster {
    static func etcdCluster(
        members: Int = 3, extraFlags: [String] = [], setup: (@Sendable (EtcdCluster) throws -> Void)? = nil
    ) -> Self {
        SharedEtcdCluster(members: members, extraFlags: extraFlags, setup: setup)
    }
}

/// Runs blocking work (gateway calls) on its own thread, so it does not hold one of the few
/// threads of Swift's cooperative pool that the parallel tests share.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
