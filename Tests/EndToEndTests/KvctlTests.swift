import Foundation
import Glibc
import Testing

/// The real `kvctl` as a subprocess against the real `kvd`, as a shell script would use them.
@Suite(.serialized) struct KvctlTests {
    @Test func everyTypeFlagStoresItsTypeAndGetPrintsItPlainly() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let cases: [([String], String, String)] = [
            (["plain text"], "plain text\n", "string"),
            (["-string", "-dash"], "-dash\n", "string"),
            (["-int", "42"], "42\n", "integer"),
            (["-float", "1"], "1.0\n", "real"),
            (["-bool", "YES"], "true\n", "bool"),
            (["-date", "2026-11-29T18:00:00.250+01:00"], "2026-11-29T17:00:00.250Z\n", "date"),
            (["-data", "68690a"], "68690a\n", "data"),
        ]
        for (index, (flags, expected, type)) in cases.enumerated() {
            let set = try run(
                Binaries.kvctl, ["--socket", sandbox.socket, "set", "com.example.t", "k\(index)"] + flags)
            #expect(set.status == 0 && set.stdout.isEmpty, "\(flags): \(set.stderr)")
            let get = try kvctl(sandbox, "get", "com.example.t", "k\(index)")
            #expect(get.status == 0 && get.stdout == expected, "\(flags): got \(get.stdout.debugDescription)")
            #expect(try kvctl(sandbox, "read-type", "com.example.t", "k\(index)").stdout == type + "\n")
        }
        let array = try kvctl(sandbox, "set", "com.example.t", "list", "-array", "a", "-int", "2")
        #expect(array.status == 0)
        #expect(try kvctl(sandbox, "--json", "get", "com.example.t", "list").stdout == "[\"a\",2]\n")
        #expect(try kvctl(sandbox, "set", "com.example.t", "list", "-array-add", "c").status == 0)
        #expect(try kvctl(sandbox, "--json", "get", "com.example.t", "list").stdout == "[\"a\",2,\"c\"]\n")
        #expect(
            try kvctl(sandbox, "set", "com.example.t", "raw", "--json", #"{"$dict": {"$x": {"$data": "aGk="}}}"#).status
                == 0)
        #expect(
            try kvctl(sandbox, "--json", "get", "com.example.t", "raw").stdout == #"{"$dict":{"$x":{"$data":"aGk="}}}"#
                + "\n")
        daemon.stop()
    }

    @Test func commandSubstitutionGetsExactlyTheString() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.sh", "path", "/home/ada/My Files")
        let shell = try run(
            "/bin/sh",
            ["-c", "x=$(\(Binaries.kvctl) --socket \(sandbox.socket) get com.example.sh path); printf '[%s]' \"$x\""])
        #expect(shell.stdout == "[/home/ada/My Files]")
        daemon.stop()
    }

    @Test func exitStatusAndMessagesSayWhatHappened() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let missing = try kvctl(sandbox, "get", "com.example.none", "k")
        #expect(missing.status == 1 && missing.stdout.isEmpty)
        #expect(
            missing.stderr.split(separator: "\n").count == 1 && missing.stderr.contains("com.example.none"),
            "\(missing.stderr)")
        let usage = try kvctl(sandbox, "set", "com.example.x")
        #expect(usage.status == 2 && usage.stderr.contains("usage"), "\(usage.stderr)")
        let badInt = try kvctl(sandbox, "set", "com.example.x", "k", "-int", "many")
        #expect(badInt.status == 2 && badInt.stderr.contains("many"))
        let badDomain = try kvctl(sandbox, "get", "../etc", "k")
        #expect(badDomain.status != 0 && badDomain.stderr.contains("domain"), "\(badDomain.stderr)")
        daemon.stop()
        let down = try kvctl(sandbox, "--no-autostart", "get", "com.example.x", "k")
        #expect(
            down.status == 1 && down.stderr.contains(sandbox.socket) && down.stderr.contains("kvd"), "\(down.stderr)")
    }

    @Test func domainsKeysDeleteRenameExportImport() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.a", "one", "-int", "1")
        _ = try kvctl(sandbox, "set", "com.example.a", "two", "2")
        _ = try kvctl(sandbox, "set", "-g", "Global", "yes")
        #expect(try kvctl(sandbox, "domains").stdout == "NSGlobalDomain\ncom.example.a\n")
        #expect(try kvctl(sandbox, "rename", "com.example.a", "two", "deux").status == 0)
        #expect(try kvctl(sandbox, "keys", "com.example.a").stdout == "deux\none\n")
        let exported = try kvctl(sandbox, "export", "com.example.a", "-")
        #expect(exported.status == 0)
        #expect(try kvctl(sandbox, "import", "com.example.b", "-", input: exported.stdout).status == 0)
        let original = try kvctl(sandbox, "--json", "get", "com.example.a").stdout
        #expect(try kvctl(sandbox, "--json", "get", "com.example.b").stdout == original)
        #expect(try kvctl(sandbox, "delete", "com.example.a", "one").status == 0)
        #expect(try kvctl(sandbox, "get", "com.example.a", "one").status == 1)
        #expect(try kvctl(sandbox, "delete", "com.example.a").status == 0)
        #expect(try kvctl(sandbox, "domains").stdout == "NSGlobalDomain\ncom.example.b\n")
        daemon.stop()
    }

    @Test func autostartsKvdFromBesideItselfWhenNothingListens() throws {
        let sandbox = Sandbox()
        let environment = ["KVD_NO_AUTOSTART": "", "KVD_STATE_DIR": sandbox.state]
        let set = try run(
            Binaries.kvctl, ["--socket", sandbox.socket, "set", "com.example.auto", "k", "v"], environment: environment)
        #expect(set.status == 0, "\(set.stderr)")
        let get = try run(
            Binaries.kvctl, ["--socket", sandbox.socket, "get", "com.example.auto", "k"], environment: environment)
        #expect(get.stdout == "v\n")
        #expect(sandbox.stateFiles().contains("kvd.lock"), "the started kvd must use KVD_STATE_DIR")
        // Stop the daemon kvctl started (it listens on our socket; its pid is the lock holder).
        let pids = try run(
            "/bin/sh",
            ["-c", "fuser \(sandbox.state)/kvd.lock 2>/dev/null || pgrep -f 'kvd --socket \(sandbox.socket)'"])
        for pid in pids.stdout.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap({ Int32($0) }) {
            kill(pid, SIGTERM)
        }
    }

    /// kvctls started at once for one socket start one kvd between them (the others wait for
    /// `SOCKET.autostart.lock`), and its standard error is in the state folder's
    /// `kvd-autostart.log`: one start noted there, and no second kvd finding the socket taken. (The
    /// real programs race only now and then; `AutostartTests` makes the race certain.)
    @Test func kvctlsStartedAtOnceAutostartOneKvd() throws {
        let sandbox = Sandbox()
        defer { stopDaemons(listeningOn: sandbox.socket) }
        let environment = ["KVD_NO_AUTOSTART": "", "KVD_STATE_DIR": sandbox.state]
        var env = ProcessInfo.processInfo.environment
        for (name, value) in environment { env[name] = value }
        let children = try (0..<6).map {
            try ChildProcess(
                Binaries.kvctl, ["--socket", sandbox.socket, "set", "com.example.race", "k\($0)", "v"], environment: env
            )
        }
        #expect(children.map { $0.wait(timeout: 30) } == Array(repeating: 0, count: 6))
        let json = try kvctl(sandbox, "--json", "get", "com.example.race").stdout
        #expect((0..<6).allSatisfy { json.contains("\"k\($0)\"") }, "not every kvctl set its key: \(json)")
        let log = (try? String(contentsOfFile: sandbox.state + "/kvd-autostart.log", encoding: .utf8)) ?? ""
        #expect(log.split(separator: "\n").filter { $0.hasPrefix("kvd-autostart: ") }.count == 1, "\(log)")
        #expect(!log.contains("already listening"), "\(log)")
    }

    /// Why an autostarted kvd could not start is in its log, and kvctl quotes it.
    @Test func anAutostartedKvdThatCannotStartIsExplainedFromItsLog() throws {
        let sandbox = Sandbox()
        let state = sandbox.root + "/open-state"
        mkdir(state, 0o700)
        chmod(state, 0o777)  // kvd refuses a state folder other users can write to
        let set = try run(
            Binaries.kvctl, ["--socket", sandbox.socket, "set", "com.example.x", "k", "v"],
            environment: ["KVD_NO_AUTOSTART": "", "KVD_STATE_DIR": state])
        #expect(set.status == 1)
        #expect(set.stderr.contains(state + "/kvd-autostart.log ends: "), "\(set.stderr)")
        #expect(set.stderr.contains("chmod go-w"), "\(set.stderr)")
    }
}

/// Every program answers `--version` with its name and the one version of the suite, exit 0.
@Suite struct VersionTests {
    @Test(arguments: ["kvd", "kvctl", "habits"])
    func everyProgramAnswersVersion(program: String) throws {
        let result = try run(Binaries.directory + "/" + program, ["--version"])
        #expect(result.status == 0 && result.stderr.isEmpty, "\(program): \(result.stderr)")
        let words = result.stdout.split(separator: " ")
        #expect(words.count == 2 && words[0] == program && result.stdout.hasSuffix("\n"), "\(result.stdout)")
        #expect(words.last.map { $0.dropLast().split(separator: ".").count == 3 } == true, "\(result.stdout)")
    }
}

/// What kvctl exports, it imports: a value as deep as the contract allows sits one level deeper
/// in the export file (two under a `$dict` wrapper) than on its own.
@Suite struct ExportImportLimitTests {
    @Test func anExportHoldingAValueOf512LevelsImportsBack() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let deep = String(repeating: "[", count: 512) + "1" + String(repeating: "]", count: 512)
        let deepDictionary =
            String(repeating: "[", count: 510) + #"{"$dict": {"$x": 1}}"# + String(repeating: "]", count: 510)
        #expect(try kvctl(sandbox, "set", "com.example.deep", "deep", "--json", deep).status == 0)
        for (domain, value) in [("com.example.deep", deep), ("com.example.dollar", deepDictionary)] {
            let set = try kvctl(sandbox, "set", domain, "$key", "--json", value)
            #expect(set.status == 0, "\(set.stderr)")
            let file = sandbox.file("\(domain).export.json")
            let export = try kvctl(sandbox, "export", domain, file)
            #expect(export.status == 0, "\(export.stderr)")
            let imported = try kvctl(sandbox, "import", domain + ".copy", file)
            #expect(imported.status == 0, "\(imported.stderr)")
            #expect(
                try kvctl(sandbox, "--json", "get", domain + ".copy", "$key").stdout
                    == (try kvctl(sandbox, "--json", "get", domain, "$key").stdout))
        }
        let tooDeep = try kvctl(sandbox, "import", "com.example.x", "-", input: #"{"k": "# + "[" + deep + "]}")
        #expect(
            tooDeep.status == 1 && tooDeep.stderr.contains("\"k\"") && tooDeep.stderr.contains("512"),
            "\(tooDeep.stderr)")
        daemon.stop()
    }
}
