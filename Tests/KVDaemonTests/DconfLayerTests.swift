import Foundation
import Glibc
import KVSystem
import KVValues
import Testing

@testable import KVDaemon

/// dconf's admin files as a part of the drop-in layer (docs/drop-in-rules.md, "dconf's files"):
/// the parsers' rules, then real folders read by ``DropInReader`` (as root, so root's files are
/// trusted): the profile's order, trust, last good content, a typo that keeps a lock.
@Suite struct DconfLayerTests {
    static func key(_ name: String) -> Key { try! Key(validating: name) }
    static func domain(_ name: String) -> Domain { try! Domain(validating: name) }
    static let interface = domain("org.gnome.desktop.interface")

    @Test func aKeyfileGivesEachKeyPathsValueAsTheBackendStoresIt() throws {
        let text = """
            # a comment
            [org/gnome/desktop/interface]
            clock-format='24h'
            text-scaling-factor = 1.25
            enable-animations=false
            [org/gnome/desktop/input-sources]
            sources=[('xkb', 'us'), ('xkb', 'de')]
            [/]
            top=uint32 7
            """
        let values = try DconfFiles.keyfile(Array(text.utf8))
        #expect(values[Self.interface]?[Self.key("clock-format")] == .string("24h"))
        #expect(values[Self.interface]?[Self.key("text-scaling-factor")] == .real(1.25))
        #expect(values[Self.interface]?[Self.key("enable-animations")] == .bool(false))
        #expect(
            values[Self.domain("org.gnome.desktop.input-sources")]?[Self.key("sources")]
                == .dictionary(["gvariant": .string("a(ss)"), "text": .string("[('xkb', 'us'), ('xkb', 'de')]")]))
        #expect(values[Self.domain("_")]?[Self.key("top")] == .integer(7))
        for bad in ["k=1", "[org/x]\nk=[]", "[org/x]\nk", "[/org/x]\nk=1", "[org/x/]\nk=1", "[org/x]\nk='a"] {
            #expect(throws: DropInReadError.self, "\(bad)") { try DconfFiles.keyfile(Array(bad.utf8)) }
        }
    }

    @Test func aLockFileTakesKeyPathsAndRefusesATypo() throws {
        let locks = try DconfFiles.locks(Array("# why\n/org/gnome/desktop/interface/clock-format\n\n".utf8))
        #expect(locks == [Self.interface: [Self.key("clock-format")]])
        for typo in ["org/gnome/x/k", "/org/gnome/x/k ", " /org/x/k", "/org/x/", "/org//x/k"] {
            #expect(throws: DropInReadError.self, "\(typo)") { try DconfFiles.locks(Array(typo.utf8)) }
        }
    }

    /// A file saved with Windows line endings reads as dconf reads it: every line, every lock.
    @Test func crlfLineEndingsReadAsLines() throws {
        let profile = "user-db:user\r\nsystem-db:local\r\nsystem-db:site\r\n"
        #expect(try DconfFiles.profile(Array(profile.utf8)) == ["local", "site"])
        let locks = try DconfFiles.locks(Array("# why\r\n/org/gnome/desktop/interface/clock-format\r\n".utf8))
        #expect(locks == [Self.interface: [Self.key("clock-format")]])
        let keyfile = "# site\r\n[org/gnome/desktop/interface]\r\nclock-format='24h'\r\n"
        let values = try DconfFiles.keyfile(Array(keyfile.utf8))
        #expect(values[Self.interface]?[Self.key("clock-format")] == .string("24h"))
    }

    @Test func aProfileNamesItsSystemDatabasesInOrder() throws {
        let text = "  user-db:user   # mine\nsystem-db:local\nsystem-db:site\nservice-db:keyfile/user\n\n"
        #expect(try DconfFiles.profile(Array(text.utf8)) == ["local", "site"])
        for bad in ["sytem-db:local", "system-db:../x", "system-db:", "file-db:/x"] {
            #expect(throws: DropInReadError.self, "\(bad)") { try DconfFiles.profile(Array(bad.utf8)) }
        }
    }

    /// A dconf folder with the databases `local` and `site` (in that order in the profile).
    final class Folder {
        let root = NSTemporaryDirectory() + "kvd-dconf-\(UInt32.random(in: 0...UInt32.max))"
        var dconf: String { root + "/dconf" }
        var reader: DropInReader
        var profiles: [String: [String]] = [:]

        init() throws {
            for folder in [
                "", "/etc", "/dconf", "/dconf/profile", "/dconf/db", "/dconf/db/local.d", "/dconf/db/site.d",
            ] {
                mkdir(root + folder, 0o755)
            }
            mkdir(root + "/dconf/db/site.d/locks", 0o755)
            reader = DropInReader(directory: root + "/etc", fileSystem: LinuxSystem(), system: LinuxSystem())
            reader.dconfDirectory = dconf
            try write("profile/user", "user-db:user\nsystem-db:local\nsystem-db:site\n")
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        func write(_ path: String, _ text: String) throws {
            try text.write(toFile: dconf + "/" + path, atomically: false, encoding: .utf8)
        }

        /// Reads the folders as the layer does, keeping `previous`'s last good content (and with
        /// no profile read good yet, guessing a bad profile's databases).
        func read(keeping previous: DropInSet = .empty) -> DropInSet {
            let found = reader.read(guessingDatabases: profiles.isEmpty)
            if let read = found.profiles { profiles = read }
            let selection = DconfSelection(root: dconf, profiles: profiles)
            var set = DropInSet.read(found.files, keeping: previous.parsed) { selection.rank($0, profile: "user") }
            set.dconf = selection
            set.skipped = found.skipped
            return set
        }
    }

    @Test func anEarlierDatabaseWinsAndKvdsOwnFilesWinOverDconfs() throws {
        let folder = try Folder()
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='12h'\nfont-name='Sans'\n")
        try folder.write("db/site.d/10-later", "[org/gnome/desktop/interface]\nfont-name='Serif'\n")
        try folder.write("db/local.d/00-local", "[org/gnome/desktop/interface]\nclock-format='24h'\n")
        let combined = folder.read().combination(for: nil)
        #expect(combined.values[Self.interface]?[Self.key("clock-format")] == .string("24h"))
        #expect(
            combined.values[Self.interface]?[Self.key("font-name")] == .string("Serif"), "a later file in a database")
        mkdir(folder.root + "/etc/defaults.d", 0o755)
        try #"{"org.gnome.desktop.interface": {"clock-format": "kvd"}}"#.write(
            toFile: folder.root + "/etc/defaults.d/50-own.json", atomically: false, encoding: .utf8)
        let own = folder.read().combination(for: nil)
        #expect(own.values[Self.interface]?[Self.key("clock-format")] == .string("kvd"))
        #expect(own.valueFiles[Self.interface]?[Self.key("font-name")] == folder.dconf + "/db/site.d/10-later")
    }

    /// dconf's rule: a key a database locks takes its value from that database or one after it
    /// in the profile, never from one before it (nor from the user).
    @Test func aLockedKeyTakesItsValueFromTheLockingDatabaseOrALaterOne() throws {
        let folder = try Folder()
        try folder.write("db/local.d/00-local", "[org/gnome/desktop/interface]\nclock-format='24h'\nfont-name='A'\n")
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='12h'\nfont-name='B'\n")
        try folder.write("db/site.d/locks/00-site", "/org/gnome/desktop/interface/clock-format\n")
        let combined = folder.read().combination(for: nil)
        #expect(combined.values[Self.interface]?[Self.key("clock-format")] == .string("12h"))
        #expect(combined.valueFiles[Self.interface]?[Self.key("clock-format")] == folder.dconf + "/db/site.d/00-site")
        #expect(combined.values[Self.interface]?[Self.key("font-name")] == .string("A"), "an unlocked key: local's")
    }

    /// DCONF_PROFILE: a peer whose kvd names a profile gets that profile's databases in its
    /// order; a name no profile has (or a path outside dconf's folder) gets `user`'s.
    @Test func aPeersDconfProfileChoosesItsDatabasesAndTheirOrder() throws {
        let folder = try Folder()
        try folder.write("profile/other", "system-db:site\nsystem-db:local\n")
        try folder.write("profile/kiosk", "system-db:site\n")
        mkdir(folder.dconf + "/profile/not-a-profile", 0o755)  // a folder there is passed over
        try folder.write("db/local.d/00-local", "[org/gnome/desktop/interface]\nclock-format='24h'\nfont-name='A'\n")
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='12h'\n")
        let set = folder.read()
        #expect(set.problems.isEmpty, "\(set.problems)")
        func value(_ profile: String?, _ key: String) -> Value? {
            set.combination(for: DropInPeer(uid: 1000, gids: [], dconfProfile: profile)).values[Self.interface]?[
                Self.key(key)]
        }
        #expect(value(nil, "clock-format") == .string("24h"))
        #expect(value("other", "clock-format") == .string("12h"), "site first in the other profile")
        #expect(value(folder.dconf + "/profile/other", "clock-format") == .string("12h"), "a path there")
        #expect(value("kiosk", "font-name") == nil && value("kiosk", "clock-format") == .string("12h"))
        // A name the site has no profile for, a path elsewhere (a file of the user's) or spelt
        // otherwise: `user`'s databases, never none (a user's environment lifts no site lock).
        for stray in ["nonexistent", folder.root + "/elsewhere/other", folder.dconf + "//profile/kiosk", "../user"] {
            #expect(value(stray, "clock-format") == .string("24h"), "\(stray)")
        }
        #expect(
            set.profile(of: DropInPeer(uid: 1, gids: []))
                != set.profile(of: DropInPeer(uid: 1, gids: [], dconfProfile: "other")))
    }

    @Test func aTypoOrABadModeKeepsTheLastGoodLocksAndValues() throws {
        let folder = try Folder()
        try folder.write("db/site.d/locks/00-site", "/org/gnome/desktop/interface/clock-format\n")
        try folder.write("db/site.d/00-site", "[org/gnome/desktop/interface]\nclock-format='12h'\n")
        let good = folder.read()
        #expect(good.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")])

        try folder.write("db/site.d/locks/00-site", "/org/gnome/desktop/interface/clock-format \n")
        let typo = folder.read(keeping: good)
        #expect(typo.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")])
        #expect(typo.problems.map(\.file) == [folder.dconf + "/db/site.d/locks/00-site"])
        #expect(typo.problems.first?.reason.contains("last good content still applies") == true)

        try folder.write("profile/user", "system-db:local\nsytem-db:site\n")
        let profileTypo = folder.read(keeping: typo)
        #expect(profileTypo.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")])
        #expect(profileTypo.problems.map(\.file) == [folder.dconf])

        folder.profiles = [:]  // a restart: no profile read good since
        let restarted = folder.read(keeping: profileTypo)
        #expect(restarted.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")])
        #expect(
            restarted.combination(for: DropInPeer(uid: 1000, gids: [], dconfProfile: "other")).locks[Self.interface]
                == [Self.key("clock-format")])

        try folder.write("profile/user", "system-db:local\nsystem-db:site\n")
        chmod(folder.dconf + "/db/site.d", 0o777)
        let refused = folder.read(keeping: profileTypo)
        #expect(refused.combination(for: nil).locks[Self.interface] == [Self.key("clock-format")])
        #expect(refused.combination(for: nil).values[Self.interface]?[Self.key("clock-format")] == .string("12h"))
        #expect(refused.problems.first?.reason.contains("others may write") == true)

        chmod(folder.dconf + "/db/site.d", 0o755)
        try folder.write("db/site.d/locks/00-site", "")
        let lifted = folder.read(keeping: refused)
        #expect(lifted.combination(for: nil).locks[Self.interface] == nil, "a fixed file is read as it now is")
        #expect(lifted.problems.isEmpty)
    }

    @Test func aFileOthersMayWriteIsRefusedAndNamed() throws {
        let folder = try Folder()
        try folder.write("db/local.d/00-local", "[org/gnome/desktop/interface]\nclock-format='24h'\n")
        chmod(folder.dconf + "/db/local.d/00-local", 0o666)
        let set = folder.read()
        #expect(set.combination(for: nil).values.isEmpty)
        #expect(set.problems.map(\.file) == [folder.dconf + "/db/local.d/00-local"])
        chmod(folder.dconf + "/profile", 0o777)
        #expect(folder.read().problems.map(\.file) == [folder.dconf], "a profile others may write")
    }

    /// A link in dconf's folder to what another user may change is refused, as a drop-in's is:
    /// a lock file leading to a file of another uid's, a database folder leading into a folder
    /// others may write.
    @Test func aLinkToWhatAnotherUserMayChangeIsRefused() throws {
        let folder = try Folder()
        try "/org/gnome/desktop/interface/clock-format\n".write(
            toFile: folder.root + "/theirs", atomically: false, encoding: .utf8)
        chown(folder.root + "/theirs", 65534, 65534)
        symlink(folder.root + "/theirs", folder.dconf + "/db/site.d/locks/00-site")
        let set = folder.read()
        #expect(set.combination(for: nil).locks.isEmpty)
        #expect(set.problems.map(\.file) == [folder.dconf + "/db/site.d/locks/00-site"])
        #expect(set.problems.first?.reason.contains("uid 65534") == true)

        mkdir(folder.root + "/open", 0o755)
        chmod(folder.root + "/open", 0o777)
        mkdir(folder.root + "/open/local.d", 0o755)
        try "[org/x]\nk=1\n".write(toFile: folder.root + "/open/local.d/00-x", atomically: false, encoding: .utf8)
        rmdir(folder.dconf + "/db/local.d")
        symlink(folder.root + "/open/local.d", folder.dconf + "/db/local.d")
        let linked = folder.read()
        #expect(linked.combination(for: nil).values.isEmpty)
        #expect(
            linked.problems.contains {
                $0.file == folder.dconf + "/db/local.d" && $0.reason.contains("others may write")
            },
            "\(linked.problems)")
    }

    @Test func theFolderIsAnOptionOfTheSystemInstance() throws {
        func folder(_ arguments: [String], _ environment: [String: String] = [:]) throws -> String?? {
            guard case .run(let options) = try DaemonOptions.parse(arguments, environment: environment),
                case .system(let policy) = options.role
            else { return nil }
            return .some(policy.dconfDirectory)
        }
        #expect(try folder(["--system"]) == "/etc/dconf")
        #expect(try folder(["--system"], ["KVD_DCONF_DIR": "/srv/dconf"]) == "/srv/dconf")
        #expect(try folder(["--system", "--dconf-dir", "/opt/d"], ["KVD_DCONF_DIR": "/srv/d"]) == "/opt/d")
        #expect(try folder(["--system", "--dconf-dir", ""]) == .some(nil))
    }
}
