import Foundation
import Glibc
import Testing

/// What kvctl says lifts each kind of lock. A lock line with no value, a key an admin and a file
/// both lock, `--system unlock` of a file's lock, and a lock from a file for some users only: each
/// names the file (and the unlock where one helps), and so does `--system locks`. Real files, a real system instance (root), a
/// real user's kvd and kvctl (`setpriv`).
@Suite(.needsSystemAccounts)
struct DropInHintTests {
    static let domain = "org.ex.lk"

    @Test func eachKindOfLockSaysWhatLiftsIt() throws {
        let folder = DropInFolder()
        let accounts = try SystemAccounts.get()
        try folder.write(folder.locks, "50-lock", "org.ex.lk homepage\norg.ex.lk both\n")
        try folder.write(folder.locks, "60-user", "for users \(accounts.user.name)\norg.ex.lk zoom\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        let lockFile = folder.locks + "/50-lock"

        // A lock line alone: no value, but locked, and the file named.
        let source = try DropInNamesTests.userKvctl(scene, user, "source", Self.domain, "homepage")
        #expect(
            source.status == 0 && source.stdout.hasPrefix("locked") && source.stdout.contains(lockFile), "\(source)")
        let json = try DropInNamesTests.userKvctl(scene, user, "--json", "source", Self.domain, "homepage")
        #expect(json.stdout.contains(#""source":"locked""#), "\(json)")
        // --system unlock lifts the admins' locks only: it names the file instead of "not locked".
        let unlock = try DropInTests.systemKvctl(scene, "unlock", Self.domain, "homepage")
        #expect(
            unlock.status == 1 && unlock.stderr.contains(lockFile) && !unlock.stderr.contains("is not locked"),
            "\(unlock)")

        // Locked by an admin and by the file: both are named.
        try scene.setAndLock(Self.domain, "both", "admins")
        #expect(try eventually { try user.get(Self.domain, "both").source == "locked" })
        let both = try DropInNamesTests.userKvctl(scene, user, "set", Self.domain, "both", "mine")
        #expect(
            both.status == 1 && both.stderr.contains("--system unlock") && both.stderr.contains(lockFile), "\(both)")

        // A file for this user only: its lock is named to them.
        let zoom = try DropInNamesTests.userKvctl(scene, user, "set", Self.domain, "zoom", "-int", "3")
        #expect(zoom.status == 1 && zoom.stderr.contains(folder.locks + "/60-user"), "\(zoom)")
        let other = try scene.startUser(scene.accounts.other)
        #expect(try other.kvctl("set", Self.domain, "zoom", "-int", "3").status == 0)

        // The listing names each lock's file, for the caller's profile: a key locked both ways
        // twice, the admin's first; the file for this user only to this user.
        let listed = try DropInTrustTests.runAs(
            accounts.user, Binaries.kvctl, ["--socket", scene.systemSocket, "--system", "locks", Self.domain])
        #expect(
            listed.status == 0
                && listed.stdout == """
                    both
                    both (file \(lockFile))
                    homepage (file \(lockFile))
                    zoom (file \(folder.locks)/60-user)

                    """,
            "\(listed)")
        let asRoot = try DropInTests.systemKvctl(scene, "--json", "locks")
        #expect(
            asRoot.stdout.contains(#"{"domain":"org.ex.lk","key":"both"}"#)
                && asRoot.stdout.contains(#"{"domain":"org.ex.lk","file":"\#(lockFile)","key":"homepage"}"#)
                && !asRoot.stdout.contains("zoom"), "\(asRoot)")

        // A user's change to the system instance is denied, naming the real admin group.
        let denied = try DropInTrustTests.runAs(
            accounts.user, Binaries.kvctl, ["--socket", scene.systemSocket, "--system", "set", Self.domain, "k", "v"])
        #expect(denied.status == 1 && denied.stderr.contains("group \(SystemAccounts.adminGroup) "), "\(denied)")
    }
}
