import Foundation
import Glibc
import Testing

/// A machine of many users, with the real system instance (root, under `systemd-socket-activate`),
/// users' kvds and callers as real uids. One user flooding the system instance never costs another
/// user their `Mirror` (so their locks), nor an admin their call; a non-admin's huge call is
/// refused before it is parsed.
@Suite(.needsSystemAccounts)
struct SharedMachineTests {
    /// Reads replies from `client` in large pieces until one satisfies `done` or the connection
    /// closes (or 20 s pass with nothing); the replies, and whether it closed.
    static func read(_ client: RawClient, until done: (String) -> Bool) -> (replies: [String], closed: Bool) {
        var buffer: [UInt8] = []
        var replies: [String] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return (replies, true) }
            buffer += chunk[..<count]
            while let end = buffer.firstIndex(of: 0) {
                let reply = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                replies.append(reply)
                if done(reply) { return (replies, false) }
            }
        }
    }

    /// One user (`other`) opens 40 connections that pipeline `Get`s of a 16 KiB key and never
    /// read, past the 48 MiB budget, while another user's `Mirror` of an 8 MiB domain and an
    /// admin's `List` of it wait unread, each holding more than any one of the flooder's
    /// connections. Only the flooder's connections are shed: the Mirror and the List arrive
    /// whole, and a user's kvd started during the flood gets the layer and enforces the lock.
    @Test func oneUserFloodingNeverCutsAnotherUsersMirrorNorAnAdminsCall() throws {
        let scene = try SystemScene(systemArguments: ["--max-client-memory", "48M"])
        let domain = "org.ex.browser"
        for index in 0..<8 {
            let value = String(repeating: "\(index)", count: 1 << 20)
            #expect(
                try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": "big\(index)", "value": value])
                    .error == nil)
        }
        try scene.setAndLock(domain, "homepage", "https://intranet")
        #expect(
            try scene.systemCall(
                "io.kvd.Defaults.Set",
                ["domain": "org.ex.flood", "key": "k", "value": String(repeating: "f", count: 16 << 10)]
            ).error == nil)
        let mirror = try RawClient.connect(scene.systemSocket, as: scene.accounts.user)
        defer { mirror.close() }
        let admin = try RawClient.connect(scene.systemSocket, as: scene.accounts.admin)
        defer { admin.close() }
        mirror.send(#"{"method":"io.kvd.System.Mirror","more":true}"#)
        admin.send(try RawClient.message("io.kvd.Defaults.List", ["domain": domain], more: false))
        for client in [mirror, admin] {  // kvd has handled both calls once their replies start
            var ready = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&ready, 1, 10_000) == 1, "no reply began\n\(scene.logs())")
        }
        let get = try RawClient.message("io.kvd.Defaults.Get", ["domain": "org.ex.flood", "key": "k"], more: false)
        let pipeline = [String](repeating: get, count: 64).joined(separator: "\u{0}")
        var flood: [RawClient] = []
        defer { for client in flood { client.close() } }
        for _ in 0..<40 {
            let client = try RawClient.connect(scene.systemSocket, as: scene.accounts.other)
            client.send(pipeline)
            flood.append(client)
        }
        #expect(
            eventually(within: 20) { scene.system?.errorOutput().contains("over the budget") == true },
            "the flood never passed the budget\n\(scene.logs())")
        let mirrored = Self.read(mirror) { $0.contains(#""synced":true"#) }
        #expect(
            !mirrored.closed,
            "the other user's Mirror was cut after \(mirrored.replies.count) replies\n\(scene.system?.errorOutput() ?? "")"
        )
        let listed = Self.read(admin) { _ in true }
        #expect(
            !listed.closed && listed.replies.first?.contains("big7") == true,
            "the admin's List was cut\n\(scene.system?.errorOutput() ?? "")")
        let user = try scene.startUser(scene.accounts.user)
        #expect(
            try eventually(within: 20) { try user.get(domain, "homepage").source == "locked" },
            "the user's kvd got no layer\n\(scene.logs())")
        let write = try user.kvctl("set", domain, "homepage", "x")
        #expect(
            write.status != 0 && write.stderr.contains("locked"),
            "the lock did not hold: \(write.status) \(write.stderr)")
        let log = scene.system?.errorOutput() ?? ""
        for account in [scene.accounts.user, scene.accounts.admin] {
            #expect(!log.contains("(uid \(account.uid))"), "\(account.name) was shed:\n\(log)")
        }
        #expect(log.contains("(uid \(scene.accounts.other.uid))"), "the flooder was not the one shed:\n\(log)")
    }

    /// A non-admin's 15 MiB `Set` (a JSON array of zeros) and a `Get` with a 15 MiB junk
    /// parameter are `TooLarge` with the readers' limit of 64 KiB, refused after reading at most
    /// that much, nothing parsed; another user is served meanwhile; an admin may still send a
    /// large call.
    @Test func aNonAdminsHugeCallIsRefusedUnreadAndOthersAreServed() throws {
        let scene = try SystemScene()
        let zeros = [String](repeating: "0", count: 15 << 19).joined(separator: ",")
        let calls = [
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"d","key":"k","value":[\#(zeros)]}}"#,
            #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"d","key":"k","junk":"\#(String(repeating: "j", count: 15 << 20))"}}"#,
        ]
        for call in calls {
            let client = try RawClient.connect(scene.systemSocket, as: scene.accounts.other)
            defer { client.close() }
            client.send(Array(call.utf8) + [0])  // kvd stops reading after 64 KiB: this send fails
            let reply = Self.read(client) { _ in true }.replies.first ?? ""
            #expect(
                reply == #"{"parameters":{"limit":65536},"error":"io.kvd.Defaults.TooLarge"}"#,
                "\(reply.prefix(300))\n\(scene.logs())")
            let served = try scene.systemCall(
                "io.kvd.Defaults.Get", ["domain": "d", "key": "k"], as: scene.accounts.user)
            #expect(served.error == "io.kvd.Defaults.NotFound", "\(served)")
        }
        let large = try scene.systemCall(
            "io.kvd.Defaults.Set", ["domain": "d", "key": "k", "value": String(repeating: "a", count: 1 << 20)],
            as: scene.accounts.admin)
        #expect(large.error == nil, "\(large)")
    }

    /// A system domain that holds only a lock is not among a user's `domains` (`get` of it is
    /// NotFound); one with a value is.
    @Test func aDomainHoldingOnlyALockIsNotListed() throws {
        let scene = try SystemScene()
        #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": "org.ex.lockonly", "key": "k"]).error == nil)
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": "org.ex.marker", "key": "k", "value": 1]).error
                == nil)
        let user = try scene.startUser(scene.accounts.user)
        #expect(try eventually { try user.get("org.ex.marker", "k").source == "system" }, "\(scene.logs())")
        let domains = try user.kvctl("domains")
        #expect(domains.status == 0 && domains.stdout == "org.ex.marker\n", "\(domains.stdout) \(domains.stderr)")
        let get = try user.kvctl("get", "org.ex.lockonly")
        #expect(get.status == 1, "\(get.stdout) \(get.stderr)")
    }

    /// `--admin-group` naming no group is warned about at start (only root may then write).
    @Test func anAdminGroupThatDoesNotExistIsWarnedAbout() throws {
        let scene = try SystemScene()
        let log = scene.root + "/nosuchgroup.log"
        mkdir(scene.root + "/nosuchgroup-state", 0o700)
        let instance = try SystemInstance(
            socket: scene.root + "/run/nosuchgroup.sock", state: scene.root + "/nosuchgroup-state",
            arguments: ["--admin-group", "kvd-e2e-nosuchgroup"],
            activated: false, logFile: log)
        #expect(
            instance.errorOutput().contains(#"there is no group "kvd-e2e-nosuchgroup" (--admin-group)"#),
            "\(instance.errorOutput())")
    }

    /// A user's kvd exiting on idle says so, and not that the system instance went away.
    @Test func aUsersKvdExitingOnIdleDoesNotSayTheSystemInstanceWentAway() throws {
        let scene = try SystemScene()
        let user = try UserKvd(scene.accounts.user, in: scene.root, systemSocket: scene.systemSocket, idleExit: "1")
        #expect(user.process.wait(timeout: 20) == 0, "\(user.errorOutput())")
        #expect(user.errorOutput().contains("exiting: idle"), "\(user.errorOutput())")
        #expect(!user.errorOutput().contains("went away"), "\(user.errorOutput())")
    }
}

/// The real kvd refuses an out-of-range number with exit status 2 and a message naming the range,
/// never dying of a signal.
@Suite struct OptionRangeTests {
    @Test func anIdleExitTooLongForTheTimersIsAUsageError() throws {
        let refused = try run(Binaries.kvd, ["--idle-exit", "1e16", "--socket", "/nonexistent/kvd.sock"])
        #expect(refused.status == 2, "\(refused.status): \(refused.stderr)")
        #expect(
            refused.stderr.hasPrefix(
                "kvd: --idle-exit needs a number of seconds from 0 (never) to 1000000000, not \"1e16\"\n"),
            "\(refused.stderr)")
    }
}

/// Export, import, restore and restore-backup work on the user's own layer (a real user's kvd under
/// a real system instance): a system default is never copied into it, a lock blocks only the key it
/// locks, a value equal to the default stays the user's own, and restore-backup restores all it can
/// and says what it could not and why.
@Suite(.needsSystemAccounts)
struct OwnLayerTests {
    static let domain = "org.ex.browser"

    /// A scene with `homepage` set and locked, `fontsize` a system default of 12, and the user's
    /// kvd following it.
    static func scene() throws -> (SystemScene, UserKvd) {
        let scene = try SystemScene()
        try scene.setAndLock(domain, "homepage", "https://intranet")
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": "fontsize", "value": 12]).error == nil
        )
        let user = try scene.startUser(scene.accounts.user)
        #expect(
            try eventually {
                try user.get(domain, "homepage").source == "locked" && user.get(domain, "fontsize").value as? Int == 12
            }, "\(scene.logs())")
        return (scene, user)
    }

    /// The revision a `kvctl --json` write printed.
    static func revision(_ run: Run) -> Int? {
        (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])?["revision"] as? Int
    }

    @Test func exportWritesTheUsersOwnValuesAndImportChangesOnlyThemLeavingLockedKeysOut() throws {
        let (scene, user) = try Self.scene()
        defer { withExtendedLifetime(scene) {} }
        #expect(try user.kvctl("set", Self.domain, "theme", "dark").status == 0)
        let own = try user.kvctl("export", Self.domain, "-")
        #expect(
            own.status == 0 && own.stdout.contains("theme") && !own.stdout.contains("fontsize")
                && !own.stdout.contains("homepage"), "\(own.stdout)")
        let effective = try user.kvctl("export", Self.domain, "-", "--effective")
        #expect(
            effective.status == 0 && effective.stdout.contains("theme") && effective.stdout.contains("fontsize")
                && effective.stdout.contains("intranet"))
        let fontsize = try user.file("fontsize.json", #"{"fontsize": 14}"#)
        let imported = try user.kvctl("import", Self.domain, fontsize)
        #expect(imported.status == 0, "import of an unlocked key was refused: \(imported.stderr)")
        #expect(
            try user.get(Self.domain, "fontsize").value as? Int == 14
                && user.get(Self.domain, "fontsize").source == "user")
        #expect(try user.get(Self.domain, "homepage").source == "locked")
        #expect(
            try user.get(Self.domain, "theme").error == "io.kvd.Defaults.NotFound",
            "import makes the own layer hold the file's values only")
        let withLocked = try user.file("locked.json", #"{"fontsize": 15, "homepage": "https://mine"}"#)
        let partly = try user.kvctl("import", Self.domain, withLocked)
        #expect(
            partly.status == 1 && partly.stderr.contains(#""homepage""#) && partly.stderr.contains("locked"),
            "\(partly.stderr)")
        #expect(try user.get(Self.domain, "fontsize").value as? Int == 15, "the lock blocked more than its key")
    }

    @Test func restoreWritesTheUsersOwnValueEvenWhenItEqualsTheDefault() throws {
        let (scene, user) = try Self.scene()
        let set = try user.kvctl("--json", "set", Self.domain, "fontsize", "-int", "12")
        let revision = try #require(Self.revision(set), "\(set.stdout) \(set.stderr)")
        #expect(try user.kvctl("delete", Self.domain, "fontsize").status == 0)
        let key = try user.kvctl("restore", Self.domain, "fontsize", "--revision", String(revision))
        #expect(key.status == 0 && !key.stderr.contains("nothing to restore"), "\(key.stderr)")
        #expect(try user.get(Self.domain, "fontsize").source == "user")
        #expect(try user.kvctl("delete", Self.domain, "fontsize").status == 0)
        let whole = try user.kvctl("restore", Self.domain, "--revision", String(revision))
        #expect(
            whole.status == 0 && !whole.stderr.contains("nothing to restore"),
            "the domain restore was refused or did nothing: \(whole.stderr)")
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": Self.domain, "key": "fontsize", "value": 20]).error
                == nil)
        #expect(
            try eventually {
                try user.get(Self.domain, "fontsize").value as? Int == 12
                    && user.get(Self.domain, "fontsize").source == "user"
            })
    }

    @Test func restoreBackupRestoresAllItCanNamesALockedKeyAndNeverAsksForAUselessRerun() throws {
        let (scene, user) = try Self.scene()
        #expect(try user.kvctl("set", Self.domain, "toolbar", "on").status == 0)
        #expect(try user.kvctl("set", "org.ex.other", "k", "kept").status == 0)
        let file = user.folder + "/backup.json"
        #expect(try user.kvctl("backup", file).status == 0)
        try scene.setAndLock(Self.domain, "toolbar", "off")
        #expect(try user.kvctl("delete", "org.ex.other").status == 0)
        let restored = try user.kvctl("restore-backup", file, "--yes")
        #expect(
            restored.status == 1 && restored.stderr.contains(#""toolbar""#) && restored.stderr.contains("locked"),
            "\(restored.stderr)")
        #expect(!restored.stderr.contains("again"), "\(restored.stderr)")
        #expect(
            try user.get("org.ex.other", "k").value as? String == "kept",
            "a domain after the locked key was not restored: \(restored.stderr)")
        let system = try run(
            "/usr/bin/setpriv",
            asUser(
                user.account, home: user.folder, Binaries.kvctl,
                ["--system", "--socket", scene.systemSocket, "restore-backup", file, "--yes"]))
        #expect(
            system.status == 1 && system.stderr.contains("permission denied")
                && system.stderr.contains("nothing was restored"), "\(system.stderr)")
        #expect(!system.stderr.contains("again"), "\(system.stderr)")
    }
}
