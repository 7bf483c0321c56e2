import Foundation
import Glibc
import Testing

/// What kvctl says and does about a stored value kvd cannot read (kept verbatim in a hand-edited
/// domain file), and keys that hold a newline.
@Suite(.serialized) struct UnreadableValueTests {
    /// A domain file with one readable key and one value that is not valid typed JSON.
    static let damagedDomain = """
        {"format": "kvd-domain", "formatVersion": 1, "domain": "com.example.damaged", "revision": 3,
         "values": {"good": "fine", "bad": {"$date": "yesterday"}}, "revisions": {"good": 2, "bad": 3}}
        """

    @Test func getOfAnUnreadableValueSaysItCannotBeReadNotThatAWriteFailed() throws {
        let sandbox = Sandbox()
        try sandbox.write("com.example.damaged.json", Self.damagedDomain)
        let daemon = try Daemon(sandbox)
        let get = try kvctl(sandbox, "get", "com.example.damaged", "bad")
        #expect(get.status == 1 && get.stdout.isEmpty)
        #expect(get.stderr.contains("cannot be read") && get.stderr.contains("\"bad\""), "\(get.stderr)")
        #expect(!get.stderr.contains("could not store") && !get.stderr.contains("nothing changed"), "\(get.stderr)")
        #expect(get.stderr.contains("kvctl delete com.example.damaged bad"), "says what to do: \(get.stderr)")
        daemon.stop()
    }

    @Test func keysListsUnreadableKeysAndDomainReadsSayWhatTheyLeftOut() throws {
        let sandbox = Sandbox()
        try sandbox.write("com.example.damaged.json", Self.damagedDomain)
        let daemon = try Daemon(sandbox)
        let keys = try kvctl(sandbox, "keys", "com.example.damaged")
        #expect(keys.status == 0 && keys.stdout == "bad\ngood\n", "\(keys.stdout) \(keys.stderr)")
        let whole = try kvctl(sandbox, "--json", "get", "com.example.damaged")
        #expect(whole.status == 1 && whole.stdout == #"{"good":"fine"}"# + "\n", "\(whole.stdout)")
        #expect(whole.stderr.contains("left out") && whole.stderr.contains("\"bad\""), "\(whole.stderr)")
        let file = sandbox.file("export.json")
        let export = try kvctl(sandbox, "export", "com.example.damaged", file)
        #expect(
            export.status == 1 && export.stderr.contains("\"bad\"") && export.stderr.contains(file), "\(export.stderr)")
        daemon.stop()
    }

    @Test func importRemovesUnreadableKeysNotInTheFileAndSaysSo() throws {
        let sandbox = Sandbox()
        try sandbox.write("com.example.damaged.json", Self.damagedDomain)
        let daemon = try Daemon(sandbox)
        let imported = try kvctl(sandbox, "import", "com.example.damaged", "-", input: #"{"good": "new"}"#)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("removed") && imported.stderr.contains("\"bad\""), "\(imported.stderr)")
        #expect(try kvctl(sandbox, "keys", "com.example.damaged").stdout == "good\n")
        #expect(try kvctl(sandbox, "get", "com.example.damaged", "bad").status == 1)
        daemon.stop()
    }

    @Test func keysWithNewlinesAreEscapedInPlainOutputAndExactInJSON() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.nl", "two\nlines", "x").status == 0)
        #expect(try kvctl(sandbox, "set", "com.example.nl", "back\\slash", "x").status == 0)
        #expect(try kvctl(sandbox, "set", "com.example.nl", "plain", "x").status == 0)
        let keys = try kvctl(sandbox, "keys", "com.example.nl")
        #expect(keys.stdout == "back\\\\slash\nplain\ntwo\\nlines\n", "\(keys.stdout.debugDescription)")
        let json = try kvctl(sandbox, "--json", "keys", "com.example.nl")
        #expect(json.stdout == #"["back\\slash","plain","two\nlines"]"# + "\n", "\(json.stdout)")
        daemon.stop()
    }
}
