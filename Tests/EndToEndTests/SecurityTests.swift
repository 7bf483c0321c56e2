import Foundation
import Glibc
import Synchronization
import Testing

/// Local users on this machine, made with `useradd` for one test and removed with `userdel`
/// afterwards: one plays the victim who runs kvctl, the other the user who plants a socket folder.
final class LocalUser {
    let name: String
    let uid: UInt32
    let gid: UInt32
    /// A home folder of its own, removed at deinit.
    let home: String

    /// Whether users can be made and switched to here (root only).
    static var available: Bool {
        getuid() == 0 && access("/usr/sbin/useradd", X_OK) == 0 && access("/usr/bin/setpriv", X_OK) == 0
    }

    init(role: String) throws {
        name = "kvd\(role)\(getpid() % 100_000)"
        let added = try run(
            "/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
        guard added.status == 0, let entry = getpwnam(name) else {
            throw TestFailure("useradd \(name) failed: \(added.stderr)")
        }
        uid = entry.pointee.pw_uid
        gid = entry.pointee.pw_gid
        var template = Array("/tmp/kvd-home-XXXXXX".utf8CString)
        home = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        chown(home, uid, gid)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: home)
        _ = try? run("/usr/sbin/userdel", [name])
    }

    /// Runs `program` as this user (`setpriv`) with a home, a `PATH` and `environment`: nothing
    /// of the test's own environment (no `XDG_RUNTIME_DIR`, no `KVD_SOCKET`).
    func runAs(_ program: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        try run(
            "/usr/bin/setpriv",
            setprivArguments(uid: uid, gid: gid, home: home, environment: environment, program, arguments))
    }

    /// Makes `path` as this user, with `mode` (not masked by a umask).
    func makeFolder(_ path: String, mode: String) throws {
        let made = try runAs("/bin/mkdir", ["-m", mode, path])
        guard made.status == 0 else { throw TestFailure("mkdir \(path) as \(name) failed: \(made.stderr)") }
    }
}

/// A listener planted in another user's socket folder: records what any client sends it, then
/// hangs up without answering.
final class PlantedListener: Sendable {
    let path: String
    let fd: Int32
    private let received = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(at path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard withUnixAddress(path, { bind(fd, $0, $1) }) == 0, listen(fd, 8) == 0 else {
            throw TestFailure("cannot listen on \(path): \(String(cString: strerror(errno)))")
        }
        chmod(path, 0o777)
        let listener = fd
        DispatchQueue.global().async { [self] in
            let client = accept(listener, nil, nil)
            if client >= 0 {
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var buffer = [UInt8](repeating: 0, count: 65_536)
                let count = recv(client, &buffer, buffer.count, 0)
                if count > 0 { self.received.withLock { $0 += buffer[..<count] } }
                close(client)
            }
            self.done.signal()
        }
    }

    /// Stops listening and returns what was received.
    func stop() -> String {
        shutdown(fd, Int32(SHUT_RDWR))
        done.wait()
        close(fd)
        return received.withLock { String(decoding: $0, as: UTF8.self) }
    }
}

/// Sends SIGTERM to every kvd started with `--socket socket` (an autostarted one), and waits
/// for each to exit.
func stopDaemons(listeningOn socket: String) {
    let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for pid in processes.compactMap(Int32.init) {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
        let words = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard words.first?.hasSuffix("/kvd") == true, let index = words.firstIndex(of: "--socket"),
            index + 1 < words.count, words[index + 1] == socket
        else { continue }
        kill(pid, SIGTERM)
        for _ in 0..<500 where kill(pid, 0) == 0 { usleep(10_000) }
    }
}

/// With no `XDG_RUNTIME_DIR` and no `KVD_SOCKET`, the socket is in `/tmp/kvd-<uid>`, which any
/// local user can make first. The real programs, run as a freshly made user, must refuse such a
/// folder: send nothing there, start no kvd there.
@Suite(.serialized, .enabled(if: LocalUser.available, "needs root, useradd and setpriv to play two local users"))
struct SocketFolderOfAnotherUserTests {
    /// The victim, the intruder and the folder the intruder planted for the victim, mode 0777.
    final class Scene {
        let victim: LocalUser
        let intruder: LocalUser
        var folder: String { "/tmp/kvd-\(victim.uid)" }
        var socket: String { folder + "/kvd.sock" }

        init() throws {
            victim = try LocalUser(role: "v")
            intruder = try LocalUser(role: "i")
            try? FileManager.default.removeItem(atPath: folder)
            try intruder.makeFolder(folder, mode: "0777")
        }

        deinit {
            stopDaemons(listeningOn: socket)
            try? FileManager.default.removeItem(atPath: folder)
        }

        /// The victim's environment: no runtime folder, no KVD_SOCKET, state in its home.
        var environment: [String: String] { ["KVD_STATE_DIR": victim.home + "/state"] }
    }

    @Test func kvctlSendsNothingToAListenerInAFolderAnotherUserMade() throws {
        let scene = try Scene()
        let listener = try PlantedListener(at: scene.socket)
        let set = try scene.victim.runAs(
            Binaries.kvctl, ["set", "com.example.mail", "password", "hunter2"], environment: scene.environment)
        let received = listener.stop()
        #expect(received.isEmpty, "kvctl sent \(received) to the other user's socket")
        #expect(set.status == 1)
        #expect(
            set.stderr.contains(scene.folder) && set.stderr.contains("belongs to uid \(scene.intruder.uid)"),
            "\(set.stderr)")
        #expect(set.stderr.split(separator: "\n").count == 1, "one line: \(set.stderr)")
    }

    @Test func kvctlStartsNoKvdInAFolderAnotherUserMade() throws {
        let scene = try Scene()
        // A dead socket: what a kvd killed there would leave.
        let dead = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(withUnixAddress(scene.socket, { bind(dead, $0, $1) }) == 0)
        close(dead)
        chmod(scene.socket, 0o777)
        let set = try scene.victim.runAs(
            Binaries.kvctl, ["set", "com.example.mail", "password", "hunter2"], environment: scene.environment)
        #expect(set.status == 1, "kvctl autostarted kvd into the other user's folder: \(set.stdout)\(set.stderr)")
        #expect(set.stderr.contains(scene.folder), "\(set.stderr)")
        #expect((try? RawClient.connect(scene.socket)) == nil, "a kvd listens in the other user's folder")
        #expect(access(scene.victim.home + "/state/kvd.lock", F_OK) != 0, "a kvd was started")
    }

    @Test func kvdRefusesToListenInAFolderAnotherUserMade() throws {
        let scene = try Scene()
        let started = try scene.victim.runAs(Binaries.kvd, ["--idle-exit", "1"], environment: scene.environment)
        #expect(started.status == 1, "kvd served from the other user's folder: \(started.stderr)")
        #expect(
            started.stderr.contains(scene.folder) && started.stderr.contains("belongs to uid \(scene.intruder.uid)"),
            "\(started.stderr)")
    }

    @Test func habitsRefusesAFolderAnotherUserMade() throws {
        let scene = try Scene()
        let listener = try PlantedListener(at: scene.socket)
        let added = try scene.victim.runAs(
            Binaries.directory + "/habits", ["add", "Secret"], environment: scene.environment)
        #expect(listener.stop().isEmpty)
        #expect(added.status == 1)
        #expect(added.stderr.contains(scene.folder), "\(added.stderr)")
    }
}

/// kvd's state folder must be its user's alone, and kvd never writes through a link planted in it.
@Suite struct StateFolderSafetyTests {
    @Test func aLinkPlantedAtTheTemporaryFileIsNotFollowedAndCompactionStillWorks() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.d", "k", "v").status == 0)
        let target = sandbox.root + "/target"
        try "untouched\n".write(toFile: target, atomically: false, encoding: .utf8)
        #expect(symlink(target, sandbox.file(".com.example.d.json.tmp")) == 0)
        #expect(daemon.stop() == 0, "\(daemon.errorOutput())")  // stopping compacts the log into the domain files
        #expect(
            try String(contentsOfFile: target, encoding: .utf8) == "untouched\n", "kvd wrote through the planted link")
        #expect(
            sandbox.read("com.example.d.json")?.contains(#""k": "v""#) == true,
            "compaction did not write the domain file")
        #expect(!daemon.errorOutput().contains("compaction"), "\(daemon.errorOutput())")
        let again = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "get", "com.example.d", "k").stdout == "v\n")
        again.stop()
    }

    @Test func aStateFolderOthersCanWriteIsRefused() throws {
        let sandbox = Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        chmod(sandbox.state, 0o777)
        let started = try run(
            Binaries.kvd, ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--idle-exit", "1"])
        #expect(started.status == 1, "kvd used a state folder of mode 0777: \(started.stderr)")
        #expect(started.stderr.contains(sandbox.state) && started.stderr.contains("0777"), "\(started.stderr)")
        #expect(!sandbox.stateFiles().contains("kvd.lock"))
    }

    @Test(.enabled(if: getuid() == 0, "needs root to give a folder to another user"))
    func aStateFolderOfAnotherUserIsRefused() throws {
        let sandbox = Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        let stranger: UInt32 = 4_000_017
        #expect(chown(sandbox.state, stranger, stranger) == 0)
        let started = try run(
            Binaries.kvd, ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--idle-exit", "1"])
        #expect(started.status == 1, "kvd used a state folder of uid \(stranger): \(started.stderr)")
        #expect(
            started.stderr.contains(sandbox.state) && started.stderr.contains("uid \(stranger)"), "\(started.stderr)")
        #expect(!sandbox.stateFiles().contains("kvd.lock"))
    }
}

/// An empty path option (a script's unset variable) is a usage error, never the default path with
/// the user's real data.
@Suite struct EmptyPathOptionTests {
    /// A sandbox whose `HOME` is inside it, so the defaults would land there, and whose
    /// `KVD_SOCKET` has a kvd behind it: what an empty option would fall back to.
    final class Scene {
        let sandbox = Sandbox()
        var home: String { sandbox.root + "/home" }
        var environment: [String: String] {
            ["HOME": home, "KVD_SOCKET": sandbox.socket, "XDG_RUNTIME_DIR": "", "XDG_CONFIG_HOME": ""]
        }
    }

    @Test(arguments: [["--state-dir", ""], ["--state-dir="], ["--socket", ""], ["--socket="]])
    func kvdRefusesAnEmptyPath(arguments: [String]) throws {
        let scene = Scene()
        let started = try run(Binaries.kvd, arguments + ["--idle-exit", "1"], environment: scene.environment)
        #expect(started.status == 2, "kvd \(arguments) ran: \(started.stderr)")
        #expect(started.stderr.hasPrefix("kvd: \(arguments[0].prefix { $0 != "=" }) needs a"), "\(started.stderr)")
        #expect(started.stderr.contains("empty"), "\(started.stderr)")
        #expect(access(scene.home, F_OK) != 0, "kvd created its default state folder")
    }

    @Test(arguments: [["--socket="], ["--socket", ""]])
    func kvctlAndHabitsRefuseAnEmptySocket(arguments: [String]) throws {
        let scene = Scene()
        let daemon = try Daemon(scene.sandbox)
        let set = try run(
            Binaries.kvctl, arguments + ["set", "com.example.x", "k", "v"], environment: scene.environment)
        #expect(set.status == 2, "kvctl \(arguments) wrote to the default socket: \(set.stderr)")
        #expect(set.stderr.contains("--socket needs a PATH") && set.stderr.contains("empty"), "\(set.stderr)")
        let habits = try run(Binaries.directory + "/habits", arguments + ["add", "X"], environment: scene.environment)
        #expect(habits.status == 2, "habits \(arguments) wrote to the default socket: \(habits.stderr)")
        #expect(habits.stderr.contains("--socket needs a PATH") && habits.stderr.contains("empty"), "\(habits.stderr)")
        #expect(try kvctl(scene.sandbox, "domains").stdout == "", "something was written")
        daemon.stop()
    }
}

/// What kvctl starts or writes must not act for its caller.
@Suite struct ClientSideEffectTests {
    @Test func anAutostartedKvdDoesNotTalkToTheCallersServiceManager() throws {
        let sandbox = Sandbox()
        let notify = SystemdTests.NotifySocket(in: sandbox)
        var timeout = timeval(tv_sec: 0, tv_usec: 300_000)
        setsockopt(notify.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // What systemd gives a service that runs kvctl: kvd must take none of it as its own.
        let callersState = sandbox.root + "/callers-state"
        let environment = [
            "KVD_NO_AUTOSTART": "", "HOME": sandbox.root + "/home", "XDG_CONFIG_HOME": "", "KVD_STATE_DIR": "",
            "STATE_DIRECTORY": callersState, "NOTIFY_SOCKET": notify.path,
            "WATCHDOG_USEC": "100000", "LISTEN_FDS": "1", "LISTEN_PID": String(getpid()),
        ]
        let set = try run(
            Binaries.kvctl, ["--socket", sandbox.socket, "set", "com.example.auto", "k", "v"], environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        // A watchdog ping would come within 50 ms: any message ends the first wait at once, the
        // socket's 300 ms receive timeout bounds it; the second takes what stopping kvd sends.
        var messages = notify.waitFor("never sent")
        stopDaemons(listeningOn: sandbox.socket)
        messages += notify.waitFor("never sent")
        #expect(messages.isEmpty, "the autostarted kvd told the caller's service manager: \(messages)")
        #expect(access(callersState, F_OK) != 0, "the autostarted kvd kept its state in the caller's StateDirectory")
        #expect(
            access(sandbox.root + "/home/.config/kvd/com.example.auto.json", F_OK) == 0, "kvd did not use ~/.config/kvd"
        )
    }

    /// A kvd for `sandbox` whose domain com.example.e holds `key` = `value`.
    private func daemon(_ sandbox: Sandbox, holding key: String, _ value: String) throws -> Daemon {
        let daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.e", key, value).status == 0)
        return daemon
    }

    /// `kvctl export` of com.example.e over `file`.
    private func export(_ sandbox: Sandbox, to file: String) throws -> Run {
        try kvctl(sandbox, "export", "com.example.e", file)
    }

    /// Writes `{}` to `path` and gives it `permissions`.
    private func placeFile(_ path: String, permissions: mode_t) throws {
        try "{}\n".write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, permissions)
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode : 0
    }

    @Test func exportKeepsTheModeAndOwnerOfAnExistingFile() throws {
        let sandbox = Sandbox()
        let daemon = try daemon(sandbox, holding: "password", "hunter2")
        let file = sandbox.root + "/secret.json"
        try placeFile(file, permissions: 0o600)
        let owner: UInt32 = getuid() == 0 ? 4_000_018 : getuid()
        chown(file, owner, owner)
        let exported = try export(sandbox, to: file)
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(mode(file) & 0o7777 == 0o600, "mode became \(String(mode(file) & 0o7777, radix: 8))")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_uid == owner && info.st_gid == owner)
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("hunter2"))
        daemon.stop()
    }

    @Test func exportWritesThroughASymbolicLinkAndCreatesNewFilesPrivate() throws {
        let sandbox = Sandbox()
        let daemon = try daemon(sandbox, holding: "k", "v")
        let target = sandbox.root + "/target.json"
        try placeFile(target, permissions: 0o640)
        let link = sandbox.root + "/link.json"
        #expect(symlink(target, link) == 0)
        #expect(try export(sandbox, to: link).status == 0)
        #expect(mode(link) & S_IFMT == S_IFLNK, "the link was replaced by a file")
        #expect(try String(contentsOfFile: target, encoding: .utf8).contains(#""k""#))
        #expect(mode(target) & 0o7777 == 0o640)
        let fresh = sandbox.root + "/new.json"
        #expect(try export(sandbox, to: fresh).status == 0)
        #expect(
            mode(fresh) & 0o777 == 0o600, "a new export is \(String(mode(fresh) & 0o777, radix: 8)), readable by others"
        )
        let dangling = sandbox.root + "/dangling.json"
        #expect(symlink(sandbox.root + "/missing/x.json", dangling) == 0)
        let refused = try export(sandbox, to: dangling)
        #expect(refused.status == 1 && refused.stderr.contains("symbolic link"), "\(refused.stderr)")
        #expect(mode(dangling) & S_IFMT == S_IFLNK)
        daemon.stop()
    }
}
