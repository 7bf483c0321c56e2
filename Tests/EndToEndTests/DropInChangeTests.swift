import Foundation
import Glibc
import Testing

/// How the system instance takes a change in its drop-in folders. An editor's save (vim: the old
/// file renamed away, then the new one written) is one change, with no moment in which its locks
/// are lifted; the last good content that could not be saved on a full disk is saved once there is
/// room, so a later restart keeps it. Real files, a real system instance (root), a real tmpfs.
@Suite(.needsSystemAccounts, .serialized)
struct DropInChangeTests {
    static let domain = DropInTrustTests.domain

    static func generation(_ scene: SystemScene) throws -> String? {
        let status = try DropInTrustTests.status(scene)
        return status.split(separator: "\n").first { $0.contains("drop-in files:") }.flatMap {
            $0.components(separatedBy: "generation ").last
        }
    }

    @Test func anEditorsSaveIsOneChangeAndItsLocksNeverLift() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)
        let before = try Self.generation(scene)

        // As vim saves (backupcopy=no, writebackup): rename to NAME~, write NAME, remove NAME~.
        let path = folder.locks + "/50-lock"
        for _ in 0..<3 {
            #expect(rename(path, path + "~") == 0)
            usleep(60_000)
            #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "locked mid-save")
            try "org.ex.keep homepage\n".write(toFile: path, atomically: false, encoding: .utf8)
            unlink(path + "~")
            usleep(400_000)
        }
        #expect(try Self.generation(scene) == before, "\(scene.logs())")
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)

        // A real change is still read, once the folder is quiet.
        try folder.write(folder.locks, "50-lock", "org.ex.keep zoom\n")
        #expect(try DropInTrustTests.eventuallyLocked(user, "zoom", true), "\(scene.logs())")
        #expect(try DropInTrustTests.eventuallyLocked(user, "homepage", false))
    }

    @Test(.enabled(if: Tmpfs.available, "needs root to mount a tmpfs as the state folder; skipped"))
    func theLastGoodContentAFullDiskKeptFromSavingIsSavedOnceThereIsRoom() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        #expect(scene.system!.stop() == 0)
        let saved = scene.root + "/state-copy"
        #expect(try run("/bin/cp", ["-a", scene.systemState, saved]).status == 0)
        guard Tmpfs.mount(scene.systemState, size: "4m") else {
            Issue.record("mounting a tmpfs failed")
            return
        }
        defer { Tmpfs.unmount(scene.systemState) }
        #expect(try run("/bin/sh", ["-c", "cp -a \(saved)/. \(scene.systemState)/"]).status == 0)
        scene.system = try scene.startSystem()

        // The disk full, the file changes: its new content applies but cannot be saved.
        let filler = scene.systemState + "/filler"
        _ = try run("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=64k"])
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\norg.ex.keep zoom\n")
        usleep(1_000_000)  // the change settles and is read: no other change follows
        #expect(try DropInTrustTests.status(scene).contains("kvd.drop-ins"), "\(scene.logs())")

        // Room again: within a few seconds it is saved, and status says so.
        unlink(filler)
        #expect(
            try eventually(within: 15) { try !DropInTrustTests.status(scene).contains("kvd.drop-ins") },
            "\((try? DropInTrustTests.status(scene)) ?? "")")

        // A typo, then a crash: the saved content (with zoom) still applies.
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\norg.ex.keep\n")
        scene.system!.stop(SIGKILL)
        scene.system = try scene.startSystem()
        #expect(try DropInTrustTests.fileLocks(scene, "zoom"), "\(scene.logs())")
    }
}

/// A folder that goes missing (moved away, or not mounted yet at a restart) keeps what it held, and
/// one that comes back, or is made anew, is watched and read.
@Suite(.needsSystemAccounts)
struct DropInMissingFolderTests {
    static let domain = DropInTrustTests.domain

    @Test func aMissingFolderKeepsItsLocksAndOneMadeAgainIsReadAndWatched() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1)

        // locks.d moved away: its lock stays, and status says why.
        #expect(rename(folder.locks, folder.path + "/locks.gone") == 0)
        usleep(800_000)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        #expect(try DropInTrustTests.status(scene).contains(folder.locks + ": missing"))
        #expect(rename(folder.path + "/locks.gone", folder.locks) == 0)

        // The whole config folder gone (an unmounted /etc/kvd), across a restart too.
        let away = folder.path + ".away"
        #expect(rename(folder.path, away) == 0)
        defer { try? FileManager.default.removeItem(atPath: away) }
        usleep(800_000)
        #expect(try user.kvctl("set", Self.domain, "homepage", "mine").status == 1, "\(scene.logs())")
        #expect(scene.system!.stop() == 0)
        scene.system = try scene.startSystem()
        #expect(try DropInTrustTests.status(scene).contains(folder.path + ": missing"), "\(scene.logs())")
        #expect(try DropInTrustTests.fileLocks(scene, "homepage"), "\(scene.logs())")

        // Made again (mounted): read within a few seconds, and watched from then on.
        mkdir(folder.path, 0o755)
        mkdir(folder.locks, 0o755)
        mkdir(folder.defaults, 0o755)
        try folder.write(folder.locks, "50-lock", "org.ex.keep zoom\n")
        #expect(try eventually(within: 15) { try DropInTrustTests.fileLocks(scene, "zoom") }, "\(scene.logs())")
        #expect(try !DropInTrustTests.fileLocks(scene, "homepage"))
        try folder.write(folder.locks, "50-lock", "org.ex.keep theme\n")
        #expect(try eventually(within: 3) { try DropInTrustTests.fileLocks(scene, "theme") }, "\(scene.logs())")
        // A link made in place (ln -s: created, never closed after writing) is read too.
        let target = scene.root + "/linked"  // outside the watched folders: only the link's creation is an event
        try "org.ex.keep linked\n".write(toFile: target, atomically: false, encoding: .utf8)
        symlink(target, folder.locks + "/70-ln")
        #expect(try eventually(within: 3) { try DropInTrustTests.fileLocks(scene, "linked") }, "\(scene.logs())")
    }

    @Test(.enabled(if: Tmpfs.available, "needs root to mount a tmpfs over the config folder; skipped"))
    func aFileSystemMountedOverTheConfigFolderIsReadAndWatched() throws {
        let folder = DropInFolder()
        try folder.write(folder.locks, "50-lock", "org.ex.keep homepage\n")
        let scene = try SystemScene(systemArguments: ["--config-dir", folder.path])
        guard Tmpfs.mount(folder.path, size: "1m") else {
            Issue.record("mounting a tmpfs failed")
            return
        }
        var mounted = true
        defer { if mounted { Tmpfs.unmount(folder.path) } }
        mkdir(folder.locks, 0o755)
        try folder.write(folder.locks, "50-lock", "org.ex.keep mounted\n")
        #expect(try eventually(within: 15) { try DropInTrustTests.fileLocks(scene, "mounted") }, "\(scene.logs())")
        // Watched on the mount: an edit there is read at once.
        try folder.write(folder.locks, "50-lock", "org.ex.keep edited\n")
        #expect(try eventually(within: 3) { try DropInTrustTests.fileLocks(scene, "edited") }, "\(scene.logs())")
        Tmpfs.unmount(folder.path)
        mounted = false
        #expect(try eventually(within: 15) { try DropInTrustTests.fileLocks(scene, "homepage") }, "\(scene.logs())")
    }
}
