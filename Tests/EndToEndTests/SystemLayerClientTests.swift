import Foundation
import Glibc
import Testing

/// KVClient in a real app process (`kvclient-probe`) against a user's real kvd that follows a
/// real system instance: Foundation's `objectIsForced(forKey:)`, a refused `set` that leaves the
/// locked value showing, and observers that see locks come and go with no restart.
@Suite(.needsSystemAccounts)
struct SystemLayerClientTests {
    @Test func anAppSeesALockAsForcedKeepsShowingItsValueAndGetsItsOwnBack() throws {
        let scene = try SystemScene()
        let user = try scene.startUser(scene.accounts.user)
        let app = try Interactive(
            Binaries.directory + "/kvclient-probe", ["--socket", user.socket, "--domain", "org.example.browser"])
        #expect(app.ask(#"set homepage "mine""#) == "ok")
        #expect(app.ask("forced homepage") == "free writable")
        #expect(app.ask("watch homepage") == "ok")

        try scene.setAndLock("org.example.browser", "homepage", "https://intranet.example")
        // Event-driven all the way (system instance → user's kvd → the app's watch); the long
        // wait is for a machine busy with the rest of the suite.
        #expect(app.line(timeout: 30) == #"change homepage "https://intranet.example""#, "the observer sees the lock")
        #expect(app.ask("forced homepage") == "forced read-only")
        let refused = app.ask(#"set homepage "other""#) ?? ""
        #expect(refused.hasPrefix("error:") && refused.contains("locked"), "\(refused)")
        #expect(app.ask(#"setquietly homepage "other""#) == "ok")
        #expect(app.ask("get homepage") == #""https://intranet.example""#, "a refused write never shows")

        #expect(
            try scene.systemCall("io.kvd.System.Unlock", ["domain": "org.example.browser", "key": "homepage"]).error
                == nil)
        #expect(app.line(timeout: 30) == #"change homepage "mine""#, "unlocking brings the app's own value back")
        #expect(app.ask("forced homepage") == "free writable")
        let answers = [app.ask(#"set homepage "new""#), app.line()]  // the observer may speak first
        #expect(Set(answers) == ["ok", #"change homepage "new""#], "\(answers)")
    }

    /// A key the admin locks without giving it a value: the app's `isWritable` answers false at
    /// once through its streamed cache, and true again once the lock lifts; the app's own value
    /// stays its own. `objectIsForced(forKey:)` is true while the lock holds, as for a lock with a
    /// value.
    @Test func anAppSeesAKeyLockedWithoutAValueAsReadOnlyUntilItIsUnlocked() throws {
        let scene = try SystemScene()
        let domain = "org.example.valueless"
        let user = try scene.startUser(scene.accounts.user)
        let probe = Binaries.directory + "/kvclient-probe"
        let app = try Interactive(probe, ["--socket", user.socket, "--domain", domain])
        #expect(app.ask(#"set theme "dark""#) == "ok")
        #expect(app.ask("forced theme") == "free writable")

        #expect(try scene.systemCall("io.kvd.System.Lock", ["domain": domain, "key": "theme"]).error == nil)
        #expect(Self.answer(of: app, "forced theme", becomes: "forced read-only"), "the lock did not reach the app")
        let refused = app.ask(#"set theme "light""#) ?? ""
        #expect(refused.hasPrefix("error:") && refused.contains("locked"), "\(refused)")

        #expect(try scene.systemCall("io.kvd.System.Unlock", ["domain": domain, "key": "theme"]).error == nil)
        #expect(Self.answer(of: app, "forced theme", becomes: "free writable"), "the unlock did not reach the app")
        #expect(app.ask("get theme") == #""dark""#)
    }

    /// Asks `question` until `app` answers `expected` (at most 30 s: the lock travels from the
    /// system instance through the user's kvd to the app's watch on a machine busy with the suite).
    static func answer(of app: Interactive, _ question: String, becomes expected: String) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if app.ask(question) == expected { return true }
            usleep(20_000)
        }
        return false
    }
}
