import Foundation
import Glibc
import Testing

/// `kvctl import` of XML and binary property lists and `kvctl export --format xml|binary`, with
/// the real kvctl (and its kvctl-plist helper) against the real kvd.
@Suite(.serialized) struct PlistTests {
    /// The fixtures in Tests/Fixtures/plist (see its README for how each was made).
    static func fixture(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fixtures/plist/" + name)
            .standardized.path
    }

    /// What all-types.{xml,bplist} hold, as `kvctl --json get DOMAIN` prints it.
    static let allTypes =
        #"{"$dict":{"$dictionary":{"$dict":{"$n":1,"nested":[{"$date":"2001-01-01T00:00:00.000Z"}]}},"array":[1,"a",2.5],"#
        + #""data":{"$data":"AAEC/w=="},"date":{"$date":"2026-11-29T17:00:00.000Z"},"false":false,"integer":-9223372036854775808,"#
        + #""largest":9223372036854775807,"real":0.1,"string":"héllo, wörld","true":true,"whole real":2.0}}"# + "\n"

    @Test func binaryAndXMLFixturesImportWithExactTypedValues() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        for (domain, file) in [("com.example.binary", "all-types.bplist"), ("com.example.xml", "all-types.xml")] {
            let imported = try kvctl(sandbox, "import", domain, Self.fixture(file))
            #expect(imported.status == 0 && imported.stderr.isEmpty, "\(file): \(imported.stderr)")
            #expect(try kvctl(sandbox, "--json", "get", domain).stdout == Self.allTypes, "\(file)")
            #expect(try kvctl(sandbox, "read-type", domain, "whole real").stdout == "real\n")
            #expect(try kvctl(sandbox, "read-type", domain, "largest").stdout == "integer\n")
        }
        // From stdin too, recognised by its first bytes.
        let piped = try run(
            Binaries.kvctl, ["--socket", sandbox.socket, "import", "com.example.stdin", "-"],
            input: try String(contentsOfFile: Self.fixture("all-types.xml"), encoding: .utf8))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(try kvctl(sandbox, "--json", "get", "com.example.stdin").stdout == Self.allTypes)
        daemon.stop()
    }

    @Test func binaryAndXMLExportsReadBackIntoTheSameDomain() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let domain = "com.example.round"
        #expect(try kvctl(sandbox, "import", domain, Self.fixture("all-types.xml")).status == 0)
        for format in ["binary", "xml"] {
            if format == "binary" {
                // A date with a fraction that needs every bit of its double.
                #expect(
                    try kvctl(sandbox, "set", domain, "when", "-date", "2026-11-29T17:00:00.123456789Z").status == 0)
            } else {
                #expect(try kvctl(sandbox, "delete", domain, "when").status == 0)
            }
            let before = try kvctl(sandbox, "--json", "get", domain).stdout
            let file = sandbox.root + "/export." + format
            let exported = try kvctl(sandbox, "export", domain, file, "--format", format)
            #expect(exported.status == 0 && exported.stderr.isEmpty, "\(format): \(exported.stderr)")
            let head = String(decoding: (FileManager.default.contents(atPath: file) ?? Data()).prefix(8), as: UTF8.self)
            #expect(head == (format == "binary" ? "bplist00" : "<?xml ve"), "\(format) export starts with \(head)")
            // Change the domain, then import the export back: it holds exactly what it did.
            #expect(try kvctl(sandbox, "set", domain, "extra", "x").status == 0)
            #expect(try kvctl(sandbox, "set", domain, "integer", "-float", "1").status == 0)
            let imported = try kvctl(sandbox, "import", domain, file)
            #expect(imported.status == 0 && imported.stderr.isEmpty, "\(format): \(imported.stderr)")
            #expect(try kvctl(sandbox, "--json", "get", domain).stdout == before, "\(format)")
        }
        daemon.stop()
    }

    @Test func whatKvdCannotHoldIsRefusedNamingTheKeyAndNothingIsImported() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let domain = "com.example.refused"
        #expect(try kvctl(sandbox, "set", domain, "kept", "-int", "7").status == 0)
        let cases = [
            ("too-big.bplist", #""too big" is the integer 18446744073709551615, beyond kvd's signed 64-bit integers"#),
            ("too-big.xml", #""too big" is the integer 18446744073709551615, beyond kvd's signed 64-bit integers"#),
            ("keyed-archive.bplist", #""$objects" at [1]["$class"] is a UID (from a keyed archive)"#),
        ]
        for (file, reason) in cases {
            let refused = try kvctl(sandbox, "import", domain, Self.fixture(file))
            #expect(refused.status == 1, "\(file)")
            #expect(
                refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains(reason),
                "\(file): \(refused.stderr)")
            #expect(refused.stderr.contains(file) && refused.stderr.contains("nothing imported"), "\(refused.stderr)")
            #expect(
                try kvctl(sandbox, "--json", "get", domain).stdout == #"{"kept":7}"# + "\n",
                "\(file) changed the domain")
        }
        daemon.stop()
    }

    @Test func anXMLExportRefusesADateItWouldRound() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.d", "when", "-date", "2026-11-29T17:00:00.250Z").status == 0)
        let file = sandbox.root + "/d.plist"
        let refused = try kvctl(sandbox, "export", "com.example.d", file, "--format", "xml")
        #expect(
            refused.status == 1 && refused.stderr.contains(#""when""#) && refused.stderr.contains("--format binary"),
            "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file))
        daemon.stop()
    }
}
