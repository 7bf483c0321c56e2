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
}
