import Foundation
import Glibc
import Testing

/// Who made each change, with the real kvd and the real programs that made it: `kvctl blame`,
/// `kvctl history` and `kvctl watch` name the program (kvctl itself, a KVClient program), its
/// pid and uid; unknown where history does not say, and forgotten with history.
@Suite struct BlameEndToEndTests {
    /// `kvctl --json blame DOMAIN [KEY]`, as objects.
    static func blame(_ sandbox: Sandbox, _ arguments: String...) throws -> [[String: Any]] {
        let run = try run(Binaries.kvctl, ["--socket", sandbox.socket, "--json", "blame"] + arguments)
        guard run.status == 0 else { throw TestFailure("kvctl blame failed: \(run.stderr)") }
        return try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as! [[String: Any]]
    }

    static func writer(_ entry: [String: Any]?) -> [String: Any]? { entry?["writer"] as? [String: Any] }

    /// The path kvd names a program by: its executable's, links resolved (`/proc/PID/exe`), as
    /// `.build/release` is a link to the triple's folder.
    static func named(_ path: String) -> String { URL(fileURLWithPath: path).resolvingSymlinksInPath().path }

    @Test func blameAndHistoryNameKvctlWithItsPidAndUidAcrossARestart() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.blame", "theme", "dark").status == 0)
        let entry = try #require(try Self.blame(sandbox, "com.example.blame").first)
        let writer = try #require(Self.writer(entry), "\(entry)")
        #expect(writer["program"] as? String == Self.named(Binaries.kvctl), "\(writer)")
        #expect((writer["pid"] as? Int ?? 0) > 0 && writer["uid"] as? Int == Int(getuid()), "\(writer)")
        daemon.stop()  // folds the log: the writer now comes from the history file
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        let history = try HistoryEndToEndTests.history(sandbox, "com.example.blame")
        #expect(history.map { Self.writer($0)?["program"] as? String } == [Self.named(Binaries.kvctl)], "\(history)")
        let table = try kvctl(sandbox, "blame", "com.example.blame")
        let lines = table.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("KEY") == true && lines.count == 2, "\(table.stdout)")
        #expect(lines.last?.contains("\(Self.named(Binaries.kvctl)) (pid ") == true, "\(table.stdout)")
        let plain = try kvctl(sandbox, "history", "com.example.blame")
        #expect(plain.stdout.contains("\(Self.named(Binaries.kvctl)) (pid "), "\(plain.stdout)")
    }

    @Test func aKVClientProgramIsNamed() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        let probe = Binaries.directory + "/kvclient-probe"
        let run = try run(
            probe, ["--socket", sandbox.socket, "--domain", "com.example.probe"], input: "set volume 7\nquit\n")
        #expect(run.stdout.hasPrefix("ok"), "\(run.stdout) \(run.stderr)")
        let entry = try #require(try Self.blame(sandbox, "com.example.probe", "volume").first)
        #expect(Self.writer(entry)?["program"] as? String == Self.named(probe), "\(entry)")
    }

    @Test func watchSaysWhoMadeEachChange() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        #expect(try kvctl(sandbox, "set", "com.example.watched", "a", "first").status == 0)
        let watch = try Interactive(Binaries.kvctl, ["--socket", sandbox.socket, "watch", "com.example.watched"])
        let json = try Interactive(
            Binaries.kvctl, ["--socket", sandbox.socket, "--json", "watch", "com.example.watched"])
        #expect(watch.line() == #"a = "first""#, "the current values: no writer")
        _ = json.line()
        #expect(try kvctl(sandbox, "set", "com.example.watched", "a", "second").status == 0)
        let line = try #require(watch.line())
        #expect(line.hasPrefix(#"a = "second"  by \#(Self.named(Binaries.kvctl)) (pid "#), "\(line)")
        #expect(line.hasSuffix("uid \(getuid()))"), "\(line)")
        let object = try #require(json.line())
        #expect(
            object.contains(#""writer":{"#) && object.contains(#""program":"\#(Self.named(Binaries.kvctl))""#),
            "\(object)")
    }

    @Test func unknownWhereHistoryDoesNotSayAndForgottenWithIt() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        #expect(try kvctl(sandbox, "set", "com.example.secret", "token", "abc").status == 0)
        #expect(try kvctl(sandbox, "set", "com.example.secret", "theme", "dark").status == 0)
        #expect(try kvctl(sandbox, "history", "--keep-none", "com.example.secret", "token").status == 0)
        var entries = try Self.blame(sandbox, "com.example.secret")
        #expect(entries.map { $0["key"] as? String } == ["theme", "token"])
        #expect(Self.writer(entries.first) != nil && Self.writer(entries.last) == nil, "\(entries)")
        #expect(try kvctl(sandbox, "history", "--forget", "com.example.secret").status == 0)
        entries = try Self.blame(sandbox, "com.example.secret")
        #expect(entries.allSatisfy { Self.writer($0) == nil }, "forgotten with history: \(entries)")
        #expect(
            sandbox.stateFiles().allSatisfy { name in
                (try? String(contentsOfFile: sandbox.state + "/" + name, encoding: .isoLatin1))?.contains(
                    Self.named(Binaries.kvctl)) != true
            }, "no file names the writer")
        let table = try kvctl(sandbox, "blame", "com.example.secret", "theme")
        #expect(table.stdout.split(separator: "\n").last?.hasSuffix("unknown") == true, "\(table.stdout)")
        #expect(try kvctl(sandbox, "blame", "com.example.none").status == 1)
    }
}

/// The system instance shows who made a change to admins only: a user watching it is told the
/// change, never its writer, and may not ask `Blame`; root sees the admin who made it.
@Suite(.needsSystemAccounts)
struct SystemBlameEndToEndTests {
    @Test func onlyAdminsSeeWhoChangedTheSystemInstance() throws {
        let scene = try SystemScene()
        let (admin, other) = (scene.accounts.admin, scene.accounts.other)
        let domain = "com.example.audited"
        let set = ["domain": domain, "key": "k"]
        #expect(try scene.systemCall("io.kvd.Defaults.Set", set.merging(["value": "first"]) { $1 }).error == nil)
        let watchArguments = ["--system", "--socket", scene.systemSocket, "watch", domain]
        let user = try Interactive(
            "/usr/bin/setpriv", asUser(other, home: scene.root, Binaries.kvctl, watchArguments))
        let root = try Interactive(Binaries.kvctl, watchArguments)
        #expect(user.line() == #"k = "first""# && root.line() == #"k = "first""#)
        let change = try scene.systemCall(
            "io.kvd.Defaults.Set", set.merging(["value": "second"]) { $1 }, as: admin)
        #expect(change.error == nil, "\(change)")
        #expect(user.line() == #"k = "second""#, "a user is not told who made an admin's change")
        let seen = try #require(root.line())
        #expect(seen.hasPrefix(#"k = "second"  by "#) && seen.hasSuffix("uid \(admin.uid))"), "\(seen)")
        let refused = try scene.systemCall("io.kvd.Defaults.Blame", ["domain": domain], as: other)
        #expect(refused.error == "org.varlink.service.PermissionDenied", "\(refused)")
        let blame = try scene.systemCall("io.kvd.Defaults.Blame", ["domain": domain])
        let entries = blame.parameters["entries"] as? [[String: Any]] ?? []
        #expect((entries.first?["writer"] as? [String: Any])?["uid"] as? Int == Int(admin.uid), "\(blame)")
    }
}
