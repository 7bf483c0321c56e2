import KVSystem
import KVTestSupport
import KVValues
import Testing

@testable import KVCtl

/// Parsing of `export --format` and how `import` recognises a property list (the conversions
/// themselves run in the end-to-end PlistTests, through the real kvctl-plist).
@Suite struct PlistCommandTests {
    let domain = try! Domain(validating: "com.a")

    @Test func exportTakesAFormatAfterTheFile() throws {
        #expect(try Invocation.parse(["export", "com.a", "f"]).command == .export(domain, "f"))
        #expect(try Invocation.parse(["export", "com.a", "f", "--format", "json"]).command == .export(domain, "f"))
        #expect(
            try Invocation.parse(["export", "com.a", "f", "--format", "xml"]).command == .exportPlist(domain, "f", .xml)
        )
        #expect(
            try Invocation.parse(["export", "com.a", "-", "--format", "binary"]).command
                == .exportPlist(domain, "-", .binary))
        for bad in [["--format"], ["--format", "yaml"], ["--json"], ["--format", "xml", "extra"]] {
            #expect(throws: CommandLineError.self, "\(bad)") { try Invocation.parse(["export", "com.a", "f"] + bad) }
        }
    }

    @Test func propertyListsAreRecognisedByTheirFirstBytes() {
        for text in [
            "bplist00\u{0}", "<?xml version=\"1.0\"?><plist/>", "<plist version=\"1.0\">", "\u{FEFF}\n  <?xml",
            "\n<plist>",
        ] {
            #expect(Plist.looksLikePlist(Array(text.utf8)), "\(text.debugDescription)")
        }
        for text in ["{\"a\": 1}", " {\"<?xml\": 1}", "bplist0", "", "[]"] {
            #expect(!Plist.looksLikePlist(Array(text.utf8)), "\(text.debugDescription)")
        }
    }

    /// A pipe that cannot be made (out of descriptors) leaves none of the pipes made before it
    /// open: after the failure, the descriptors are free again.
    @Test func pipesThatCannotAllBeMadeCloseTheOnesMade() throws {
        let system = FaultInjectingSystem()
        system.limitDescriptors(free: 2)  // the first pipe, not the second
        #expect(throws: Failure.self) { try Plist.pipes(for: "kvctl-plist", system: system) }
        let descriptor = try system.openReadOnly("/dev/null")  // EMFILE if the first pipe leaked
        system.close(descriptor)
    }
}
