import Foundation
import Glibc
import Testing

/// A symbolic link on the way to a drop-in folder or file is judged by every folder that decides
/// what it names (the folders on the way to what it leads to too), and an access control list is
/// refused. Real files and links, a real system instance (root), real users.
@Suite(.needsSystemAccounts)
struct DropInPathTests {
    static let domain = DropInTrustTests.domain

    static func problem(_ status: String, _ path: String) -> Bool {
        status.split(separator: "\n").contains { $0.contains(path + ": ") }
    }

    @Test func aLinkThroughAFolderAUserOwnsIsRefusedWhereverItIsOnTheWay() throws {
        let outer = DropInFolder()
        let accounts = try SystemAccounts.get()
        let attic = outer.path + "/attic"  // another user's folder: they may rename what is in it
        mkdir(attic, 0o755)
        for name in ["kvd", "kvd/locks.d", "locks"] { mkdir(attic + "/" + name, 0o755) }
        try "org.ex.keep viaconfig\n".write(toFile: attic + "/kvd/locks.d/50-lock", atomically: false, encoding: .utf8)
        try "org.ex.keep viafolder\n".write(toFile: attic + "/locks/50-lock", atomically: false, encoding: .utf8)
        try "org.ex.keep viafile\n".write(toFile: attic + "/file", atomically: false, encoding: .utf8)
        chown(attic, accounts.other.uid, accounts.other.gid)
        // A link (owned by that user) in a folder they own, leading to a root-owned file.
        let hops = outer.path + "/hops"
        mkdir(hops, 0o755)
        try "org.ex.keep safe\n".write(toFile: outer.path + "/safe", atomically: false, encoding: .utf8)
        symlink(outer.path + "/safe", hops + "/hop")
        chown(hops, accounts.other.uid, accounts.other.gid)
        symlink(attic + "/file", outer.locks + "/60-file")
        symlink(hops + "/hop", outer.locks + "/70-hop")
        symlink("../safe", outer.locks + "/80-safe")  // root's all the way: read
        symlink(attic + "/kvd", outer.path + "/linked-config")
        // A link a user owns in a sticky folder (as /tmp): she may point it anywhere at any time.
        let sticky = outer.path + "/sticky"
        mkdir(sticky, 0o755)
        chmod(sticky, 0o1777)
        try "org.ex.keep viauserlink\n".write(toFile: outer.path + "/safe2", atomically: false, encoding: .utf8)
        let made = try DropInTrustTests.runAs(
            accounts.other, "/bin/ln", ["-s", outer.path + "/safe2", sticky + "/alink"])
        #expect(made.status == 0, "\(made.stderr)")
        symlink(sticky + "/alink", outer.locks + "/90-userlink")

        let scene = try SystemScene(systemArguments: ["--config-dir", outer.path])
        let user = try scene.startUser(scene.accounts.user)
        let status = try DropInTrustTests.status(scene)
        #expect(
            Self.problem(status, outer.locks + "/60-file") && status.contains("the folder \(attic) on the way"),
            "\(status)")
        #expect(
            Self.problem(status, outer.locks + "/70-hop") && status.contains("the folder \(hops) on the way"),
            "\(status)")
        #expect(!Self.problem(status, outer.locks + "/80-safe"), "\(status)")
        #expect(
            Self.problem(status, outer.locks + "/90-userlink")
                && status.contains("the symbolic link \(sticky)/alink on the way"),
            "\(status)")
        #expect(try user.kvctl("set", Self.domain, "safe", "mine").status == 1, "\(scene.logs())")
        for key in ["viafile", "viafolder", "viaconfig", "viauserlink"] {
            #expect(try user.kvctl("set", Self.domain, key, "mine").status == 0, "\(key): \(status)")
        }

        // locks.d itself a link into that folder.
        let linkedLocks = DropInFolder()
        rmdir(linkedLocks.locks)
        symlink(attic + "/locks", linkedLocks.locks)
        // The config folder itself a link into it.
        for config in [linkedLocks.path, outer.path + "/linked-config"] {
            let instance = try SystemScene(systemArguments: ["--config-dir", config])
            let shown = try DropInTrustTests.status(instance)
            #expect(
                shown.contains("the folder \(attic) on the way") || shown.contains("\(attic)/"), "\(config): \(shown)")
            #expect(!shown.contains("1 applied"), "\(config): \(shown)")
        }
    }

    @Test func aFolderOrFileWithAnAccessControlListIsRefusedAndItsLocksKept() throws {
        guard access("/usr/bin/setfacl", X_OK) == 0 else {
            Issue.record("setfacl is missing (apt-get install acl: scripts/install-deps.sh)")
            return
        }
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        try folder.write(folder.defaults, "50-values.json", #"{"org.ex.keep": {"theme": "school"}}"#)
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)

        // The mode says 0755, the list lets another user write: their locks would reach everyone.
        let other = scene.accounts.other.uid
        #expect(try run("/usr/bin/setfacl", ["-m", "u:\(other):rwx", folder.locks]).status == 0)
        #expect(try run("/usr/bin/setfacl", ["-m", "u:\(other):rw", folder.defaults + "/50-values.json"]).status == 0)
        #expect(try DropInTests.systemKvctl(scene, "reload").status == 1)
        let status = try DropInTrustTests.status(scene)
        #expect(Self.problem(status, folder.locks) && status.contains("access control list"), "\(status)")
        #expect(Self.problem(status, folder.defaults + "/50-values.json"), "\(status)")
        #expect(status.contains("last good content"), "\(status)")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        #expect(try user.get(Self.domain, "theme").value as? String == "school")

        #expect(try run("/usr/bin/setfacl", ["-b", folder.locks, folder.defaults + "/50-values.json"]).status == 0)
        #expect(
            try DropInTests.systemKvctl(scene, "reload").status == 0, "\((try? DropInTrustTests.status(scene)) ?? "")")
    }
}
