import Foundation
import Glibc
import Testing

/// History and undo with the real kvctl against the real kvd: a bad write undone, a deleted domain
/// brought back, a restore racing another writer, retention, a damaged file.
@Suite(.serialized) struct HistoryEndToEndTests {
    /// The `--json` history of `domain` (`key`), newest first.
    static func history(_ sandbox: Sandbox, _ domain: String, _ key: String? = nil) throws -> [[String: Any]] {
        let run = try kvctl(sandbox, "history", domain, key ?? "--json", "--json")
        guard run.status == 0 else { throw TestFailure("kvctl history failed: \(run.stderr)") }
        return try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as! [[String: Any]]
    }

    static func revision(of run: Run) throws -> Int {
        guard run.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any],
            let revision = object["revision"] as? Int
        else { throw TestFailure("no revision in \(run.stdout.debugDescription), stderr \(run.stderr)") }
        return revision
    }

    @Test func badWriteIsUndoneAsANewChangeAndSurvivesARestart() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        let good = try Self.revision(of: try kvctl(sandbox, "--json", "set", "com.example.app", "volume", "-int", "7"))
        _ = try kvctl(sandbox, "set", "com.example.app", "volume", "-int", "9999")  // the bad write
        daemon.stop()  // folds the log into the files: history now comes from DOMAIN.history
        #expect(sandbox.stateFiles().contains("com.example.app.history"))
        daemon = try Daemon(sandbox)
        let restore = try kvctl(sandbox, "restore", "com.example.app", "volume", "--revision", String(good))
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try kvctl(sandbox, "get", "com.example.app", "volume").stdout == "7\n")
        let entries = try Self.history(sandbox, "com.example.app", "volume")
        #expect(entries.map { $0["value"] as? Int } == [7, 9999, 7], "the bad write stays in history: \(entries)")
        #expect(entries.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true })
        let table = try kvctl(sandbox, "history", "com.example.app")
        let lines = table.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("TIME") == true && lines.count == 4, "\(table.stdout)")
        #expect(lines.dropFirst().first?.contains("volume  7") == true, "\(table.stdout)")
        daemon.stop()
    }

    @Test func deletedDomainIsRestoredWhole() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.gone", "a", "one")
        let before = try Self.revision(of: try kvctl(sandbox, "--json", "set", "com.example.gone", "b", "-bool", "yes"))
        #expect(try kvctl(sandbox, "delete", "com.example.gone").status == 0)
        #expect(try kvctl(sandbox, "get", "com.example.gone").status == 1)
        let removals = try Self.history(sandbox, "com.example.gone").prefix(2)
        #expect(removals.allSatisfy { $0["value"] == nil }, "the deletion is in history: \(removals)")
        let restore = try kvctl(sandbox, "restore", "com.example.gone", "--revision", String(before))
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try kvctl(sandbox, "--json", "get", "com.example.gone").stdout == #"{"a":"one","b":true}"# + "\n")
        daemon.stop()
    }

    /// Restores race a writer that keeps adding keys to the same domain (every 2 ms): each
    /// restore either makes the whole domain as it was (checked at the revision it committed:
    /// no key of the writer's) or is refused and changes nothing; never a mix.
    @Test func restoreRacingAWriterIsWholeOrRefused() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.race", "a", "-int", "1")
        let target = try Self.revision(of: try kvctl(sandbox, "--json", "set", "com.example.race", "b", "-int", "2"))
        _ = try kvctl(sandbox, "set", "com.example.race", "a", "-int", "100")
        let writer = try BackgroundWriter(sandbox) { client, index in
            _ = try? client.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.race","key":"w\#(index)","value":\#(index)}}"#
            )
            usleep(2000)
        }
        var (restored, refused) = (0, 0)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        // At least 60 restores, and on until one lost the race (a fast build wins most: its
        // read and its Apply fall between two of the writer's Sets), at most 600.
        for attempt in 0..<600 {
            if attempt >= 60 && refused > 0 { break }
            let run = try kvctl(sandbox, "--json", "restore", "com.example.race", "--revision", String(target))
            if run.status == 0 {
                restored += 1
                // Nothing printed: the domain already was as at the target (the previous restore
                // ran before the writer's next key; the release build often is that fast), so
                // nothing changed and there is no revision to check.
                guard !run.stdout.isEmpty else { continue }
                let at = try Self.revision(of: run)
                let reply = try client.call(
                    #"{"method":"io.kvd.Defaults.History","parameters":{"domain":"com.example.race","atRevision":\#(at)}}"#
                )
                let entries = (reply["parameters"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
                let state = Dictionary(
                    uniqueKeysWithValues: entries.map { ($0["key"] as! String, $0["value"] as! Int) })
                #expect(state == ["a": 1, "b": 2], "the restore at revision \(at) left \(state)")
            } else {
                refused += 1
                #expect(run.stderr.contains("changed while kvctl restored it; nothing was restored"), "\(run.stderr)")
            }
        }
        writer.stop()
        #expect(refused > 0, "restored \(restored), refused \(refused)")
        print("restores: \(restored) whole, \(refused) refused")
        daemon.stop()
    }

    @Test func retentionKeepsTheLastValuesAndNamesTheOldestRevision() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox, extra: ["--history-keep", "3", "--history-days", "0"])
        var revisions: [Int] = []
        for value in 1...10 {
            revisions.append(
                try Self.revision(
                    of: try kvctl(sandbox, "--json", "set", "com.example.keep", "k", "-int", String(value))))
        }
        #expect(
            try Self.history(sandbox, "com.example.keep", "k").count == 10,
            "before the fold every change is served from the log")
        daemon.stop()  // the fold writes the file as retention keeps it
        daemon = try Daemon(sandbox, extra: ["--history-keep", "3", "--history-days", "0"])
        let kept = try Self.history(sandbox, "com.example.keep", "k")
        #expect(kept.map { $0["value"] as? Int } == [10, 9, 8])
        let old = try kvctl(sandbox, "restore", "com.example.keep", "--revision", String(revisions[6]))
        #expect(old.status == 1)
        #expect(old.stderr.contains("the oldest revision it can restore is \(revisions[7])"), "\(old.stderr)")
        #expect(try kvctl(sandbox, "restore", "com.example.keep", "k", "--revision", String(revisions[7])).status == 0)
        #expect(try kvctl(sandbox, "get", "com.example.keep", "k").stdout == "8\n")
        daemon.stop()
    }

    @Test func damagedHistoryFileIsSetAsideAndTheValuesServed() throws {
        let sandbox = Sandbox()
        var daemon = try Daemon(sandbox)
        _ = try kvctl(sandbox, "set", "com.example.hurt", "a", "one")
        _ = try kvctl(sandbox, "set", "com.example.hurt", "a", "two")
        daemon.stop()
        var lines = sandbox.read("com.example.hurt.history")!.split(separator: "\n", omittingEmptySubsequences: false)
        lines[1] = "00000000" + lines[1].dropFirst(8)  // a line that fails its checksum, with lines after it
        try sandbox.write("com.example.hurt.history", lines.joined(separator: "\n"))
        daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "get", "com.example.hurt", "a").stdout == "two\n")
        let entries = try Self.history(sandbox, "com.example.hurt")  // history files are read when first asked for
        #expect(
            sandbox.stateFiles().contains { $0.hasPrefix("com.example.hurt.history.unreadable-") },
            "\(sandbox.stateFiles())")
        #expect(daemon.errorOutput().contains("history file") && daemon.errorOutput().contains("is unreadable"))
        #expect(
            entries.count == 1 && entries[0]["value"] as? String == "two" && entries[0]["time"] == nil,
            "history starts again from the values: \(entries)")
        daemon.stop()
    }

    /// 20 values of 1 MiB: more history than one reply carries (in a domain of 3 MiB, whose
    /// history may take 24 MiB). A History call says where the next page begins; kvctl
    /// history pages through and prints all of them.
    @Test func historyLongerThanOneReplyIsPagedThrough() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let client = try RawClient(sandbox.socket)
        defer { client.close() }
        let big = String(repeating: "x", count: 1 << 20)
        for pad in ["pad1", "pad2"] {
            let reply = try client.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.big","key":"\#(pad)","value":"\#(big)"}}"#
            )
            #expect(reply["error"] == nil, "\(reply["error"] ?? "")")
        }
        for index in 0..<20 {
            let reply = try client.call(
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"com.example.big","key":"k","value":"\#(index)\#(big)"}}"#
            )
            #expect(reply["error"] == nil, "\(reply["error"] ?? "")")
        }
        let first = try client.call(#"{"method":"io.kvd.Defaults.History","parameters":{"domain":"com.example.big"}}"#)
        let parameters = try #require(first["parameters"] as? [String: Any])
        let entries = try #require(parameters["entries"] as? [[String: Any]])
        let next = try #require(
            parameters["nextBeforeRevision"] as? Int, "a cut reply names the next page: \(parameters.keys)")
        #expect(
            entries.count > 0 && entries.count < 20 && next == (entries.last?["revision"] as? Int),
            "\(entries.count) entries, next \(next)")
        let all = try Self.history(sandbox, "com.example.big").filter { $0["key"] as? String == "k" }
        let indices: [String] = all.map { entry in String((entry["value"] as? String ?? "").prefix { $0 != "x" }) }
        #expect(indices == (0..<20).reversed().map { String($0) })
        daemon.stop()
    }

    @Test func systemInstanceNamesTheUserOfEachChange() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox, extra: ["--system"])
        #expect(try kvctl(sandbox, "--system", "set", "com.example.fleet", "k", "v").status == 0)
        let json = try kvctl(sandbox, "--system", "history", "com.example.fleet", "--json")
        #expect(json.stdout.contains(#""uid":\#(getuid())"#), "\(json.stdout)")
        let table = try kvctl(sandbox, "--system", "history", "com.example.fleet")
        let user = String(cString: getpwuid(getuid())!.pointee.pw_name)
        #expect(
            table.stdout.split(separator: "\n").first?.hasSuffix("USER") == true && table.stdout.contains(user),
            "\(table.stdout)")
        daemon.stop()
    }
}
