import Foundation
import Glibc
import KVProtocol
import KVStorage
import KVSystem
import KVValues
import Testing

@testable import KVDaemon

/// The drop-in files on their own: parsing, combining in name order, what is skipped, the bounds,
/// and lock globs.
struct DropInsTests {
    static let browser = try! Domain(validating: "org.ex.browser")
    static func key(_ name: String) -> Key { try! Key(validating: name) }

    static func defaults(_ path: String, _ text: String) -> DropInFile {
        DropInFile(path: path, kind: .defaults, bytes: .success(Array(text.utf8)))
    }

    static func locks(_ path: String, _ text: String) -> DropInFile {
        DropInFile(path: path, kind: .locks, bytes: .success(Array(text.utf8)))
    }

    @Test func laterFilesWinAndEachValueNamesItsFile() {
        let (combined, _) = DropIns.combine([
            Self.defaults("10-base.json", #"{"org.ex.browser": {"homepage": "a", "fontsize": 12}}"#),
            Self.defaults(
                "50-site.json", #"{"org.ex.browser": {"homepage": "b"}, "org.ex.mail": {"$dict": {"$x": 1}}}"#),
        ])
        #expect(
            combined.values[Self.browser] == [Self.key("homepage"): .string("b"), Self.key("fontsize"): .integer(12)])
        #expect(combined.valueFiles[Self.browser]?[Self.key("homepage")] == "50-site.json")
        #expect(combined.valueFiles[Self.browser]?[Self.key("fontsize")] == "10-base.json")
        #expect(combined.values[try! Domain(validating: "org.ex.mail")] == [Self.key("$x"): .integer(1)])
        #expect(combined.files == ["10-base.json", "50-site.json"] && combined.problems.isEmpty)
    }

    @Test func aBadFileIsNamedAndTheOthersStillApply() {
        let files = [
            Self.defaults("10-base.json", #"{"org.ex.browser": {"homepage": "a"}}"#),
            Self.defaults("20-cut.json", #"{"org.ex.browser": {"#),
            Self.defaults("30-name.json", #"{"../etc": {"k": 1}}"#),
            Self.defaults("40-null.json", #"{"org.ex.browser": {"k": null}}"#),
            Self.locks("10-bad", "org.ex.browser\n"),
            DropInFile(path: "50-gone.json", kind: .defaults, bytes: .failure(.init(description: "cannot open it"))),
        ]
        let (combined, _) = DropIns.combine(files)
        #expect(combined.values[Self.browser] == [Self.key("homepage"): .string("a")])
        #expect(
            combined.problems.map(\.file) == ["20-cut.json", "30-name.json", "40-null.json", "10-bad", "50-gone.json"])
        #expect(combined.problems[4].reason == "cannot open it")
        #expect(combined.locks.isEmpty)
    }

    @Test func aFileThatTurnsBadKeepsItsLastGoodContent() {
        let (first, parsed) = DropIns.combine([Self.locks("10-browser", "org.ex.browser homepage\n")])
        let (second, _) = DropIns.combine([Self.locks("10-browser", "org.ex.browser\n")], keeping: parsed)
        #expect(second.locks == first.locks, "a typo in a lock file lifted its locks")
        #expect(second.problems.count == 1 && second.problems[0].reason.contains("last good content"))
    }

    @Test func lockLinesCommentsAndGlobs() throws {
        let locks = try DropIns.parse(
            Array("# comment\n\n  org.ex.browser   home page \r\norg.ex.mail *\norg.ex.browser proxy.*\n".utf8), .locks
        ).locks
        #expect(locks[Self.browser] == [Self.key("home page"), Self.key("proxy.*")])
        #expect(locks[try Domain(validating: "org.ex.mail")] == [Self.key("*")])
        #expect(throws: DropInReadError.self) { try DropIns.parse(Array("org.ex/browser k\n".utf8), .locks) }
        // Old Mac line ends (one line), a comment after the key: errors, not keys nobody uses.
        for text in [
            "org.ex.browser a\rorg.ex.browser b\r", "org.ex.browser homepage # kiosk\n", "org.ex.browser a\t# x\n",
            "org.ex.browser homepage\u{A0}\n", "org.ex.browser home\u{200B}page\n", "org.ex.browser a\u{7}\n",
        ] {
            #expect(throws: DropInReadError.self, "\(text.debugDescription)") {
                try DropIns.parse(Array(text.utf8), .locks)
            }
        }
        #expect(try DropIns.parse(Array("org.ex.browser a#b\n".utf8), .locks).locks[Self.browser] == [Self.key("a#b")])
    }

    @Test func aFileForSomeGroupsOrUsersAppliesToThemOnly() throws {
        let set = DropInSet.read([
            Self.defaults("10-base.json", #"{"org.ex.browser": {"homepage": "all"}}"#),
            Self.defaults(
                "50-students.json", #"{"for": {"groups": ["students"]}, "org.ex.browser": {"homepage": "s"}}"#),
            Self.defaults("60-alice.json", #"{"for": {"users": ["alice"]}, "org.ex.browser": {"zoom": 2}}"#),
            Self.locks("50-students", "for groups students staff\norg.ex.browser homepage\n"),
            Self.defaults("70-bad.json", #"{"for": {"groups": "students"}}"#),
        ]).resolved(group: { ["students": 100, "staff": 101][$0] }, user: { ["alice": 1000][$0] })
        let homepage = Self.key("homepage")
        let student = set.combination(for: DropInPeer(uid: 2000, gids: [100]))
        #expect(student.values[Self.browser] == [homepage: .string("s")] && student.locks[Self.browser] == [homepage])
        let alice = set.combination(for: DropInPeer(uid: 1000, gids: [5]))
        #expect(alice.values[Self.browser] == [homepage: .string("all"), Self.key("zoom"): .integer(2)])
        #expect(alice.locks.isEmpty)
        #expect(set.combination(for: nil).values[Self.browser] == [homepage: .string("all")])
        #expect(set.combination(for: DropInPeer(uid: 3000, gids: [101])).locks[Self.browser] == [homepage])
        #expect(set.problems.map(\.file) == ["70-bad.json"])
    }

    @Test func globsMatchAsShellStarsDo() {
        let cases: [(String, String, Bool)] = [
            ("*", "anything", true), ("proxy.*", "proxy.host", true), ("proxy.*", "proxy", false),
            ("*.size", "font.size", true), ("a*b*c", "aXbYc", true), ("a*b*c", "aXc", false),
            ("exact", "exact", true), ("exact", "exactly", false), ("a*", "a", true),
        ]
        for (pattern, key, expected) in cases {
            #expect(LockPattern.matches(Self.key(pattern), Self.key(key)) == expected, "\(pattern) ~ \(key)")
        }
        let set = LockSet([Self.key("proxy.*"), Self.key("homepage")])
        #expect(set.contains(Self.key("proxy.port")) && set.contains(Self.key("homepage")))
        #expect(!set.contains(Self.key("zoom")))
    }

    @Test func dotfilesEditorBackupsAndPackageLeftoversAreSkippedQuietlyAndOtherNamesListed() {
        let quiet = [
            ".hidden.json", "10-a.json~", "10-a.json.swp", "10-a.json.dpkg-old", "10-a.json.dpkg-new", "#10-a.json#",
            "10-a.json.rpmsave", "10-a.json.bak", "10-a.json.ucf-dist", "4913",
        ]
        for name in quiet {
            #expect(!DropInReader.isRead(name, .defaults) && DropInReader.isQuiet(name), "\(name)")
        }
        for name in ["10-a.txt", "10-a.disabled.json", ".json", "10 a.json"] {
            #expect(!DropInReader.isRead(name, .defaults), "\(name)")
        }
        #expect(DropInReader.isRead("10-a.json", .defaults) && DropInReader.isRead("10_A-b.json", .defaults))
        #expect(DropInReader.isRead("10-browser", .locks) && DropInReader.isRead("browser", .locks))
        for name in [
            "10-browser~", "50-l.old", "50-l.disabled", "50-l.json", "50-l.new", "4913", "a b", "é", "README", "TODO",
        ] {
            #expect(!DropInReader.isRead(name, .locks), "\(name)")
        }
        #expect(!DropInReader.isQuiet("50-l.disabled") && !DropInReader.isQuiet("10-a.txt"))
        #expect(
            !DropInReader.isQuiet("README") && DropInReader.isRead("README-2", .locks)
                && DropInReader.isRead("Browser", .locks))
    }

    @Test func theReaderTakesNameOrderBoundsEachFileAndRefusesAFolderOthersMayWrite() throws {
        let root = NSTemporaryDirectory() + "kvd-dropins-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        for folder in [root, root + "/defaults.d", root + "/locks.d"] { mkdir(folder, 0o755) }
        try #"{"d": {"k": 2}}"#.write(toFile: root + "/defaults.d/20-b.json", atomically: false, encoding: .utf8)
        try #"{"d": {"k": 1}}"#.write(toFile: root + "/defaults.d/10-a.json", atomically: false, encoding: .utf8)
        try #"{"d": {"k": 3}}"#.write(toFile: root + "/defaults.d/.30-c.json", atomically: false, encoding: .utf8)
        let big = "{\"d\": {\"k\": \"" + String(repeating: "x", count: DropInReader.maxFileBytes) + "\"}}"
        try big.write(toFile: root + "/defaults.d/40-big.json", atomically: false, encoding: .utf8)
        mkfifo(root + "/locks.d/10-fifo", 0o644)
        let reader = DropInReader(directory: root, fileSystem: LinuxSystem(), system: LinuxSystem())
        let (combined, _) = DropIns.combine(reader.read().files)
        #expect(combined.files == [root + "/defaults.d/10-a.json", root + "/defaults.d/20-b.json"])
        #expect(combined.values[try Domain(validating: "d")] == [Self.key("k"): .integer(2)])
        #expect(combined.problems.map(\.file) == [root + "/defaults.d/40-big.json", root + "/locks.d/10-fifo"])
        #expect(combined.problems.first?.reason.contains("more than a drop-in file may hold") == true)

        chmod(root + "/locks.d", 0o777)
        let (refused, _) = DropIns.combine(reader.read().files)
        #expect(refused.problems.last?.file == root + "/locks.d")
        #expect(refused.problems.last?.reason.contains("others may write") == true)
    }

    @Test func theFolderIsAnOptionOfTheSystemInstanceWithAnEnvironmentDefault() throws {
        func folder(_ arguments: [String], _ environment: [String: String] = [:]) throws -> String? {
            guard case .run(let options) = try DaemonOptions.parse(arguments, environment: environment),
                case .system(let policy) = options.role
            else { return nil }
            return policy.configDirectory
        }
        #expect(try folder(["--system"]) == "/etc/kvd")
        #expect(try folder(["--system"], ["KVD_CONFIG_DIR": "/srv/kvd"]) == "/srv/kvd")
        #expect(try folder(["--system", "--config-dir", "/opt/k"], ["KVD_CONFIG_DIR": "/srv/kvd"]) == "/opt/k")
        #expect(try folder(["--system"], ["KVD_CONFIG_DIR": ""]) == "/etc/kvd", "an empty variable counts as unset")
        #expect(throws: UsageError.self) { try DaemonOptions.parse(["--config-dir", "/opt/k"], environment: [:]) }
        #expect(throws: UsageError.self) {
            try DaemonOptions.parse(["--system", "--config-dir", ""], environment: [:])
        }
    }

    @Test func aMissingFolderHoldsNothing() {
        let reader = DropInReader(
            directory: "/nonexistent/kvd-dropins", fileSystem: LinuxSystem(), system: LinuxSystem())
        let (combined, _) = DropIns.combine(reader.read().files)
        #expect(combined == .empty)
    }
}

/// A reload reaches a user's kvd as one batch: ``MirrorReader`` holds a batch's replies until its
/// last, so the loop applies all of them in one step.
struct DropInBatchTests {
    @Test func aBatchOfMirrorRepliesIsGivenTogetherAtItsLast() throws {
        var reader = MirrorReader()
        _ = try reader.read(RequestHandler.mirrorReply(revision: 1, domain: nil, changes: [], synced: true))
        let a = try Domain(validating: "com.a")
        let b = try Domain(validating: "com.b")
        let k = try Key(validating: "k")
        let replies = DropInLayer.batch(
            [a: ([Change(key: k, value: .integer(1))], []), b: ([], [(k, true)])], revision: 7)
        #expect(
            replies.count == 2 && replies[0].parameters["batch"] == .bool(true) && replies[1].parameters["batch"] == nil
        )
        #expect(try reader.read(replies[0]).isEmpty, "the first reply of a batch was given alone")
        let updates = try reader.read(replies[1])
        #expect(updates.count == 2 && updates.allSatisfy { $0.revision == 7 }, "\(updates)")
        var layer = SystemLayer()
        for update in updates { layer.apply(update) }
        #expect(layer.layer(a)?.values[k] == .integer(1) && layer.layer(b)?.locks.contains(k) == true)
    }
}
