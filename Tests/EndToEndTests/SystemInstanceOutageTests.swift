import Glibc
import Testing

/// The system instance crashing and coming back changed, and one user flooding it.
@Suite(.needsSystemAccounts)
struct SystemInstanceOutageTests {
    /// Killed with SIGKILL while two users' kvds follow it; changed meanwhile by another
    /// instance on the same state folder; restarted on its socket: both users catch up, and
    /// keep their own values, those under a lock the restart lifted included.
    @Test func usersCatchUpWithASystemInstanceRestartedAfterAKillAndLoseNothing() throws {
        let scene = try SystemScene()
        let domain = "com.example.outage"
        let users = [try scene.startUser(scene.accounts.user), try scene.startUser(scene.accounts.other)]
        for user in users {
            #expect(try user.kvctl("set", domain, "own", user.account.name).status == 0)
            #expect(try user.kvctl("set", domain, "lifted", "mine").status == 0)
        }
        try scene.setAndLock(domain, "lifted", "policy")
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": "changed", "value": 1]).error == nil)
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": domain, "key": "removed", "value": 1]).error == nil)
        for user in users {
            #expect(
                try eventually {
                    try user.get(domain, "lifted").source == "locked" && user.get(domain, "removed").value != nil
                }, "\(scene.logs())")
        }
        #expect(scene.system?.stop(SIGKILL) == 128 + SIGKILL)
        for user in users {
            let kept = try user.get(domain, "lifted")
            #expect(
                kept.value as? String == "policy" && kept.source == "locked",
                "with the system instance dead, \(user.account.name) got \(kept)")
        }
        let meanwhile = try scene.startSystem(on: scene.root + "/run/meanwhile.sock", activated: false)
        let changes: [(String, [String: Any])] = [
            ("io.kvd.System.Unlock", ["domain": domain, "key": "lifted"]),
            ("io.kvd.Defaults.Set", ["domain": domain, "key": "changed", "value": 2]),
            ("io.kvd.Defaults.Delete", ["domain": domain, "key": "removed"]),
            ("io.kvd.Defaults.Set", ["domain": domain, "key": "new", "value": "added"]),
            ("io.kvd.System.Lock", ["domain": domain, "key": "new"]),
        ]
        for (method, parameters) in changes {
            #expect(try scene.systemCall(method, parameters, on: meanwhile.socket).error == nil)
        }
        #expect(meanwhile.stop() == 0, "\(meanwhile.errorOutput())")
        scene.system = try scene.startSystem()
        for user in users {
            let caughtUp = try eventually(within: 15) {
                try user.get(domain, "lifted").value as? String == "mine" && user.get(domain, "new").source == "locked"
                    && user.get(domain, "changed").value as? Int == 2
                    && user.get(domain, "removed").error == "io.kvd.Defaults.NotFound"
            }
            #expect(
                caughtUp,
                "\(user.account.name) did not catch up: \(String(describing: try? user.call("io.kvd.Defaults.List", ["domain": domain])))\n\(scene.logs())"
            )
            #expect(try user.get(domain, "own").value as? String == user.account.name)
            #expect(try user.get(domain, "lifted").source == "user")
        }
    }

    /// With a cap of 8 connections per uid, a user's ninth connection and later ones are closed
    /// at once; other users and root are still served, and the user is again once one closes.
    @Test func aUserWhoFloodsTheSystemInstanceIsCappedAndOthersAreStillServed() throws {
        let scene = try SystemScene(maxConnectionsPerUID: 8)
        #expect(
            try scene.systemCall("io.kvd.Defaults.Set", ["domain": "com.example.flood", "key": "k", "value": "served"])
                .error == nil)
        let get = try RawClient.message(
            "io.kvd.Defaults.Get", ["domain": "com.example.flood", "key": "k"], more: false)
        func served(_ client: RawClient) -> Bool {
            client.send(get)
            return client.receive()?.contains("served") == true
        }
        let flooder = scene.accounts.other
        var held: [RawClient] = []
        defer { for connection in held { connection.close() } }
        for _ in 0..<20 {
            let client = try RawClient.connect(scene.systemSocket, as: flooder)
            held.append(client)
            if !served(client) { break }
        }
        #expect(
            held.count == 9,
            "\(flooder.name) was refused at its connection \(held.count), not its ninth\n\(scene.logs())")
        for _ in 0..<3 {
            let refused = try RawClient.connect(scene.systemSocket, as: flooder)
            defer { refused.close() }
            #expect(!served(refused), "\(flooder.name) was served past the cap")
        }
        for account in [scene.accounts.user, scene.accounts.admin, nil] {
            let client = try RawClient.connect(scene.systemSocket, as: account)
            defer { client.close() }
            #expect(
                served(client), "\(account?.name ?? "root") was not served while \(flooder.name) held its connections")
        }
        held.removeFirst().close()
        #expect(
            try eventually(within: 5) {
                let again = try RawClient.connect(scene.systemSocket, as: flooder)
                defer { again.close() }
                return served(again)
            }, "\(flooder.name) was not served again once one of its connections closed")
    }
}
