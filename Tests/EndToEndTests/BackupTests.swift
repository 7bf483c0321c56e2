import Foundation
import Glibc
import Testing

/// Backups with the real kvctl against the real kvd: a consistent snapshot while another client
/// writes, every value type back into a fresh state folder, and nothing changed without --yes or
/// from a damaged or newer file.
@Suite(.serialized) struct BackupEndToEndTests {
    /// The backup file at `path` (or the text of one), parsed.
    static func parse(_ text: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
    }

    static func exports(_ sandbox: Sandbox, _ domains: [String]) throws -> [String: String] {
        var texts: [String: String] = [:]
        for domain in domains { texts[domain] = try kvctl(sandbox, "export", domain, "-").stdout }
        return texts
    }

    /// A writer sets counter i in domain A, then in domain B, each its own commit (revisions
    /// F+2i-1 and F+2i after F commits of 100 domains sorted between the two, which a
    /// domain-by-domain copy would take long enough to read for the writer to move on); every
    /// backup taken meanwhile holds exactly the state at its revision R: A = ceil((R-F)/2),
    /// B = floor((R-F)/2) (so B <= A <= B+1), and says R on stderr.
    @Test func backupWhileAnotherClientWritesIsTheStateAtOneRevision() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let filler = try RawClient(sandbox.socket)
        let fillers = 100
        for index in 0..<fillers {
            _ = try filler.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.m\#(index)","key":"k","value":\#(index)}}"#
            )
        }
        filler.close()
        let writer = try BackgroundWriter(sandbox, first: 1) { client, index in
            for domain in ["com.example.a", "com.example.z"] {
                _ = try? client.call(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"counter","value":\#(index)}}"#
                )
            }
        }
        var between = 0
        for attempt in 0..<15 {
            let file = sandbox.root + "/backup\(attempt).json"
            let run = try kvctl(sandbox, "backup", file)
            #expect(run.status == 0, "\(run.stderr)")
            let backup = try Self.parse(try String(contentsOfFile: file, encoding: .utf8))
            let revision = try #require(backup["revision"] as? Int)
            let domains = backup["domains"] as? [String: [String: Int]] ?? [:]
            let (a, b) = (domains["com.example.a"]?["counter"] ?? 0, domains["com.example.z"]?["counter"] ?? 0)
            #expect(domains.count == fillers + (a > 0 ? 1 : 0) + (b > 0 ? 1 : 0))
            #expect(
                a == (revision - fillers + 1) / 2 && b == (revision - fillers) / 2,
                "backup at revision \(revision) holds a=\(a) b=\(b)")
            #expect(b <= a && a <= b + 1)
            #expect(run.stderr.contains("at revision \(revision)"), "\(run.stderr)")
            if a != b { between += 1 }
        }
        writer.stop()
        print("backups between the two writes of a step: \(between) of 15")
        daemon.stop()
    }

    /// Every value type, nested ones, data, dates and a key starting with "$", backed up,
    /// restored into a fresh state folder: the same `kvctl export` of every domain.
    @Test func everyValueTypeComesBackInAFreshStateFolder() throws {
        let source = Sandbox()
        var daemon = try Daemon(source)
        let typed = #"""
            {"$dict": {"$dollar": "d", "s": "text \"quoted\" ✓", "i": -42, "r": 2.5, "whole": 3.0, "t": true, "f": false,
             "date": {"$date": "2026-11-30T12:34:56.789Z"}, "data": {"$data": "AAEC/w=="},
             "list": [1, "two", {"$date": "2001-01-01T00:00:00.000Z"}, [{"$data": ""}]],
             "nested": {"a": {"b": {"c": [1.5, {"$dict": {"$k": "dollar key"}}]}}}, "empty": {}, "none": []}}
            """#
        #expect(try kvctl(source, "import", "com.example.types", "-", input: typed).status == 0)
        _ = try kvctl(source, "set", "NSGlobalDomain", "AppleLanguages", "-array", "en", "fr")
        _ = try kvctl(source, "set", "com.example.other", "k", "-int", "1")
        let domains = ["NSGlobalDomain", "com.example.other", "com.example.types"]
        let before = try Self.exports(source, domains)
        let file = source.root + "/all.json"
        #expect(try kvctl(source, "backup", file).status == 0)
        daemon.stop()

        let target = Sandbox()
        daemon = try Daemon(target)
        let run = try kvctl(target, "restore-backup", file, "--yes")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("restored 3 domains"), "\(run.stderr)")
        #expect(try Self.exports(target, domains) == before)
        #expect(try kvctl(target, "domains").stdout.split(separator: "\n").map(String.init) == domains)
        daemon.stop()
    }

    /// A store larger than `--max-client-memory` (20 MiB under 16M, in 5 domains of 4 MiB, each
    /// more than one piece) is backed up, the replies made as kvctl reads them, and restored into a
    /// fresh state folder value for value.
    @Test func storeLargerThanTheClientMemoryCapIsBackedUpAndRestored() throws {
        let mib = 1 << 20
        let cap = ["--max-client-memory", "16M"]
        let source = Sandbox()
        var daemon = try Daemon(source, extra: cap)
        let client = try RawClient(source.socket)
        for domain in (0..<5).map({ "com.example.d\($0)" }) {
            for index in 0..<4 {
                let value =
                    String(repeating: String(UnicodeScalar(UInt8(97 + index))), count: mib - 16) + "\(domain)\(index)"
                let reply = try client.call(
                    #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(domain)","key":"k\#(index)","value":"\#(value)"}}"#
                )
                #expect(reply["error"] == nil, "\(reply)")
            }
        }
        client.close()
        let file = source.root + "/large.json"
        let run = try kvctl(source, "backup", file)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("backed up 5 domains (20 keys)"), "\(run.stderr)")
        let before =
            try Self.parse(try String(contentsOfFile: file, encoding: .utf8))["domains"] as? [String: [String: String]]
        daemon.stop()
        #expect(before?.count == 5 && before?.values.allSatisfy { $0.count == 4 } == true)

        let target = Sandbox()
        daemon = try Daemon(target, extra: cap)
        let restore = try kvctl(target, "restore-backup", file, "--yes")
        #expect(restore.status == 0, "\(restore.stderr)")
        let again = try kvctl(target, "backup", "-")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            try Self.parse(again.stdout)["domains"] as? [String: [String: String]] == before,
            "the restored store holds every value as it was")
        daemon.stop()
    }

    @Test func restoreBackupWithoutYesSaysWhatAndChangesNothing() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.app", "k", "before")
        _ = try kvctl(sandbox, "set", "com.example.app", "j", "-int", "2")
        let file = sandbox.root + "/b.json"
        #expect(try kvctl(sandbox, "backup", file).status == 0)
        _ = try kvctl(sandbox, "set", "com.example.app", "k", "after")
        let revision = try kvctl(sandbox, "--json", "set", "com.example.app", "j", "-int", "3")
        let run = try kvctl(sandbox, "restore-backup", file)
        #expect(run.status == 1)
        #expect(
            run.stderr.contains("1 domains") && run.stderr.contains("com.example.app (2 keys)")
                && run.stderr.contains("--yes"), "\(run.stderr)")
        #expect(try kvctl(sandbox, "get", "com.example.app", "k").stdout == "after\n")
        let history = try kvctl(sandbox, "history", "com.example.app", "--json").stdout
        let changes = try JSONSerialization.jsonObject(with: Data(history.utf8)) as? [[String: Any]] ?? []
        #expect(
            changes.count == 4 && changes.first?["revision"] as? Int == Int(revision.stdout.filter(\.isNumber)),
            "no new change: \(history)")
        #expect(try kvctl(sandbox, "restore-backup", file, "--yes").status == 0)
        #expect(try kvctl(sandbox, "get", "com.example.app", "k").stdout == "before\n")
        daemon.stop()
    }

    @Test func backupToStdoutIsTheSameFile() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.app", "k", "v")
        let run = try kvctl(sandbox, "backup", "-")
        #expect(run.status == 0 && run.stderr.contains("to stdout"), "\(run.stderr)")
        let backup = try Self.parse(run.stdout)
        #expect(backup["format"] as? String == "kvd-backup" && backup["version"] as? Int == 1)
        #expect((backup["domains"] as? [String: [String: String]]) == ["com.example.app": ["k": "v"]])
        let system = Sandbox()
        let systemDaemon = try Daemon(system, extra: ["--system"])
        _ = try kvctl(system, "--system", "set", "com.example.fleet", "k", "-int", "5")
        let fromSystem = try kvctl(system, "--system", "backup", "-")
        #expect(
            (try Self.parse(fromSystem.stdout)["domains"] as? [String: [String: Int]]) == [
                "com.example.fleet": ["k": 5]
            ], "\(fromSystem.stderr)")
        systemDaemon.stop()
        daemon.stop()
    }

    /// A stored value kvd cannot read is not silently dropped: the backup holds the rest,
    /// names the key on stderr, and kvctl exits 1.
    @Test func unreadableValueIsNamedAndTheRestBackedUp() throws {
        let sandbox = Sandbox()
        try sandbox.write("com.example.damaged.json", UnreadableValueTests.damagedDomain)
        let daemon = try Daemon(sandbox)
        let run = try kvctl(sandbox, "backup", "-")
        #expect(
            run.status == 1 && run.stderr.contains("\"bad\"") && run.stderr.contains("com.example.damaged"),
            "\(run.stderr)")
        #expect(
            (try Self.parse(run.stdout)["domains"] as? [String: [String: String]]) == [
                "com.example.damaged": ["good": "fine"]
            ])
        daemon.stop()
    }

    /// A file of a newer version, a torn one, and one whose last domain holds a bad value:
    /// each is refused with a clear message, and nothing is restored (not even the good domains).
    @Test func damagedOrNewerBackupRestoresNothing() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.a", "k", "now")
        let good =
            #"{"format": "kvd-backup", "version": 1, "revision": 9, "created": "2026-11-30T00:00:00Z", "domains": {"com.example.a": {"k": "old"}"#
        let cases = [
            (
                "newer",
                #"{"format": "kvd-backup", "version": 2, "revision": 9, "created": "2026-11-30T00:00:00Z", "domains": {}}"#,
                "newer kvctl"
            ),
            ("torn", String(good.dropLast(6)), "not JSON"),
            ("bad value", good + #", "com.example.z": {"d": {"$date": "yesterday"}}}}"#, "com.example.z"),
            ("not a backup", #"{"k": "v"}"#, "not a kvd backup"),
        ]
        for (name, text, message) in cases {
            let file = sandbox.root + "/\(name).json"
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let run = try kvctl(sandbox, "restore-backup", file, "--yes")
            #expect(
                run.status == 1 && run.stderr.contains(message) && run.stderr.contains("nothing was restored"),
                "\(name): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "one line: \(run.stderr)")
            #expect(try kvctl(sandbox, "get", "com.example.a", "k").stdout == "now\n", "\(name)")
        }
        daemon.stop()
    }
}
