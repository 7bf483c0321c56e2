import Foundation
import Glibc
import Testing

/// Property lists that no ordinary writer makes, imported with the real kvctl (and kvctl-plist)
/// into the real kvd: what kvd cannot hold exactly is refused naming the key, nothing imported;
/// what export writes, import reads back.
@Suite(.serialized) struct PlistStrictnessTests {
    /// Imports `bytes` into a domain holding `kept = 7`; expects a one-line refusal holding each
    /// of `reasons`, and the domain unchanged.
    static func expectRefused(
        _ bytes: [UInt8], _ reasons: [String], _ sandbox: Sandbox, limitMemory: Bool = false, _ label: String
    ) throws {
        let domain = "com.example.strict"
        #expect(try kvctl(sandbox, "import", domain, "-", input: #"{"kept": 7}"#).status == 0)
        let file = sandbox.root + "/input.plist"
        FileManager.default.createFile(atPath: file, contents: Data(bytes))
        // A gigabyte of address space is plenty for any refusal (the old reader took 3.8 GB to
        // expand 1,000 references to one 1 MB string).
        let command = (limitMemory ? "ulimit -v 1048576; " : "") + "exec \"$0\" --socket \"$1\" import \(domain) \"$2\""
        let refused = try run("/bin/sh", ["-c", command, Binaries.kvctl, sandbox.socket, file])
        #expect(refused.status == 1, "\(label): exit \(refused.status) \(refused.stderr)")
        #expect(
            refused.stderr.split(separator: "\n").count == 1 && !refused.stderr.contains("Domain="),
            "\(label): \(refused.stderr)")
        for reason in reasons { #expect(refused.stderr.contains(reason), "\(label): \(refused.stderr)") }
        #expect(
            try kvctl(sandbox, "--json", "get", domain).stdout == #"{"kept":7}"# + "\n", "\(label) changed the domain")
    }

    @Test func integersBeyond64BitsDatesOutsideTheYearsAndLoneSurrogatesAreRefusedNamingTheKey() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let cases: [(String, [UInt8], String)] = [
            (
                "2^64+5", [0x14] + BPlist.bigEndian(1, 8) + BPlist.bigEndian(5, 8),
                "is the integer 18446744073709551621, beyond kvd's signed 64-bit integers"
            ),
            (
                "2^100+2^63-1", [0x14] + BPlist.bigEndian(1 << 36, 8) + BPlist.bigEndian(UInt64(Int64.max), 8),
                "is the integer 1267650600237452773533557981183, beyond"
            ),
            ("NaN date", [0x33] + BPlist.bigEndian(Double.nan.bitPattern, 8), "is a date nan s from 2001-01-01"),
            (
                "infinite date", [0x33] + BPlist.bigEndian(Double.infinity.bitPattern, 8),
                "is a date inf s from 2001-01-01"
            ),
            ("1e300 s date", [0x33] + BPlist.bigEndian(1e300.bitPattern, 8), "is a date 1e+300 s from 2001-01-01"),
            ("lone surrogate", [0x63, 0x00, 0x61, 0xD8, 0x00, 0x00, 0x62], "holds a lone UTF-16 surrogate (U+D800)"),
        ]
        for (label, object, reason) in cases {
            let bytes = BPlist.make([BPlist.dictionary(keys: [1], values: [2]), BPlist.ascii("bad"), object])
            try Self.expectRefused(bytes, [#"the value of "bad""#, reason, "nothing imported"], sandbox, label)
        }
        let xml: [(String, String, String)] = [
            (
                "month 13", "<date>2026-13-45T99:00:00Z</date>",
                #"is the <date> "2026-13-45T99:00:00Z", which is not a date"#
            ),
            ("year 10000", "<date>10000-01-01T00:00:00Z</date>", #"is the <date> "10000-01-01T00:00:00Z""#),
            ("February 30", "<date>2026-02-30T00:00:00Z</date>", #"is the <date> "2026-02-30T00:00:00Z""#),
            ("lone surrogate", "<string>a&#xD800;b</string>", "holds a lone UTF-16 surrogate (U+D800)"),
            ("2^64", "<integer>18446744073709551616</integer>", "is the integer 18446744073709551616, beyond"),
            ("NaN", "<real>nan</real>", "is the real nan, which kvd cannot hold"),
        ]
        for (label, element, reason) in xml {
            let text =
                #"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict><key>ok</key><true/><key>bad</key>"#
                + element + "</dict></plist>"
            try Self.expectRefused(
                Array(text.utf8), [#"the value of "bad""#, reason, "nothing imported"], sandbox, "XML " + label)
        }
        daemon.stop()
    }

    @Test func aBinaryListThatExpandsBeyondADomainIsRefusedAtOnce() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        // 1,000 references to one 1 MiB string: 1 MB of file, a gigabyte of values.
        let string =
            [0x5F, 0x13] + BPlist.bigEndian(1 << 20, 8) + [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        let array = [0xAF, 0x11] + BPlist.bigEndian(1000, 2) + (0..<1000).flatMap { _ in BPlist.bigEndian(3, 2) }
        let bytes = BPlist.make(
            [BPlist.dictionary(keys: [1], values: [2], size: 2), BPlist.ascii("big"), array, string], referenceSize: 2)
        try Self.expectRefused(
            bytes, [#"the value of "big" expands to more than 16776192 bytes of values, more than one domain holds"#],
            sandbox, limitMemory: true, "1,000 references")
        daemon.stop()
    }

    @Test func damagedBinaryListsAreReportedAsDamaged() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let good = [UInt8](FileManager.default.contents(atPath: PlistTests.fixture("all-types.bplist"))!)
        var wrongTable = good
        wrongTable[wrongTable.count - 1] = 0xFF  // the offset table's offset
        let cycle = BPlist.make([BPlist.dictionary(keys: [1], values: [2]), BPlist.ascii("loop"), [0xA1, 0x02]])
        for (label, bytes) in [
            ("cut short", Array(good.prefix(good.count / 2))), ("offset table outside", wrongTable), ("cycle", cycle),
        ] {
            try Self.expectRefused(
                bytes, ["not a binary property list kvd can read (damaged or cut short?)"], sandbox, label)
        }
        daemon.stop()
    }

    @Test func aCFUIDDictionaryExportedAsXMLImportsBackAsTheSameDictionary() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let domain = "com.example.uid"
        #expect(try kvctl(sandbox, "set", domain, "u", "-dict", "CF$UID", "-int", "1").status == 0)
        #expect(try kvctl(sandbox, "set", domain, "a", "-array", "1", "two").status == 0)
        let before = try kvctl(sandbox, "--json", "get", domain).stdout
        for format in ["xml", "binary"] {
            let file = sandbox.root + "/uid." + format
            let exported = try kvctl(sandbox, "export", domain, file, "--format", format)
            #expect(exported.status == 0 && exported.stderr.isEmpty, "\(format): \(exported.stderr)")
            let imported = try kvctl(sandbox, "import", domain, file)
            #expect(imported.status == 0 && imported.stderr.isEmpty, "\(format): \(imported.stderr)")
            #expect(try kvctl(sandbox, "--json", "get", domain).stdout == before, "\(format)")
        }
        daemon.stop()
    }

    @Test func anImportLargerThanOneMessageSaysTooLargeWithTheLimit() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let file = sandbox.root + "/big.json"
        FileManager.default.createFile(
            atPath: file,
            contents: Data(#"{"big": ""#.utf8 + [UInt8](repeating: UInt8(ascii: "x"), count: 20 << 20) + #""}"#.utf8))
        let refused = try kvctl(sandbox, "import", "com.example.big", file)
        #expect(
            refused.status == 1 && refused.stderr.contains("larger than kvd's limit of 16777216 bytes"),
            "\(refused.stderr)")
        // kvd is fine, and the connection to it too.
        #expect(try kvctl(sandbox, "set", "com.example.big", "small", "ok").status == 0)
        daemon.stop()
    }
}

/// Binary property lists built byte by byte (CoreFoundation's CFBinaryPList.c format), for
/// inputs no writer makes.
enum BPlist {
    /// A `bplist00` of `objects` (each its marker and content), object 0 at the top, offsets of
    /// 4 bytes, references of `referenceSize` bytes.
    static func make(_ objects: [[UInt8]], referenceSize: Int = 1) -> [UInt8] {
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        for object in objects {
            offsets.append(out.count)
            out += object
        }
        let table = out.count
        for offset in offsets { out += bigEndian(UInt64(offset), 4) }
        out += [0, 0, 0, 0, 0, 0, 4, UInt8(referenceSize)]
        out += bigEndian(UInt64(objects.count), 8) + bigEndian(0, 8) + bigEndian(UInt64(table), 8)
        return out
    }

    static func bigEndian(_ value: UInt64, _ size: Int) -> [UInt8] {
        (0..<size).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    static func ascii(_ text: String) -> [UInt8] { [0x50 | UInt8(text.utf8.count)] + Array(text.utf8) }

    static func dictionary(keys: [Int], values: [Int], size: Int = 1) -> [UInt8] {
        [0xD0 | UInt8(keys.count)] + (keys + values).flatMap { bigEndian(UInt64($0), size) }
    }
}
