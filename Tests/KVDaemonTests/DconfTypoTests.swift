import Foundation
import Glibc
import KVValues
import Testing

@testable import KVDaemon

/// A careless admin's dconf files (attack/38-dconf-layer.md) at the first start, with no last
/// good content to fall back on: a typo in a lock file or a profile never leaves a key the site
/// meant to lock writable, dconf's own file names are read, and no amount of values crowds out a
/// lock file. Real folders read by ``DropInReader`` (``DconfLayerTests/Folder``).
@Suite struct DconfTypoTests {
    static let interface = DconfLayerTests.interface
    static func key(_ name: String) -> Key { DconfLayerTests.key(name) }
    static let clock = "/org/gnome/desktop/interface/clock-format"

    /// A lock line with a comment after it, spaces, a tab, a carriage return or a character
    /// that does not show is an error that names its line, and carries the lock it surely
    /// means; what dconf and GSettings accept as a key path is taken as it is.
    @Test func aLockLineTypoIsAnErrorCarryingTheLockItMeans() throws {
        for typo in [
            "\(Self.clock) # the site decides", "\(Self.clock) ", " \(Self.clock)", "\(Self.clock)\t",
            "\(Self.clock)\r/org/x/more", "\(Self.clock)\u{00A0}", "\(Self.clock)#why",
        ] {
            do throws(DropInReadError) {
                _ = try DconfFiles.locks(Array("# site\n\(typo)\n/org/x/other\n".utf8))
                Issue.record("no error: \(typo.debugDescription)")
            } catch {
                #expect(error.description.hasPrefix("line 2: "), "\(typo.debugDescription): \(error)")
                #expect(error.partial?.locks[Self.interface] == [Self.key("clock-format")], "\(typo.debugDescription)")
                #expect(error.partial?.locks[DconfLayerTests.domain("org.x")] == [Self.key("other")])
            }
        }
        let valid = [
            "/org/gnome/terminal/legacy/profiles:/:b1dcc9dd-5262/use-system-font",
            "/org/libreoffice/registry/org.openoffice.Office.Common/Misc/UseOpenCL",
            "/org/gnome/desktop/app-folders/folders/My Apps/name",
        ]
        let locks = try DconfFiles.locks(Array(("\u{FEFF}" + valid.joined(separator: "\n") + "\n").utf8))
        #expect(locks.values.reduce(0) { $0 + $1.count } == 3, "\(locks)")
    }

    /// At the first start a lock file with a typo applies the locks its lines surely name, and
    /// status names it; once fixed it is read as it is.
    @Test func aLockFileWithATypoNeverReadGoodStillLocksWhatItNames() throws {
        let folder = try DconfLayerTests.Folder()
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='12h'\n")
        try folder.write(
            "db/site.d/locks/00-site", "\(Self.clock) # the site decides\n/org/gnome/desktop/interface/font-name\n")
        let first = folder.read()
        #expect(first.combination(for: nil).locks[Self.interface] == [Self.key("clock-format"), Self.key("font-name")])
        #expect(first.problems.map(\.file) == [folder.dconf + "/db/site.d/locks/00-site"])
        #expect(first.problems.first?.reason.contains("never read good: the 2 lock(s)") == true, "\(first.problems)")
        try folder.write("db/site.d/locks/00-site", "/org/gnome/desktop/interface/font-name\n")
        let fixed = folder.read(keeping: first)
        #expect(fixed.combination(for: nil).locks[Self.interface] == [Self.key("font-name")])
        #expect(fixed.problems.isEmpty)
    }

    /// dconf's folders are read as dconf reads them, digit-only names (`00`, `10`) included, but
    /// for hidden names (skipped unnamed, as dconf does) and editors' and package managers'
    /// leftovers, which kvd skips (dconf applies them) and names in status.
    @Test func dconfsFoldersAreReadAsDconfReadsThem() throws {
        let folder = try DconfLayerTests.Folder()
        try folder.write("db/site.d/00", "[org/gnome/desktop/interface]\nclock-format='12h'\n")
        try folder.write("db/site.d/locks/10", "\(Self.clock)\n")
        try folder.write("db/site.d/locks/.hidden", "/org/gnome/desktop/interface/hidden\n")
        let set = folder.read()
        let combined = set.combination(for: nil)
        #expect(combined.values[Self.interface]?[Self.key("clock-format")] == .string("12h"))
        #expect(combined.locks[Self.interface] == [Self.key("clock-format")])
        #expect(set.problems.isEmpty && set.skipped.isEmpty, "\(set.problems) \(set.skipped)")
    }

    /// An editor's backup or a package manager's leftover beside the admin's dconf file never
    /// overrides its edit nor keeps a lock the admin removed: skipped, and named in status
    /// (attack/38b-report.md, findings 4 and 5).
    @Test func aLeftoverInDconfsFoldersIsSkippedAndNamed() throws {
        let folder = try DconfLayerTests.Folder()
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='24h'\n")
        try folder.write("db/site.d/locks/00-site", "/org/gnome/desktop/interface/font-name\n")
        let leftovers = [
            "00-site~", "00-site.dpkg-old", "00-site.dpkg-dist", "00-site.dpkg-new", "00-site.rpmsave",
            "00-site.rpmnew", "#00-site#", "00-site.swp", "00-site.bak", "00-site.ucf-old",
        ]
        for name in leftovers {
            try folder.write("db/site.d/" + name, "[org/gnome/desktop/interface]\nclock-format='12h'\n")
        }
        try folder.write("db/site.d/locks/00-site~", "\(Self.clock)\n/org/gnome/desktop/interface/font-name\n")
        let set = folder.read()
        let combined = set.combination(for: nil)
        #expect(combined.values[Self.interface]?[Self.key("clock-format")] == .string("24h"))
        #expect(combined.locks[Self.interface] == [Self.key("font-name")])
        let named = leftovers.map { folder.dconf + "/db/site.d/" + $0 } + [folder.dconf + "/db/site.d/locks/00-site~"]
        #expect(Set(set.skipped) == Set(named), "\(set.skipped)")
        #expect(set.problems.isEmpty, "\(set.problems)")
    }

    /// Lock files have a budget of their own: values that fill theirs never leave a lock unread.
    @Test func valuesNeverCrowdOutALockFile() throws {
        let folder = try DconfLayerTests.Folder()
        folder.reader.totalBytes = 100
        try folder.write(
            "db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='\(String(repeating: "x", count: 40))'\n")
        try folder.write(
            "db/site.d/10-more", "[org/gnome/desktop/interface]\nfont-name='\(String(repeating: "y", count: 40))'\n")
        try folder.write("db/site.d/locks/00-site", "\(Self.clock)\n")
        let set = folder.read()
        #expect(set.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")], "\(set.problems)")
        #expect(set.problems.map(\.file) == [folder.dconf + "/db/site.d/10-more"])
        #expect(set.problems.first?.reason.contains("files of values together pass") == true, "\(set.problems)")
    }

    /// At the first start (no profile read good since kvd started) a profile with a typo applies
    /// the databases it may mean: a byte order mark is skipped, `system-db: site` means `site`,
    /// a line naming none that can be told means every database; status names the profile.
    @Test func aProfileTypoAtTheFirstStartAppliesTheDatabasesItMayMean() throws {
        let cases: [(String, Set<String>, problem: Bool)] = [
            ("\u{FEFF}user-db:user\nsystem-db:site\n", ["site"], false),
            ("user-db:user\nsystem-db: site\n", ["site"], true),
            ("user-db:user\nsytem-db:site\n", ["site", "local"], true),
        ]
        for (profile, databases, problem) in cases {
            let folder = try DconfLayerTests.Folder()
            try folder.write("profile/user", profile)
            try folder.write("db/site.d/locks/00-site", "\(Self.clock)\n")
            mkdir(folder.dconf + "/db/local.d/locks", 0o755)
            try folder.write("db/local.d/locks/00-local", "/org/gnome/desktop/interface/font-name\n")
            let set = folder.read()
            var expected: Set<Key> = []
            if databases.contains("site") { expected.insert(Self.key("clock-format")) }
            if databases.contains("local") { expected.insert(Self.key("font-name")) }
            #expect(set.combination(for: nil).locks[Self.interface] ?? [] == expected, "\(profile.debugDescription)")
            #expect(set.problems.map(\.file) == (problem ? [folder.dconf] : []), "\(set.problems)")
            let named = databases.sorted().joined(separator: ", ")
            #expect(!problem || set.problems.first?.reason.hasSuffix("the databases it may mean: \(named)") == true)
        }
    }
}
