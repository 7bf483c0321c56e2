import Foundation
import Glibc
import Testing

/// Which drop-in files and folders the system instance trusts (owner and mode of each file, of each
/// folder from the config folder down, and of the folders above it), and that a file or folder it
/// stops trusting, or that stops parsing, keeps its last good content, also across a restart of the
/// system instance. Real files, a real system instance (root) and real users (`setpriv`).
@Suite(.needsSystemAccounts)
struct DropInTrustTests {
    static let domain = "org.ex.keep"

    static func status(_ scene: SystemScene) throws -> String {
        try DropInTests.systemKvctl(scene, "status").stdout
    }

    /// Runs `program` as `account` (a hostile local user, say), with `HOME` = `home` and
    /// nothing else of the test's environment but `environment`.
    static func runAs(
        _ account: TestAccount, _ program: String, _ arguments: [String], home: String = "/",
        environment: [String: String] = [:]
    ) throws -> Run {
        let command = setprivArguments(
            uid: account.uid, gid: account.gid, home: home, environment: environment, program, arguments)
        return try run("/usr/bin/setpriv", command)
    }

    /// Whether `user`'s set of `key` is refused (`locked`) or made, waiting for a change to
    /// arrive (a set that is made stays made).
    static func eventuallyLocked(_ user: UserKvd, _ key: String, _ locked: Bool) throws -> Bool {
        try eventually(within: 15) { try (user.kvctl("set", Self.domain, key, "mine").status == 1) == locked }
    }

    /// Whether the system instance itself says a file locks `key` (what users' kvds are sent).
    static func fileLocks(_ scene: SystemScene, _ key: String) throws -> Bool {
        try DropInTests.systemKvctl(scene, "source", Self.domain, key).stdout.contains("lock: drop-in file")
    }

    @Test func aTypoInALockFileOrADefaultsFileKeepsTheLastGoodContentAcrossARestart() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "60-good", "org.ex.keep homepage\n")
        try folder.write(folder.defaults, "60-good.json", #"{"org.ex.keep": {"theme": "school"}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)
        #expect(try user.get(Self.domain, "theme").value as? String == "school")

        try folder.write(folder.locks, "60-good", "org.ex.keep homepage\norg.ex.keep\n")
        try folder.write(folder.defaults, "60-good.json", #"{"org.ex.keep": {"theme": "#)
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 1)
        #expect(try Self.status(scene).contains("last good content"))

        // A restart (a reboot, a package upgrade): the last good content still applies.
        #expect(scene.system!.stop() == 0)
        scene.system = try scene.startSystem()
        let status = try Self.status(scene)
        #expect(status.contains(folder.locks + "/60-good") && status.contains("last good content"), "\(status)")
        #expect(status.contains(folder.defaults + "/60-good.json"), "\(status)")
        #expect(try Self.fileLocks(scene, "homepage"), "\(scene.logs())")
        #expect(try DropInTests.systemKvctl(scene, "source", Self.domain, "theme").stdout.contains("60-good.json"))
        let again = try scene.restart(user)
        #expect(try again.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        #expect(try again.get(Self.domain, "theme").value as? String == "school", "\(scene.logs())")

        // After a crash too (SIGKILL: nothing is written at exit).
        scene.system!.stop(SIGKILL)
        scene.system = try scene.startSystem()
        #expect(try Self.status(scene).contains("last good content"))
        #expect(try Self.fileLocks(scene, "homepage"), "\(scene.logs())")

        // Fixed: the new content applies, and is the last good one from then on.
        try folder.write(folder.locks, "60-good", "org.ex.keep zoom\n")
        #expect(try Self.eventuallyLocked(again, "zoom", true), "\(scene.logs())")
        #expect(try Self.eventuallyLocked(again, "homepage", false))
        // Deleted: its locks go, and stay gone after a restart.
        unlink(folder.locks + "/60-good")
        #expect(try Self.eventuallyLocked(again, "zoom", false), "\(scene.logs())")
        #expect(scene.system!.stop() == 0)
        scene.system = try scene.startSystem()
        #expect(!(try Self.status(scene).contains("60-good\n")))
        #expect(try again.kvctl("set", Self.domain, "zoom", "-int", "3").status == 0, "\(scene.logs())")
    }

    @Test func aFileOthersMayWriteOrThatAUserOwnsOrLinksToIsRefused() throws {
        let folder = DropInFolder()
        let accounts = try SystemAccounts.get()
        try folder.write(folder.locks, "20-ww", "org.ex.keep victim\n")
        chmod(folder.locks + "/20-ww", 0o666)
        try folder.write(folder.defaults, "30-alice.json", #"{"org.ex.keep": {"proxy": "http://alice.evil:3128"}}"#)
        chown(folder.defaults + "/30-alice.json", accounts.user.uid, accounts.user.gid)
        let planted = folder.path + "/../kvd-e2e-planted-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "org.ex.keep linked\n".write(toFile: planted, atomically: false, encoding: .utf8)
        defer { unlink(planted) }
        chown(planted, accounts.user.uid, accounts.user.gid)
        symlink(planted, folder.locks + "/40-link")
        try folder.write(folder.locks, "50-good", "org.ex.keep good\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.other)

        #expect(try user.kvctl("set", Self.domain, "victim", "mine").status == 0, "\(scene.logs())")
        #expect(try user.kvctl("set", Self.domain, "linked", "mine").status == 0)
        #expect(try user.get(Self.domain, "proxy").value == nil)
        #expect(try user.kvctl("set", Self.domain, "good", "mine").status == 1)
        let status = try Self.status(scene)
        for name in ["locks.d/20-ww", "defaults.d/30-alice.json", "locks.d/40-link"] {
            #expect(status.contains(name + ": "), "\(name) is named as a problem: \(status)")
        }

        // A good file made writable by others later is not read again: its last good content stays.
        chmod(folder.locks + "/50-good", 0o666)
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 1)
        #expect(try user.kvctl("set", Self.domain, "good", "mine").status == 1)
        #expect(try Self.status(scene).contains("50-good: "))
    }

    @Test func aConfigFolderOthersMayWriteOrBelowSuchAFolderIsRefusedAndItsLocksKept() throws {
        let outer = DropInFolder()
        let folder = outer.path + "/etc-kvd"
        mkdir(folder, 0o755)
        mkdir(folder + "/locks.d", 0o755)
        try "org.ex.keep homepage\n".write(toFile: folder + "/locks.d/50-lock", atomically: false, encoding: .utf8)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)

        // Mode 0777: an ordinary user moves locks.d away; the locks stay, and status says why.
        chmod(folder, 0o777)
        let moved = try Self.runAs(scene.accounts.other, "/bin/mv", [folder + "/locks.d", folder + "/gone"])
        #expect(moved.status == 0, "\(moved.stderr)")
        _ = try DropInTests.systemKvctl(scene, "reload")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        let status = try Self.status(scene)
        #expect(status.contains(folder + ": ") && status.contains("777"), "\(status)")

        // The folder itself safe again, but a folder above it others may write: refused too.
        rename(folder + "/gone", folder + "/locks.d")
        chmod(folder, 0o755)
        chmod(outer.path, 0o777)
        _ = try DropInTests.systemKvctl(scene, "reload")
        let above = try Self.status(scene)
        #expect(above.contains(folder + ": ") && above.contains("the folder \(outer.path) on the way"), "\(above)")
        #expect(scene.system!.stop() == 0)
        scene.system = try scene.startSystem()
        #expect(try Self.fileLocks(scene, "homepage"), "kept across the restart: \(scene.logs())")
        chmod(outer.path, 0o755)
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 0, "\((try? Self.status(scene)) ?? "")")
    }

    @Test func aFolderTheAdminGroupMayWriteIsReadAndOneOthersMayWriteKeepsItsLocks() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        let admins = getgrnam(SystemAccounts.adminGroup)!.pointee.gr_gid
        chown(folder.locks, 0, admins)
        chmod(folder.locks, 0o775)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 0, "\((try? Self.status(scene)) ?? "")")

        // A file the admin group may write is read too.
        chown(folder.locks + "/50-lock", 0, admins)
        chmod(folder.locks + "/50-lock", 0o664)
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 0, "\((try? Self.status(scene)) ?? "")")
        // A member of the admin group drops a file of their own there: read.
        let written = try Self.runAs(
            scene.accounts.admin, "/bin/sh", ["-c", "printf 'org.ex.keep byadmin\\n' > \(folder.locks)/60-admin"])
        #expect(written.status == 0, "\(written.stderr)")
        #expect(try Self.eventuallyLocked(user, "byadmin", true), "\((try? Self.status(scene)) ?? "")")

        // Group-writable by another group, or writable by others: refused, its locks kept.
        chown(folder.locks, 0, scene.accounts.user.gid)
        _ = try DropInTests.systemKvctl(scene, "reload")
        #expect(try Self.status(scene).contains(folder.locks + ": "), "\((try? Self.status(scene)) ?? "")")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)
        chown(folder.locks, 0, admins)
        chmod(folder.locks, 0o777)
        _ = try DropInTests.systemKvctl(scene, "reload")
        #expect(try Self.status(scene).contains(folder.locks + ": "))
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
    }
}
