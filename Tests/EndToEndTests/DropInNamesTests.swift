import Foundation
import Glibc
import Testing

/// Which names the system instance reads in the drop-in folders, what a misspelt directive, a BOM,
/// an unknown profile name and an unparsable file give, and what users and admins are told about a
/// key a file supplies or locks. Real files, a real system instance (root) and real users
/// (`setpriv`).
@Suite(.needsSystemAccounts)
struct DropInNamesTests {
    static let domain = "org.ex.lk"

    static func status(_ scene: SystemScene) throws -> String {
        try DropInTests.systemKvctl(scene, "status").stdout
    }

    /// kvctl as `user`, against their kvd, with the scene's system socket in its environment.
    static func userKvctl(_ scene: SystemScene, _ user: UserKvd, _ arguments: String...) throws -> Run {
        let environment = ["KVD_NO_AUTOSTART": "1", "KVD_SYSTEM_SOCKET": scene.systemSocket]
        return try DropInTrustTests.runAs(
            user.account, Binaries.kvctl, ["--socket", user.socket] + arguments, home: user.folder,
            environment: environment)
    }

    @Test func onlyPlainNamesAreReadInLocksDAndTheSkippedOnesAreListed() throws {
        let folder = DropInFolder()
        let names = [
            "50-l.old", "50-l.save", "50-l.disabled", "50-l.new", "50-l.dist", "50-l.json", "4913", "README", "NOTES",
        ]
        for (index, name) in names.enumerated() {
            try folder.write(folder.locks, name, "org.ex.lk key\(index)\n")
        }
        try folder.write(folder.locks, "60-read_me", "org.ex.lk read\n")
        try folder.write(folder.defaults, "50-d.disabled.json", #"{"org.ex.lk": {"off": 1}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        for index in names.indices {
            #expect(try user.kvctl("set", Self.domain, "key\(index)", "mine").status == 0, "\(names[index]) was read")
        }
        #expect(try user.kvctl("set", Self.domain, "read", "mine").status == 1)
        #expect(try user.get(Self.domain, "off").value == nil, "50-d.disabled.json was read")
        let status = try Self.status(scene)
        #expect(status.contains("skipped") && status.contains("50-l.disabled"), "\(status)")
        #expect(status.contains(folder.locks + "/README"), "a note about the folder is listed as skipped: \(status)")
    }

    @Test func aMisspeltDirectiveIsAnErrorAndTheFileIsNotRead() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-students", "For groups students\norg.ex.lk homepage\n")
        // The same in a defaults file: a member "For" is no domain, and "for" must name someone.
        try folder.write(
            folder.defaults, "50-students.json", #"{"For": {"groups": ["students"]}, "org.ex.lk": {"theme": "x"}}"#)
        try folder.write(folder.defaults, "60-nobody.json", #"{"for": {"groups": []}, "org.ex.lk": {"zoom": 3}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 0, "the file's locks reached everyone")
        #expect(try user.kvctl("set", "For", "groups students", "mine").status == 0)
        let status = try Self.status(scene)
        #expect(status.contains("50-students: line 1") && status.contains("for"), "\(status)")
        #expect(status.contains("50-students.json: ") && status.contains(#"misspelt "for""#), "\(status)")
        #expect(status.contains("60-nobody.json: ") && status.contains("reach nobody"), "\(status)")
        #expect(try user.get(Self.domain, "theme").value == nil)

        // kvctl apply shares the format: refused, nothing applied.
        let document = folder.path + "/apply.json"
        try #"{"For": {"groups": ["students"]}, "org.ex.lk": {"theme": "x"}}"#.write(
            toFile: document, atomically: false, encoding: .utf8)
        let applied = try user.kvctl("apply", document)
        #expect(applied.status != 0 && applied.stderr.contains(#"misspelt "for""#), "\(applied.stderr)")
        #expect(try user.get(Self.domain, "theme").value == nil)
    }

    @Test func aByteOrderMarkIsAcceptedAndStatusNeverShowsAFilesContent() throws {
        let folder = DropInFolder()
        try folder.write(folder.defaults, "10-bom.json", "\u{FEFF}" + #"{"org.ex.lk": {"theme": "dark"}}"#)
        try folder.write(folder.locks, "10-bom", "\u{FEFF}org.ex.lk theme\n")
        try folder.write(folder.defaults, "20-secret.json", "rootpassword:$y$secret\n")
        try folder.write(folder.locks, "20-secret", "Secret/Domain hunter2\n")
        try folder.write(folder.locks, "30-for", "for users kvd-e2e-nobody-such\norg.ex.lk zoom\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        let theme = try user.get(Self.domain, "theme")
        #expect(theme.value as? String == "dark" && theme.source == "locked", "\(theme)\n\(scene.logs())")
        let status = try Self.status(scene)
        #expect(status.contains("20-secret.json: ") && status.contains("20-secret: "), "\(status)")
        for secret in ["'r'", "root", "secret", "Secret", "hunter2"] {
            #expect(!status.replacingOccurrences(of: "20-secret", with: "").contains(secret), "\(secret): \(status)")
        }
        #expect(status.contains("30-for: ") && status.contains("kvd-e2e-nobody-such"), "\(status)")
    }

    @Test func theHintForAFileLockNamesTheFileAndTheRealAdminGroup() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.lk homepage\n")
        try folder.write(folder.defaults, "50-value.json", #"{"org.ex.lk": {"homepage": "school"}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        let set = try Self.userKvctl(scene, user, "set", Self.domain, "homepage", "mine")
        #expect(set.status == 1)
        for wanted in [folder.locks + "/50-lock", SystemAccounts.adminGroup] {
            #expect(set.stderr.contains(wanted), "\(wanted): \(set.stderr)")
        }
        #expect(!set.stderr.contains("kvd-admin ") && !set.stderr.contains("--system unlock"), "\(set.stderr)")
        let source = try Self.userKvctl(scene, user, "source", Self.domain, "homepage")
        for wanted in [folder.locks + "/50-lock", SystemAccounts.adminGroup] {
            #expect(source.stdout.contains(wanted), "\(wanted): \(source.stdout) \(source.stderr)")
        }
        #expect(!source.stdout.contains("--system unlock"), "\(source.stdout)")

        // An admin's lock: the hint is the unlock, with the real group.
        try scene.setAndLock(Self.domain, "zoom", 2)
        #expect(try eventually { try user.get(Self.domain, "zoom").source == "locked" })
        let zoom = try Self.userKvctl(scene, user, "set", Self.domain, "zoom", "-int", "3")
        #expect(zoom.stderr.contains("--system unlock") && zoom.stderr.contains(SystemAccounts.adminGroup), "\(zoom)")
    }

    @Test func systemGetSaysAFileSuppliesAKeyAndEffectiveShowsIt() throws {
        let folder = DropInFolder()
        try folder.write(folder.defaults, "10-x.json", #"{"org.ex.lk": {"theme": "dark"}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let plain = try DropInTests.systemKvctl(scene, "get", Self.domain, "theme")
        #expect(plain.status == 1, "\(plain)")
        #expect(
            plain.stderr.contains(folder.defaults + "/10-x.json") && plain.stderr.contains("--effective"), "\(plain)")
        let effective = try DropInTests.systemKvctl(scene, "get", Self.domain, "theme", "--effective")
        #expect(effective.status == 0 && effective.stdout == "dark\n", "\(effective)")
        #expect(try DropInTests.systemKvctl(scene, "set", Self.domain, "theme", "light").status == 0)
        #expect(try DropInTests.systemKvctl(scene, "get", Self.domain, "theme", "--effective").stdout == "light\n")
        let none = try DropInTests.systemKvctl(scene, "get", Self.domain, "other", "--effective")
        #expect(none.status == 1 && !none.stderr.contains("drop-in file"), "\(none)")
    }
}
