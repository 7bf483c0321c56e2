import Foundation
import Glibc
import Testing

/// A deleted secret can be forgotten, a key can keep no history, turning history off removes it,
/// and on the system instance History is the admins' alone.
@Suite struct SecretsTests {
    /// The state files whose bytes contain `text`.
    static func files(_ sandbox: Sandbox, containing text: String) -> [String] {
        sandbox.stateFiles().filter {
            (try? Data(contentsOf: URL(fileURLWithPath: sandbox.file($0))))?.range(of: Data(text.utf8)) != nil
        }
    }

    @Test func forgetRemovesADeletedSecretFromEveryFile() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "app", "token", "SECRET-1").status == 0)
        daemon.stop()  // folds the log: the secret is in app.history and app.json
        daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "app", "token", "SECRET-2").status == 0)
        #expect(try kvctl(sandbox, "set", "app", "theme", "dark").status == 0)
        #expect(try kvctl(sandbox, "delete", "app", "token").status == 0)
        #expect(try kvctl(sandbox, "history", "app", "token").stdout.contains("SECRET-2"))
        #expect(!Self.files(sandbox, containing: "SECRET").isEmpty)
        let forget = try kvctl(sandbox, "history", "--forget", "app", "token")
        #expect(forget.status == 0, "\(forget.stderr)")
        #expect(Self.files(sandbox, containing: "SECRET") == [], "a forgotten value is in no file of kvd's")
        let after = try kvctl(sandbox, "history", "app", "token")
        #expect(after.status == 0 && !after.stdout.contains("SECRET"), "\(after.stdout)")
        #expect(try kvctl(sandbox, "history", "app", "theme").stdout.contains("dark"), "other keys keep their history")
        daemon.stop(SIGKILL)
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        #expect(!(try kvctl(sandbox, "history", "app", "token").stdout.contains("SECRET")), "nor after a crash")
        #expect(Self.files(sandbox, containing: "SECRET") == [])
    }

    @Test func aKeyMarkedToKeepNoHistoryKeepsNone() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "app", "token", "OLD").status == 0)
        let mark = try kvctl(sandbox, "history", "--keep-none", "app", "token")
        #expect(mark.status == 0, "\(mark.stderr)")
        for round in 1...3 { #expect(try kvctl(sandbox, "set", "app", "token", "SECRET-\(round)").status == 0) }
        daemon.stop()
        #expect(Self.files(sandbox, containing: "SECRET") == ["app.json"], "only the current value is kept")
        #expect(Self.files(sandbox, containing: "OLD") == [])
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        let history = try kvctl(sandbox, "history", "app", "token")
        #expect(
            history.stdout.isEmpty && history.stderr.contains("marked to keep no history"),
            "the mark survives a restart: \(history)")
        #expect(try kvctl(sandbox, "history", "--keep", "app", "token").status == 0)
        #expect(try kvctl(sandbox, "set", "app", "token", "kept-now").status == 0)
        #expect(try kvctl(sandbox, "history", "app", "token").stdout.contains("kept-now"))
        let usage = try kvctl(sandbox, "history", "--forget", "--keep", "app")
        #expect(usage.status == 2 && usage.stderr.contains("one of --forget, --keep-none and --keep"), "\(usage)")
    }

    @Test func turningHistoryOffRemovesWhatWasKept() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "app", "token", "SECRET").status == 0)
        #expect(try kvctl(sandbox, "delete", "app", "token").status == 0)
        daemon.stop()
        #expect(Self.files(sandbox, containing: "SECRET") == ["app.history"])
        daemon = try Daemon(sandbox, extra: ["--history-keep", "0", "--history-days", "0"])
        daemon.stop()
        #expect(Self.files(sandbox, containing: "SECRET") == [])
        daemon = try Daemon(sandbox)
        defer { daemon.stop() }
        #expect(
            !(try kvctl(sandbox, "history", "app", "token").stdout.contains("SECRET")),
            "history on again does not serve it")
    }
}

/// On the system instance, History (past and deleted values, and who set them) and forgetting
/// are for root and the admins only.
@Suite(.needsSystemAccounts)
struct SystemHistoryTests {
    @Test func aNonAdminCannotReadAnAdminsDeletedValueOrWhoSetIt() throws {
        let scene = try SystemScene()
        let admin = scene.accounts.admin
        let set = try scene.systemCall(
            "io.kvd.Defaults.Set", ["domain": "org.ex.vpn", "key": "password", "value": "S3cret!"], as: admin)
        let delete = try scene.systemCall(
            "io.kvd.Defaults.Delete", ["domain": "org.ex.vpn", "key": "password"], as: admin)
        #expect(set.error == nil && delete.error == nil, "\(set) \(delete)")
        let other = scene.accounts.other
        let calls: [(String, [String: Any])] = [
            ("io.kvd.Defaults.History", ["domain": "org.ex.vpn"]),
            ("io.kvd.Defaults.History", ["domain": "org.ex.vpn", "key": "password", "atRevision": 1]),
            ("io.kvd.Defaults.ForgetHistory", ["domain": "org.ex.vpn"]),
            ("io.kvd.Defaults.KeepHistory", ["domain": "org.ex.vpn", "keep": false]),
        ]
        for (method, parameters) in calls {
            let reply = try scene.systemCall(method, parameters, as: other)
            #expect(reply.error == SystemLayerTests.permissionDenied, "\(method) as \(other.name): \(reply)")
            #expect(!"\(reply)".contains("S3cret"))
        }
        let history = try scene.systemCall("io.kvd.Defaults.History", ["domain": "org.ex.vpn"], as: admin)
        let entries = history.parameters["entries"] as? [[String: Any]] ?? []
        #expect(
            entries.contains { $0["value"] as? String == "S3cret!" && $0["uid"] as? Int == Int(admin.uid) },
            "an admin reads it: \(history)")
        let forget = try scene.systemCall(
            "io.kvd.Defaults.ForgetHistory", ["domain": "org.ex.vpn", "key": "password"], as: admin)
        #expect(forget.error == nil, "\(forget)")
        let after = try scene.systemCall("io.kvd.Defaults.History", ["domain": "org.ex.vpn"], as: admin)
        #expect(!"\(after)".contains("S3cret"), "\(after)")
    }
}
