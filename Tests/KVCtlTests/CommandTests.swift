import Glibc
import Testing

@testable import KVCtl

/// kvctl's commands end to end against an in-memory daemon.
@Suite struct CommandTests {
    @Test func getOfAStringPrintsExactlyTheStringAndANewline() {
        let daemon = FakeDaemon()
        #expect(daemon.kvctl("set", "com.a", "greeting", "hello  world ").status == 0)
        let result = daemon.kvctl("get", "com.a", "greeting")
        #expect(result.status == 0)
        #expect(result.out == "hello  world \n")
        #expect(result.err == "")
    }

    @Test func missingKeySaysWhatToDoAndExitsOne() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "k", "v")
        let result = daemon.kvctl("get", "com.a", "x")
        #expect(result.status == 1)
        #expect(result.out == "")
        #expect(result.err == "kvctl: no key \"x\" in domain \"com.a\" (list keys with: kvctl keys com.a)\n")
        #expect(
            daemon.kvctl("keys", "com.none").err == "kvctl: no domain \"com.none\" (list domains with: kvctl domains)\n"
        )
    }

    @Test func everyTypeReadsBackWithItsType() {
        let daemon = FakeDaemon()
        let cases: [([String], String, String)] = [
            (["-int", "7"], "integer", "7"), (["-float", "1"], "real", "1.0"), (["-bool", "yes"], "bool", "true"),
            (["-date", "2026-11-29T17:00:00Z"], "date", "2026-11-29T17:00:00.000Z"),
            (["-data", "00ff"], "data", "00ff"),
            (["-array", "a"], "array", "[\n  \"a\"\n]"), (["-dict", "k", "v"], "dictionary", "{\n  \"k\": \"v\"\n}"),
        ]
        for (flags, type, shown) in cases {
            #expect(daemon.kvctl(["set", "com.a", "k"] + flags).status == 0)
            #expect(daemon.kvctl("read-type", "com.a", "k").out == type + "\n")
            #expect(daemon.kvctl("get", "com.a", "k").out == shown + "\n")
        }
        #expect(daemon.kvctl("--json", "get", "com.a", "k").out == "{\"k\":\"v\"}\n")
    }

    @Test func arrayAddCreatesThenAppends() {
        let daemon = FakeDaemon()
        #expect(daemon.kvctl("set", "com.a", "list", "-array-add", "a").status == 0)
        #expect(daemon.kvctl("set", "com.a", "list", "-array-add", "-int", "2").status == 0)
        #expect(daemon.kvctl("--json", "get", "com.a", "list").out == "[\"a\",2]\n")
        _ = daemon.kvctl("set", "com.a", "s", "text")
        let result = daemon.kvctl("set", "com.a", "s", "-array-add", "x")
        #expect(result.status == 1)
        #expect(result.err.contains("\"s\" holds a string, not an array"))
    }

    @Test func dictAddMerges() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "d", "-dict", "a", "1", "b", "2")
        _ = daemon.kvctl("set", "com.a", "d", "-dict-add", "b", "-int", "3", "c", "4")
        #expect(daemon.kvctl("--json", "get", "com.a", "d").out == "{\"a\":\"1\",\"b\":3,\"c\":\"4\"}\n")
    }

    @Test func renameMovesTheValue() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "old", "-int", "5")
        #expect(daemon.kvctl("rename", "com.a", "old", "new").status == 0)
        #expect(daemon.kvctl("keys", "com.a").out == "new\n")
        #expect(daemon.kvctl("get", "com.a", "new").out == "5\n")
        let missing = daemon.kvctl("rename", "com.a", "old", "other")
        #expect(missing.status == 1)
        #expect(missing.err.contains("no key \"old\" in domain \"com.a\""))
    }

    @Test func exportThenImportReplacesTheDomain() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "n", "-float", "2")
        _ = daemon.kvctl("set", "com.a", "when", "-date", "2026-01-01T00:00:00Z")
        let file = "/tmp/kvctl-test-export-\(getpid()).json"
        defer { unlink(file) }
        #expect(daemon.kvctl("export", "com.a", file).status == 0)
        _ = daemon.kvctl("set", "com.b", "stale", "x")
        #expect(daemon.kvctl("import", "com.b", file).status == 0)
        #expect(daemon.kvctl("keys", "com.b").out == "n\nwhen\n")
        #expect(daemon.kvctl("get", "com.b").out == daemon.kvctl("export", "com.a", "-").out)
        #expect(daemon.kvctl("import", "com.c", "-", stdin: "{\"x\": 1}").status == 0)
        #expect(daemon.kvctl("read-type", "com.c", "x").out == "integer\n")
    }

    @Test func importRefusesAnythingButAnObject() {
        let daemon = FakeDaemon()
        let result = daemon.kvctl("import", "com.a", "-", stdin: "[1]")
        #expect(result.status == 1)
        #expect(result.err == "kvctl: stdin holds a array, but import needs a typed JSON object of key: value\n")
    }

    @Test func domainsDeleteAndWatch() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.b", "k", "v")
        _ = daemon.kvctl("set", "com.a", "k", "v")
        #expect(daemon.kvctl("domains").out == "com.a\ncom.b\n")
        #expect(daemon.kvctl("watch", "com.a").out == "k = \"v\"\n")
        #expect(daemon.kvctl("delete", "com.b").status == 0)
        #expect(daemon.kvctl("--json", "domains").out == "[\"com.a\"]\n")
        #expect(daemon.kvctl("--json", "delete", "com.a", "k").out == "{\"revision\":4}\n")
    }

    @Test func usageErrorExitsTwoWithAUsageLine() {
        let daemon = FakeDaemon()
        let result = daemon.kvctl("set", "com.a", "k", "-int", "many")
        #expect(result.status == 2)
        #expect(result.out == "")
        #expect(
            result.err
                == "kvctl: -int needs a whole number from -9223372036854775808 to 9223372036854775807, not \"many\"\nusage: kvctl [OPTIONS] set DOMAIN KEY [TYPE-FLAG] VALUE... (see: kvctl help set)\n"
        )
    }

    @Test func helpGoesToStdoutAndNamesEveryCommand() {
        let console = RecordingConsole()
        #expect(KVCtl.run(arguments: ["--help"], environment: [:], console: console) == 0)
        for command in [
            "get", "set", "delete", "domains", "keys", "read-type", "rename", "export", "import", "watch",
            "--no-autostart", "--json", "--socket",
        ] {
            #expect(console.output.contains(command))
        }
        let one = RecordingConsole()
        #expect(KVCtl.run(arguments: ["set", "--help"], environment: [:], console: one) == 0)
        #expect(one.output.contains("-array-add"))
    }

    @Test func cannotConnectNamesTheSocket() {
        let console = RecordingConsole()
        let path = "/tmp/kvctl-test-nobody-\(getpid()).sock"
        let status = KVCtl.run(
            arguments: ["get", "com.a", "k"], environment: ["KVD_SOCKET": path, "KVD_NO_AUTOSTART": "1"],
            console: console)
        #expect(status == 1)
        #expect(console.errors.hasPrefix("kvctl: cannot connect to kvd at \(path): No such file or directory"))
        #expect(console.errors.contains("systemctl --user start kvd.socket"))
    }

    @Test func missingDaemonBinaryIsNamed() {
        let console = RecordingConsole()
        let path = "/tmp/kvctl-test-nobody-\(getpid()).sock"
        let status = KVCtl.run(
            arguments: ["--socket", path, "domains"], environment: [:], console: console, daemonPath: "/nonexistent/kvd"
        )
        #expect(status == 1)
        #expect(console.errors.contains("kvd is not at /nonexistent/kvd"))
    }
}

extension FakeDaemon {
    func kvctl(_ arguments: [String]) -> (status: Int32, out: String, err: String) {
        let console = RecordingConsole()
        let status = KVCtl.run(
            arguments: ["--socket", path, "--no-autostart"] + arguments, environment: [:], console: console)
        return (status, console.output, console.errors)
    }
}
