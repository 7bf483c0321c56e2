import Foundation
import Glibc
import Testing

/// `kvctl apply FILE [--check] [--diff] [--prune]`, desired state from the shell, against a real
/// kvd (a user's) and a real system instance with a real second user.
struct ApplyTests {
    static let file = #"{"org.ex.app": {"k1": "new", "k2": "keep"}, "org.ex.other": {"x": 1}}"#

    static func write(_ sandbox: Sandbox, _ name: String, _ text: String) throws -> String {
        let path = sandbox.root + "/" + name
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    @Test func checkDiffPruneAndApplyOnAUsersKvd() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, extra: ["--no-system-layer"])
        defer { daemon.stop() }
        for (key, value) in [("k1", "old"), ("k2", "keep"), ("k3", "extra")] {
            #expect(try kvctl(sandbox, "set", "org.ex.app", key, value).status == 0)
        }
        let file = try Self.write(sandbox, "desired.json", Self.file)

        let check = try kvctl(sandbox, "apply", file, "--check", "--diff")
        #expect(check.status == 1, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout == "org.ex.app k1: \"old\" -> \"new\"\norg.ex.other x: (none) -> 1\n", "\(check.stdout)")
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k1").stdout == "old\n", "--check changed something")
        let pruning = try kvctl(sandbox, "apply", "--check", "--prune", "--diff", file)
        #expect(pruning.status == 1 && pruning.stdout.contains("org.ex.app k3: \"extra\" -> (none)\n"), "\(pruning)")

        #expect(try kvctl(sandbox, "apply", file).status == 0)
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k1").stdout == "new\n")
        #expect(try kvctl(sandbox, "get", "org.ex.other", "x").stdout == "1\n")
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k3").stdout == "extra\n", "without --prune, k3 stays")
        let equal = try kvctl(sandbox, "apply", file, "--check")
        #expect(equal.status == 0 && equal.stdout.isEmpty, "\(equal)")
        #expect(try kvctl(sandbox, "apply", file, "--check", "--prune").status == 1)

        // --prune with a change: one Apply, so both at one revision.
        let newer = try Self.write(sandbox, "newer.json", #"{"org.ex.app": {"k1": "newer", "k2": "keep"}}"#)
        #expect(try kvctl(sandbox, "apply", newer, "--prune").status == 0)
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k3").status == 1, "--prune removed k3")
        let history = try kvctl(sandbox, "history", "org.ex.app", "--json")
        let entries = try JSONSerialization.jsonObject(with: Data(history.stdout.utf8)) as? [[String: Any]] ?? []
        let revisions = Dictionary(grouping: entries.prefix(2), by: { $0["key"] as? String ?? "" })
            .mapValues { $0.compactMap { $0["revision"] as? Int } }
        #expect(revisions["k1"] != nil && revisions["k1"] == revisions["k3"], "not one Apply: \(history.stdout)")
        #expect(try kvctl(sandbox, "apply", newer, "--check", "--prune").status == 0)
    }

    @Test func aBadFileChangesNothingAndCheckTellsAFailureFromADifference() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, extra: ["--no-system-layer"])
        defer { daemon.stop() }
        #expect(try kvctl(sandbox, "set", "org.ex.app", "k1", "old").status == 0)
        for text in [#"{"org.ex.app": {"k1": "#, #"{"org.ex.app": {"k1": null}}"#, #"{"../x": {"k": 1}}"#, "[1]"] {
            let file = try Self.write(sandbox, "bad.json", text)
            let applied = try kvctl(sandbox, "apply", file)
            #expect(applied.status == 1 && applied.stderr.contains("bad.json"), "\(text): \(applied)")
            #expect(try kvctl(sandbox, "apply", file, "--check").status == 3, "\(text)")
        }
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k1").stdout == "old\n")
        #expect(try kvctl(sandbox, "apply", sandbox.root + "/missing.json", "--check").status == 3)
        #expect(try kvctl(sandbox, "apply", "--check").status == 2)
        #expect(try kvctl(sandbox, "apply", "f.json", "--force").status == 2)
    }

    /// A drop-in file's `"for"` member names whom the file is for, never a domain: apply refuses
    /// such a file (a profile is the system instance's), as it reads one with a byte order mark as
    /// the drop-in files are read.
    @Test func aFileForSomeUsersIsRefusedAndABomIsAccepted() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, extra: ["--no-system-layer"])
        defer { daemon.stop() }
        let file = try Self.write(
            sandbox, "profile.json", #"{"for": {"groups": ["advb_staff"]}, "org.ex.app": {"k1": "new"}}"#)
        let check = try kvctl(sandbox, "apply", file, "--check", "--diff")
        #expect(check.status == 3 && check.stderr.contains("\"for\""), "\(check)")
        #expect(!check.stdout.contains("for "), "\(check.stdout)")
        let applied = try kvctl(sandbox, "apply", file)
        #expect(applied.status == 1 && applied.stderr.contains("\"for\""), "\(applied)")
        #expect(try kvctl(sandbox, "domains").stdout.isEmpty, "a domain was made")
        let bom = try Self.write(sandbox, "bom.json", "\u{FEFF}" + #"{"org.ex.app": {"k1": "bom"}}"#)
        #expect(try kvctl(sandbox, "apply", bom).status == 0)
        #expect(try kvctl(sandbox, "get", "org.ex.app", "k1").stdout == "bom\n")
    }

    @Test(.needsSystemAccounts)
    func withSystemItSetsTheAdminsLayerAndAUsersApplyLeavesOutALockedKey() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        let desired = #"{"org.ex.browser": {"homepage": "school", "fontsize": 12}}"#
        let path = scene.root + "/system-desired.json"
        try desired.write(toFile: path, atomically: false, encoding: .utf8)
        let system = { (arguments: [String]) in
            try run(Binaries.kvctl, ["--socket", scene.systemSocket, "--system"] + arguments)
        }
        #expect(try system(["apply", path, "--check"]).status == 1)
        #expect(try system(["apply", path]).status == 0)
        #expect(try system(["apply", path, "--check"]).status == 0)
        #expect(try system(["lock", "org.ex.browser", "homepage"]).status == 0)
        #expect(try eventually { try user.get("org.ex.browser", "homepage").source == "locked" })

        let mine = try user.file("mine.json", #"{"org.ex.browser": {"homepage": "mine", "fontsize": 16}}"#)
        let check = try user.kvctl("apply", mine, "--check", "--diff")
        #expect(check.status == 3 && check.stderr.contains("homepage"), "\(check)")
        #expect(check.stdout == "org.ex.browser fontsize: (none) -> 16\n", "\(check.stdout)")
        let applied = try user.kvctl("apply", mine)
        #expect(applied.status == 1 && applied.stderr.contains("homepage"), "\(applied)")
        #expect(try user.get("org.ex.browser", "fontsize").value as? Int == 16, "the rest is applied")
        #expect(try user.get("org.ex.browser", "homepage").value as? String == "school")
        let same = try user.file("same.json", #"{"org.ex.browser": {"homepage": "school", "fontsize": 16}}"#)
        #expect(try user.kvctl("apply", same, "--check").status == 0, "a locked key already as wanted is no change")
        #expect(
            try system(["apply", path, "--check", "--prune"]).status == 0, "the user's apply left the system alone")
    }
}
