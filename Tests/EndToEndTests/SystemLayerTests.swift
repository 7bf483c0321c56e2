import Foundation
import Glibc
import Testing

/// The system layer with real processes and real uids: the system instance as root, users' kvds and
/// kvctl as users made for the tests, callers of the system instance connecting with those users'
/// credentials.
@Suite(.needsSystemAccounts)
struct SystemLayerTests {
    static let permissionDenied = "org.varlink.service.PermissionDenied"
    static let keyLocked = "io.kvd.Defaults.KeyLocked"

    @Test func aNonAdminCannotChangeValuesOrLocks() throws {
        let scene = try SystemScene()
        try scene.setAndLock("com.example.policy", "kept", "root's")
        let other = scene.accounts.other
        let calls: [(String, [String: Any])] = [
            ("io.kvd.Defaults.Set", ["domain": "com.example.policy", "key": "new", "value": "theirs"]),
            ("io.kvd.Defaults.Set", ["domain": "com.example.policy", "key": "kept", "value": "theirs"]),
            ("io.kvd.Defaults.Apply", ["domain": "com.example.policy", "changes": [["key": "new", "value": 1]]]),
            ("io.kvd.Defaults.Delete", ["domain": "com.example.policy", "key": "kept"]),
            ("io.kvd.Defaults.Delete", ["domain": "com.example.policy"]),
            ("io.kvd.System.Lock", ["domain": "com.example.policy", "key": "new"]),
            ("io.kvd.System.Unlock", ["domain": "com.example.policy", "key": "kept"]),
        ]
        for (method, parameters) in calls {
            let reply = try scene.systemCall(method, parameters, as: other)
            #expect(reply.error == Self.permissionDenied, "\(method) \(parameters) as \(other.name): \(reply)")
        }
        #expect(
            try scene.systemCall("io.kvd.Defaults.Get", ["domain": "com.example.policy", "key": "kept"], as: other)
                .value as? String == "root's", "anyone may read")
        #expect(try scene.systemValue("com.example.policy", "kept") as? String == "root's")
        #expect(try scene.systemValue("com.example.policy", "new") == nil, "a non-admin's Set was written")
        #expect(try scene.systemLocks("com.example.policy") == ["kept"], "a non-admin changed the locks")
    }

    @Test func aMemberOfTheAdminGroupWhoIsNotRootMayWrite() throws {
        let scene = try SystemScene()
        let admin = scene.accounts.admin
        #expect(
            admin.uid != 0
                && admin.groups.contains {
                    getgrgid($0).map { String(cString: $0.pointee.gr_name) } == SystemAccounts.adminGroup
                })
        let set = try scene.systemCall(
            "io.kvd.Defaults.Set", ["domain": "com.example.admin", "key": "k", "value": "set by an admin"], as: admin)
        let lock = try scene.systemCall("io.kvd.System.Lock", ["domain": "com.example.admin", "key": "k"], as: admin)
        #expect(set.error == nil && lock.error == nil, "\(set) \(lock)")
        #expect(try scene.systemValue("com.example.admin", "k") as? String == "set by an admin")
        #expect(try scene.systemLocks("com.example.admin") == ["k"])
        let unlock = try scene.systemCall(
            "io.kvd.System.Unlock", ["domain": "com.example.admin", "key": "k"], as: admin)
        #expect(unlock.error == nil, "\(unlock)")
        #expect(try scene.systemLocks("com.example.admin") == [])
    }

    /// The caller's identity is fixed when its connection is accepted: a call whose caller hung
    /// up before the reply still counts, as that caller's; a non-admin's still does not.
    @Test func anAdminCallWhoseCallerHangsUpAtOnceIsStillMade() throws {
        let scene = try SystemScene()
        let calls: [(String, [String: Any])] = [
            ("io.kvd.Defaults.Set", ["domain": "com.example.gone", "key": "k", "value": "made"]),
            ("io.kvd.System.Lock", ["domain": "com.example.gone", "key": "k"]),
            ("io.kvd.Defaults.Set", ["domain": "com.example.gone", "key": "quick", "value": 1]),
        ]
        for (method, parameters) in calls {
            let admin = try RawClient.connect(scene.systemSocket, as: scene.accounts.admin)
            try admin.send(method, parameters)
            admin.close()
            let intruder = try RawClient.connect(scene.systemSocket, as: scene.accounts.other)
            try intruder.send(method, ["domain": "com.example.intruder", "key": "k", "value": "theirs"])
            intruder.close()
        }
        let made = try eventually(within: 5) {
            try scene.systemValue("com.example.gone", "k") as? String == "made"
                && scene.systemLocks("com.example.gone") == ["k"]
                && scene.systemValue("com.example.gone", "quick") as? Int == 1
        }
        #expect(
            made,
            "the calls of an admin who hung up were not made: \(String(describing: try? scene.systemValue("com.example.gone", "k"))), locks \(String(describing: try? scene.systemLocks("com.example.gone")))\n\(scene.logs())"
        )
        #expect(try scene.systemValue("com.example.intruder", "k") == nil)
        #expect(try scene.systemLocks("com.example.intruder") == [])
    }

    @Test func invalidNamesAreRefusedAndNoFileIsMade() throws {
        let scene = try SystemScene()
        let stateBefore = try FileManager.default.contentsOfDirectory(atPath: scene.systemState).sorted()
        let rootBefore = try FileManager.default.contentsOfDirectory(atPath: scene.root).sorted()
        let names = [
            "..", "../escape", "a/b", "/tmp/kvd-e2e-escape", "com.example\u{0}.nul", ".hidden",
            String(repeating: "a", count: 300),
        ]
        for name in names {
            for account in [nil, scene.accounts.admin] {
                let set = try scene.systemCall(
                    "io.kvd.Defaults.Set", ["domain": name, "key": "k", "value": "v"], as: account)
                let lock = try scene.systemCall("io.kvd.System.Lock", ["domain": name, "key": "k"], as: account)
                #expect(set.error == "io.kvd.Defaults.InvalidName", "Set of \(name.debugDescription): \(set)")
                #expect(lock.error == "io.kvd.Defaults.InvalidName", "Lock of \(name.debugDescription): \(lock)")
            }
        }
        for key in ["k\u{0}nul", String(repeating: "k", count: 1025)] {
            let set = try scene.systemCall(
                "io.kvd.Defaults.Set", ["domain": "com.example.keys", "key": key, "value": "v"])
            let lock = try scene.systemCall("io.kvd.System.Lock", ["domain": "com.example.keys", "key": key])
            #expect(
                set.error == "io.kvd.Defaults.InvalidName" && lock.error == "io.kvd.Defaults.InvalidName",
                "\(set) \(lock)")
        }
        scene.system?.stop()  // stopping compacts the log into domain files: none may appear
        let stateAfter = try FileManager.default.contentsOfDirectory(atPath: scene.systemState).sorted()
        #expect(stateAfter == stateBefore, "the state folder held \(stateBefore), now \(stateAfter)")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scene.root).filter { !$0.hasSuffix(".log") }.sorted()
                == rootBefore.filter { !$0.hasSuffix(".log") })
        #expect(access("/tmp/kvd-e2e-escape.json", F_OK) != 0)
    }

    @Test func aWatcherSeesALockAtOnceAndItsOwnValueWhenItGoes() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        #expect(try user.kvctl("set", "com.example.watched", "k", "mine").status == 0)
        let watcher = try user.connect()
        defer { watcher.close() }
        let initial = try watcher.call(
            "io.kvd.Defaults.Watch", ["domain": "com.example.watched", "key": "k"], more: true)
        #expect(Self.changes(initial) == ["k": "mine"], "\(initial)")
        try scene.setAndLock("com.example.watched", "k", "policy")
        let locked = try Self.nextChange(of: watcher, within: 5)
        #expect(
            locked?["value"] as? String == "policy" && locked?["source"] as? String == "locked",
            "the watcher saw \(locked.map { "\($0)" } ?? "nothing")\n\(scene.logs())")
        #expect(
            try scene.systemCall("io.kvd.System.Unlock", ["domain": "com.example.watched", "key": "k"]).error == nil)
        let unlocked = try Self.nextChange(of: watcher, within: 5)
        #expect(
            unlocked?["value"] as? String == "mine" && unlocked?["source"] == nil,
            "the watcher saw \(unlocked.map { "\($0)" } ?? "nothing")")
    }

    /// The same `Get` bytes again and again on one connection (kvd keeps hot replies, see
    /// GetReplyCache): each change of the user's value, the system default, a lock or its lift
    /// shows at once (the user's) or as soon as the system instance's change arrives.
    @Test func aRepeatedGetSeesEveryLayerChange() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        let client = try user.connect()
        defer { client.close() }
        let get = #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"com.example.hot","key":"k"}}"#
        func read() throws -> (value: String?, source: String?, error: String?) {
            let reply = try client.call(get)
            return (reply.value as? String, reply.parameters["source"] as? String, reply.error)
        }
        #expect(try read().error == "io.kvd.Defaults.NotFound")
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": "com.example.hot", "key": "k", "value": "default"])
                .error == nil)
        #expect(
            try eventually { try read().value == "default" }, "the system default: \(String(describing: try? read()))")
        #expect(try read().source == "system")
        #expect(try user.kvctl("set", "com.example.hot", "k", "mine").status == 0)
        #expect(
            try read().value == "mine" && read().source == "user",
            "the user's own value at once: \(String(describing: try? read()))")
        #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": "com.example.hot", "key": "k"]).error == nil)
        #expect(try eventually { try read().source == "locked" }, "the lock: \(String(describing: try? read()))")
        #expect(try read().value == "default")
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": "com.example.hot", "key": "k"]).error == nil)
        #expect(try eventually { try read().value == "mine" }, "the lift: \(String(describing: try? read()))")
    }

    @Test func everyWriteToALockedKeyThroughTheUsersKvdFailsAndChangesNothing() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        let domain = "com.example.locked"
        #expect(try user.kvctl("set", domain, "k", "mine").status == 0)
        #expect(try user.kvctl("set", domain, "other", "x").status == 0)
        try scene.setAndLock(domain, "k", "policy")
        #expect(
            try eventually { try user.get(domain, "k").source == "locked" },
            "the lock never reached the user's kvd\n\(scene.logs())")
        let raw: [(String, [String: Any])] = [
            ("io.kvd.Defaults.Set", ["domain": domain, "key": "k", "value": "changed"]),
            (
                "io.kvd.Defaults.Apply",
                ["domain": domain, "changes": [["key": "other", "value": "y"], ["key": "k", "value": "changed"]]]
            ),
            ("io.kvd.Defaults.Apply", ["domain": domain, "changes": [["key": "k"]]]),
            ("io.kvd.Defaults.Delete", ["domain": domain, "key": "k"]),
            ("io.kvd.Defaults.Delete", ["domain": domain]),
        ]
        for (method, parameters) in raw {
            let reply = try user.call(method, parameters)
            #expect(
                reply.error == Self.keyLocked && reply.parameters["key"] as? String == "k",
                "\(method) \(parameters): \(reply)")
        }
        let importFile = try user.file("import.json", #"{"k": "imported", "other": "imported"}"#)
        let commands: [[String]] = [
            ["set", domain, "k", "changed"], ["delete", domain, "k"], ["delete", domain],
            ["rename", domain, "k", "renamed"], ["rename", domain, "other", "k"], ["import", domain, importFile],
        ]
        for command in commands {
            let result = try user.kvctl(command)
            #expect(
                result.status == 1 && result.stderr.contains("lock"),
                "kvctl \(command): \(result.status) \(result.stderr)")
        }
        #expect(try user.get(domain, "k").value as? String == "policy")
        // The import left out the locked key only (a lock blocks only its key).
        #expect(try user.get(domain, "other").value as? String == "imported")
        #expect(try user.get(domain, "renamed").error == "io.kvd.Defaults.NotFound")
        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "k"]).error == nil)
        #expect(
            try eventually { try user.get(domain, "k").value as? String == "mine" },
            "the user's own value did not come back: \(String(describing: try? user.get(domain, "k")))")
        #expect(try user.get(domain, "k").source == "user")
    }

    @Test func getThroughTheUsersKvdSaysWhereTheValueComesFrom() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        let domain = "com.example.sources"
        for key in ["both", "mine", "locked", "ghost"] {
            #expect(try user.kvctl("set", domain, key, "own").status == 0)
        }
        for (key, value) in [("system", "machine"), ("both", "machine"), ("locked", "policy")] {
            #expect(
                try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": key, "value": value]).error == nil
            )
        }
        for key in ["locked", "ghost"] {
            #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": domain, "key": key]).error == nil)
        }
        #expect(
            try eventually { try user.get(domain, "ghost").error != nil },
            "the locks never reached the user's kvd\n\(scene.logs())")
        let expected: [(key: String, value: String, source: String)] = [
            ("system", "machine", "system"), ("both", "own", "user"), ("mine", "own", "user"),
            ("locked", "policy", "locked"),
        ]
        for (key, value, source) in expected {
            let get = try user.get(domain, key)
            #expect(get.value as? String == value && get.source == source, "\(key): \(get)")
        }
        let ghost = try user.get(domain, "ghost")
        #expect(ghost.error == "io.kvd.Defaults.NotFound", "a lock with no system value: \(ghost)")
        #expect(try user.kvctl("get", domain, "locked").stdout == "policy\n")
    }

    static func changes(_ reply: [String: Any]) -> [String: String] {
        let items = reply.parameters["changes"] as? [[String: Any]] ?? []
        return items.reduce(into: [:]) { $0[$1["key"] as? String ?? "?"] = $1["value"] as? String ?? "(removed)" }
    }

    /// The first change of the next Watch reply, if one arrives within `seconds`.
    static func nextChange(of watcher: RawClient, within seconds: Double) throws -> [String: Any]? {
        (try watcher.reply(within: seconds)?.parameters["changes"] as? [[String: Any]])?.first
    }
}
