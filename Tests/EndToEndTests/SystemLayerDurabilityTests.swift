import Foundation
import Glibc
import Testing

/// Locks that hold when the Mirror breaks, and replies that outgrow one message: with the real
/// binaries, the system instance as root and users' kvds and kvctl as users made for the tests (see
/// ``SystemScene``).
@Suite(.needsSystemAccounts)
struct SystemLayerDurabilityTests {
    static let keyLocked = "io.kvd.Defaults.KeyLocked"

    /// A string of `count` bytes.
    static func big(_ count: Int, _ fill: Character = "x") -> String { String(repeating: fill, count: count) }

    /// Whether `user`'s own write to the key is refused as locked, by kvctl and by a raw call.
    static func refusesWrites(_ user: UserKvd, _ domain: String, _ key: String) throws -> Bool {
        let set = try user.kvctl("set", domain, key, "mine")
        let raw = try user.call("io.kvd.Defaults.Set", ["domain": domain, "key": key, "value": "mine"])
        return set.status != 0 && set.stderr.contains("locked") && raw.error == keyLocked
    }

    /// The user's kvd keeps the layer in its state folder, so with the system instance killed, and
    /// the user's kvd restarted while it is down, the lock still holds; once the system instance is
    /// back and lifts the lock, the user may write again.
    @Test func aLockHoldsWhileTheSystemInstanceIsDownAndAcrossTheUsersRestart() throws {
        let scene = try SystemScene()
        let domain = "org.ex.browser"
        var user = try scene.startUser(scene.accounts.user)
        try scene.setAndLock(domain, "homepage", "https://intranet")
        #expect(try eventually { try user.get(domain, "homepage").source == "locked" }, "\(scene.logs())")
        #expect(try eventually { access(user.state + "/kvd.system-layer", R_OK) == 0 }, "the layer is saved")
        #expect(scene.system?.stop(SIGKILL) == 128 + SIGKILL)
        #expect(
            try Self.refusesWrites(user, domain, "homepage"), "with the system instance dead: \(user.errorOutput())")
        user = try scene.restart(user)
        let read = try user.get(domain, "homepage")
        #expect(
            read.value as? String == "https://intranet" && read.source == "locked",
            "restarted while the system instance is down: \(read)")
        #expect(
            try Self.refusesWrites(user, domain, "homepage"),
            "restarted while the system instance is down: \(user.errorOutput())")
        #expect(
            user.errorOutput().contains("enforcing the system layer saved at system revision"), "\(user.errorOutput())")
        scene.system = try scene.startSystem()
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "homepage"]).error == nil)
        #expect(try eventually(within: 15) { try user.get(domain, "homepage").source == "system" }, "\(scene.logs())")
        #expect(try user.kvctl("set", domain, "homepage", "mine").status == 0, "a newer layer replaces the saved one")
    }

    /// A system store of 3 domains of 12 x 1 MiB (over the 32 MiB watch backlog), and a domain with
    /// a 255-byte name filled to exactly its budget (16,777,312 bytes as one reply), are mirrored
    /// whole: the lock holds and both are read through the user's kvd; the system instance never
    /// disconnects the Mirror.
    @Test func aSystemStoreOverTheWatchBacklogAndTheLongestNameAtItsBudgetAreMirrored() throws {
        let scene = try SystemScene()
        let root = try RawClient(scene.systemSocket)
        defer { root.close() }
        let domains = ["org.ex.browser", "org.ex.mail", "org.ex.shell"]
        for domain in domains {
            for index in 0..<12 {
                let set = try root.call(
                    "io.kvd.Defaults.Set", ["domain": domain, "key": "blob\(index)", "value": Self.big(1 << 20)])
                #expect(set.error == nil, "\(set)")
            }
        }
        let long = String(repeating: "l", count: 255)
        // The budget: 16 MiB less the reply overhead (1024); the entry costs its key and value
        // as typed JSON ("k", "..." with quotes: 3 + 2 + count) plus 18.
        let fill = (16 << 20) - 1024 - 18 - 3 - 2
        #expect(
            try root.call("io.kvd.Defaults.Set", ["domain": long, "key": "k", "value": Self.big(fill + 1)]).error
                == "io.kvd.Defaults.TooLarge")
        #expect(
            try root.call("io.kvd.Defaults.Set", ["domain": long, "key": "k", "value": Self.big(fill)]).error == nil)
        #expect(try root.call("io.kvd.System.Lock", ["domain": "org.ex.browser", "key": "homepage"]).error == nil)
        #expect(
            try root.call("io.kvd.Defaults.Set", ["domain": "org.ex.marker", "key": "last", "value": true]).error == nil
        )
        let user = try scene.startUser(scene.accounts.user)
        #expect(
            try eventually(within: 30) { try user.get("org.ex.marker", "last").source == "system" }, "\(scene.logs())")
        #expect((try user.get(long, "k").value as? String)?.count == fill, "the longest name at its budget")
        #expect(try Self.refusesWrites(user, "org.ex.browser", "homepage"), "\(scene.logs())")
        #expect((try user.get("org.ex.shell", "blob11").value as? String)?.count == 1 << 20)
        let systemLog = scene.system?.errorOutput() ?? ""
        #expect(!systemLog.contains("does not read its watch"), "\(systemLog)")
        #expect(!user.errorOutput().contains("no system layer"), "\(user.errorOutput())")
    }

    /// The admin's changes reach `kvctl watch`, each with its source, at the user's revision and a
    /// growing system revision.
    @Test func kvctlWatchPrintsTheAdministratorsChangesWithTheirSource() throws {
        let scene = try SystemScene()
        let domain = "org.ex.watched"
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", domain, "own", "mine").status == 0)
        let plain = try Interactive(
            "/usr/bin/setpriv",
            asUser(user.account, home: user.folder, Binaries.kvctl, ["--socket", user.socket, "watch", domain]))
        let json = try Interactive(
            "/usr/bin/setpriv",
            asUser(
                user.account, home: user.folder, Binaries.kvctl, ["--socket", user.socket, "--json", "watch", domain]))
        #expect(plain.line() == #"own = "mine""#)
        #expect(json.line()?.contains(#""initial":true"#) == true)
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": "default", "value": 5]).error == nil)
        #expect(plain.line() == "default = 5 (system)")
        let line = try #require(json.line())
        let event = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(event["source"] as? String == "system" && event["key"] as? String == "default", "\(line)")
        let first = try #require(event["systemRevision"] as? Int, "\(line)")
        try scene.setAndLock(domain, "own", "policy")
        #expect(plain.line() == #"own = "policy" (locked)"#)
        let locked = try #require(json.line())
        #expect(locked.contains(#""source":"locked""#), "\(locked)")
        let after = try JSONSerialization.jsonObject(with: Data(locked.utf8)) as? [String: Any]
        #expect((after?["systemRevision"] as? Int ?? 0) > first, "\(locked)")
        #expect(try scene.systemCall("io.kvd.Defaults.Delete", ["domain": domain, "key": "default"]).error == nil)
        #expect(plain.line() == "default removed")
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "own"]).error == nil)
        #expect(plain.line() == #"own = "mine""#, "the user's own value is back")
    }

    /// A 15 MiB system domain and 2 MiB of the user's own values in it, both accepted, are watched
    /// (`kvctl watch`) and listed (`kvctl keys`); a raw `List` says how large the combined domain
    /// is, with `TooLarge`.
    @Test func aLayeredDomainLargerThanOneReplyIsWatchedAndListed() throws {
        let scene = try SystemScene()
        let domain = "org.ex.layered"
        let root = try RawClient(scene.systemSocket)
        defer { root.close() }
        for index in 0..<15 {
            #expect(
                try root.call(
                    "io.kvd.Defaults.Set", ["domain": domain, "key": "system\(index)", "value": Self.big(1 << 20, "s")]
                ).error == nil)
        }
        let user = try scene.startUser(scene.accounts.user)
        #expect(try eventually(within: 15) { try user.get(domain, "system14").source == "system" }, "\(scene.logs())")
        for index in 0..<2 {
            let set = try user.call(
                "io.kvd.Defaults.Set", ["domain": domain, "key": "user\(index)", "value": Self.big(1 << 20, "u")])
            #expect(set.error == nil, "\(set)")
        }
        let keys = try user.kvctl("keys", domain)
        #expect(keys.status == 0 && keys.stdout.split(separator: "\n").count == 17, "\(keys.stderr)")
        #expect(!keys.stderr.contains("could not store"), "\(keys.stderr)")
        let list = try user.call("io.kvd.Defaults.List", ["domain": domain])
        #expect(list.error == "io.kvd.Defaults.TooLarge", "\(list.error ?? "no error")")
        #expect(
            (list.parameters["reason"] as? String)?.contains("with the system layer's values") == true,
            "\(list.parameters)")
        let watch = try Interactive(
            "/usr/bin/setpriv",
            asUser(user.account, home: user.folder, Binaries.kvctl, ["--socket", user.socket, "watch", domain]))
        var lines: [String] = []
        while lines.count < 17, let line = watch.line(timeout: 15) { lines.append(line) }
        #expect(
            lines.count == 17 && lines.allSatisfy { $0.hasPrefix("system") || $0.hasPrefix("user") },
            "\(lines.map { $0.prefix(40) })")
    }
}
