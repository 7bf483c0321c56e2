import Foundation
import Glibc
import Testing

/// A drop-in folder of the system instance (`--config-dir`): root's, mode 0755, with
/// `defaults.d` and `locks.d`, as `/etc/kvd` would be. Removed at the end.
final class DropInFolder {
    let path: String
    var defaults: String { path + "/defaults.d" }
    var locks: String { path + "/locks.d" }

    init() {
        var template = Array("/tmp/kvd-e2e-dropins-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        chmod(path, 0o755)
        mkdir(defaults, 0o755)
        mkdir(locks, 0o755)
    }

    /// Writes `text` to `folder/name` as an admin's tool does: a temporary file renamed into place.
    func write(_ folder: String, _ name: String, _ text: String) throws {
        let temporary = folder + "/.\(name).tmp"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary, folder + "/" + name) == 0 else { throw TestFailure("rename into \(folder) failed") }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Drop-in defaults and locks read by the system instance (root, under `systemd-socket-activate`),
/// reaching users' kvds and apps (real users through `setpriv`).
@Suite(.needsSystemAccounts)
struct DropInTests {
    static let domain = "org.ex.browser"

    /// kvctl --system as root, against the scene's system instance.
    static func systemKvctl(_ scene: SystemScene, _ arguments: String...) throws -> Run {
        try run(Binaries.kvctl, ["--socket", scene.systemSocket, "--system"] + arguments)
    }

    /// The changes of one Watch reply: key → (value as text, source).
    static func changes(_ reply: [String: Any]?) -> [String: String] {
        let items = reply?.parameters["changes"] as? [[String: Any]] ?? []
        return items.reduce(into: [:]) { result, item in
            let value = item["value"].map { "\($0)" } ?? "(removed)"
            result[item["key"] as? String ?? "?"] = value + " " + (item["source"] as? String ?? "user")
        }
    }

    @Test func filesCombineInNameOrderABadFileAndDotfilesAreSkippedAndLocksHoldForEveryWritePath() throws {
        let folder = DropInFolder()
        try folder.write(folder.defaults, "10-base.json", #"{"org.ex.browser": {"homepage": "a", "fontsize": 12}}"#)
        try folder.write(folder.defaults, "50-site.json", #"{"org.ex.browser": {"homepage": "b"}}"#)
        try folder.write(folder.defaults, "60-bad.json", #"{"org.ex.browser": {"homepage": "#)
        try folder.write(folder.defaults, "70-site.json~", #"{"org.ex.browser": {"homepage": "backup"}}"#)
        try folder.write(folder.defaults, "80-site.json.dpkg-old", #"{"org.ex.browser": {"homepage": "old"}}"#)
        try folder.write(folder.defaults, ".90-hidden.json", #"{"org.ex.browser": {"homepage": "hidden"}}"#)
        try folder.write(folder.locks, "50-browser", "# the homepage is the school's\norg.ex.browser homepage\n")
        try folder.write(folder.locks, "60-mail", "org.ex.mail *\norg.ex.browser proxy.*\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)

        let homepage = try user.get(Self.domain, "homepage")
        #expect(homepage.value as? String == "b" && homepage.source == "locked", "\(homepage)\n\(scene.logs())")
        let fontsize = try user.get(Self.domain, "fontsize")
        #expect(fontsize.value as? Int == 12 && fontsize.source == "system", "\(fontsize)")

        // Locks from a file refuse every write path: set, delete, import, a glob, a whole domain.
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)
        #expect(try user.kvctl("delete", Self.domain, "homepage").status == 1)
        #expect(try user.kvctl("set", Self.domain, "proxy.host", "evil").status == 1)
        #expect(try user.kvctl("set", "org.ex.mail", "server", "evil").status == 1)
        let file = try user.file("import.json", #"{"homepage": "imported", "fontsize": 20}"#)
        #expect(try user.kvctl("import", Self.domain, file).status == 1)
        #expect(try user.get(Self.domain, "homepage").value as? String == "b")
        #expect(try user.get(Self.domain, "fontsize").value as? Int == 20, "the unlocked key was imported")
        #expect(try user.get(Self.domain, "proxy.host").value == nil)
        #expect(try user.kvctl("set", Self.domain, "zoom", "-int", "2").status == 0, "an unlocked key")

        let status = try Self.systemKvctl(scene, "status")
        #expect(status.stdout.contains("60-bad.json"), "\(status.stdout)")
        #expect(status.stdout.contains("10-base.json") && status.stdout.contains("50-site.json"))
        #expect(
            !status.stdout.contains("hidden") && !status.stdout.contains("json~") && !status.stdout.contains("dpkg"))
        #expect(scene.system!.errorOutput().contains("60-bad.json"), "the bad file is named in the log")
        let refused = try scene.systemCall("io.kvd.System.Reload", [:], as: scene.accounts.other)
        #expect(refused.error == "org.varlink.service.PermissionDenied", "a non-admin's Reload: \(refused)")
        let source = try Self.systemKvctl(scene, "source", Self.domain, "homepage")
        #expect(
            source.stdout.contains(folder.defaults + "/50-site.json")
                && source.stdout.contains(folder.locks + "/50-browser"),
            "\(source.stdout) \(source.stderr)")

        // The admins' layer is above the files', and neither overwrites the other.
        #expect(try Self.systemKvctl(scene, "set", Self.domain, "homepage", "admin's").status == 0)
        #expect(try eventually { try user.get(Self.domain, "homepage").value as? String == "admin's" })
        #expect(try Self.systemKvctl(scene, "source", Self.domain, "homepage").stdout.contains("admin"))
        #expect(try Self.systemKvctl(scene, "delete", Self.domain, "homepage").status == 0)
        #expect(
            try eventually { try user.get(Self.domain, "homepage").value as? String == "b" },
            "an admin's delete uncovers the file's value")
        #expect(try Self.systemKvctl(scene, "lock", Self.domain, "homepage").status == 0)
        #expect(try Self.systemKvctl(scene, "unlock", Self.domain, "homepage").status == 0)
        #expect(try Self.systemKvctl(scene, "set", Self.domain, "marker", "after the unlock").status == 0)
        #expect(try eventually { try user.get(Self.domain, "marker").value as? String == "after the unlock" })
        #expect(try user.get(Self.domain, "homepage").source == "locked", "the file's lock outlives an admin's unlock")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)
    }

    /// The files that change for `kvctl --system reload` and SIGHUP are reached through
    /// symbolic links (followed) to a folder nobody watches, so only the reload asked for reads
    /// them; the last change is a file renamed into a watched folder.
    @Test func aReloadReachesEveryUsersWatcherAsOneChangeSetFromTheCallSighupAndTheFolders() throws {
        let folder = DropInFolder()
        let managed = folder.path + "/managed"
        mkdir(managed, 0o755)
        try folder.write(folder.defaults, "10-base.json", #"{"org.ex.browser": {"homepage": "a", "fontsize": 12}}"#)
        try "{}".write(toFile: managed + "/defaults.json", atomically: false, encoding: .utf8)
        try "".write(toFile: managed + "/locks", atomically: false, encoding: .utf8)
        symlink(managed + "/defaults.json", folder.defaults + "/30-managed.json")
        symlink(managed + "/locks", folder.locks + "/30-managed")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let users = [try scene.startUser(scene.accounts.user), try scene.startUser(scene.accounts.other)]
        var watchers: [RawClient] = []
        defer { for watcher in watchers { watcher.close() } }
        for user in users {
            let watcher = try user.connect()
            let initial = try watcher.call("io.kvd.Defaults.Watch", ["domain": Self.domain], more: true)
            #expect(Self.changes(initial) == ["homepage": "a system", "fontsize": "12 system"], "\(initial)")
            watchers.append(watcher)
        }

        // kvctl --system reload: three values and a lock, from two files, as one change set.
        try #"{"org.ex.browser": {"homepage": "b", "fontsize": 14, "theme": "dark"}}"#.write(
            toFile: managed + "/defaults.json", atomically: false, encoding: .utf8)
        try "org.ex.browser fontsize\n".write(toFile: managed + "/locks", atomically: false, encoding: .utf8)
        let reload = try Self.systemKvctl(scene, "reload")
        #expect(reload.status == 0, "\(reload.stdout) \(reload.stderr)")
        for watcher in watchers {
            let seen = try watcher.reply(within: 10)
            #expect(
                Self.changes(seen) == ["homepage": "b system", "fontsize": "14 locked", "theme": "dark system"],
                "one change set: \(String(describing: seen))\n\(scene.logs())")
        }

        // SIGHUP (systemctl reload kvd-system).
        try "{}".write(toFile: managed + "/defaults.json", atomically: false, encoding: .utf8)
        scene.system!.process.signal(SIGHUP)
        for watcher in watchers {
            let seen = try watcher.reply(within: 10)
            #expect(
                Self.changes(seen) == ["homepage": "a system", "fontsize": "12 locked", "theme": "(removed) user"],
                "\(String(describing: seen))\n\(scene.logs())")
        }
        #expect(scene.system!.process.isRunning, "SIGHUP does not stop the system instance")

        // A file renamed into a watched folder is read without being asked (inotify).
        try folder.write(folder.locks, "20-homepage", "org.ex.browser homepage\n")
        for watcher in watchers {
            let seen = try watcher.reply(within: 10)
            #expect(Self.changes(seen) == ["homepage": "a locked"], "\(String(describing: seen))\n\(scene.logs())")
        }
        #expect(try users[0].kvctl("set", Self.domain, "homepage", "mine").status == 1)
    }

    /// A crash between a change of the files and the reload (SIGKILL): the files are the truth,
    /// so the restarted system instance gives users the whole new combination, as one change set,
    /// at a newer system revision (the marker it commits at start), never half of it.
    @Test func afterASigkillBeforeTheReloadTheRestartGivesTheWholeNewCombinationAtANewerRevision() throws {
        let folder = DropInFolder()
        let managed = folder.path + "/managed"
        mkdir(managed, 0o755)
        try #"{"org.ex.browser": {"homepage": "a", "fontsize": 12}}"#.write(
            toFile: managed + "/defaults.json", atomically: false, encoding: .utf8)
        symlink(managed + "/defaults.json", folder.defaults + "/30-managed.json")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        let watcher = try user.connect()
        defer { watcher.close() }
        let initial = try watcher.call("io.kvd.Defaults.Watch", ["domain": Self.domain], more: true)
        #expect(Self.changes(initial) == ["homepage": "a system", "fontsize": "12 system"], "\(initial)")
        let before = initial.parameters["systemRevision"] as? Int ?? -1

        try #"{"org.ex.browser": {"homepage": "b", "fontsize": 14, "theme": "dark"}}"#.write(
            toFile: managed + "/defaults.json", atomically: false, encoding: .utf8)
        scene.system!.stop(SIGKILL)
        scene.system = try scene.startSystem()
        let seen = try watcher.reply(within: 15)
        #expect(
            Self.changes(seen) == ["homepage": "b system", "fontsize": "14 system", "theme": "dark system"],
            "\(String(describing: seen))\n\(scene.logs())")
        let after = seen?.parameters["systemRevision"] as? Int ?? -1
        #expect(after > before, "the new combination came at system revision \(after), not after \(before)")
    }

    /// Profiles: a file `"for"` some groups or users reaches only their kvds, decided by the
    /// system instance from each mirror's peer credentials (two real users and a member of a
    /// real group, through `setpriv --init-groups`).
    @Test func aFileForAGroupOrAUserReachesOnlyThem() throws {
        let folder = DropInFolder()
        let group = SystemAccounts.adminGroup
        try folder.write(folder.defaults, "10-base.json", #"{"org.ex.browser": {"homepage": "all"}}"#)
        try folder.write(
            folder.defaults, "50-group.json",
            #"{"for": {"groups": ["\#(group)"]}, "org.ex.browser": {"homepage": "group's"}}"#)
        try folder.write(folder.locks, "50-group", "for groups \(group)\norg.ex.browser homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        try folder.write(
            folder.defaults, "60-user.json",
            #"{"for": {"users": ["\#(scene.accounts.user.name)"]}, "org.ex.browser": {"zoom": 2}}"#)
        #expect(try Self.systemKvctl(scene, "reload").status == 0)
        let user = try scene.startUser(scene.accounts.user)
        let member = try scene.startUser(scene.accounts.admin)
        let other = try scene.startUser(scene.accounts.other)

        let userHome = try user.get(Self.domain, "homepage")
        #expect(userHome.value as? String == "all" && userHome.source == "system", "\(userHome)\n\(scene.logs())")
        #expect(try user.get(Self.domain, "zoom").value as? Int == 2)
        #expect(
            try user.kvctl("set", Self.domain, "homepage", "mine").status == 0, "the group's lock is not the user's")
        let memberHome = try member.get(Self.domain, "homepage")
        #expect(memberHome.value as? String == "group's" && memberHome.source == "locked", "\(memberHome)")
        #expect(try member.get(Self.domain, "zoom").value == nil, "the user's file reached a member of the group")
        #expect(try member.kvctl("set", Self.domain, "homepage", "mine").status == 1)
        #expect(try other.get(Self.domain, "homepage").value as? String == "all")
        #expect(try other.get(Self.domain, "zoom").value == nil, "the user's file reached another user")

        // A reload reaches each profile with its own difference.
        try folder.write(
            folder.defaults, "60-user.json",
            #"{"for": {"users": ["\#(scene.accounts.user.name)"]}, "org.ex.browser": {"zoom": 3}}"#)
        try folder.write(folder.defaults, "20-all.json", #"{"org.ex.browser": {"theme": "dark"}}"#)
        #expect(try eventually { try user.get(Self.domain, "zoom").value as? Int == 3 })
        #expect(try eventually { try other.get(Self.domain, "theme").value as? String == "dark" })
        #expect(try eventually { try member.get(Self.domain, "theme").value as? String == "dark" })
        #expect(try other.get(Self.domain, "zoom").value == nil && member.get(Self.domain, "zoom").value == nil)
    }

    @Test func aUsersKvdKeepsTheFilesLayerWhileTheSystemInstanceIsAway() throws {
        let folder = DropInFolder()
        try folder.write(folder.defaults, "10-base.json", #"{"org.ex.browser": {"homepage": "school"}}"#)
        try folder.write(folder.locks, "10-browser", "org.ex.browser homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        var user = try scene.startUser(scene.accounts.user)
        #expect(try user.get(Self.domain, "homepage").source == "locked")
        #expect(scene.system!.stop() == 0)
        scene.system = nil
        user = try scene.restart(user)
        #expect(try user.get(Self.domain, "homepage").value as? String == "school")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(user.errorOutput())")
    }
}
