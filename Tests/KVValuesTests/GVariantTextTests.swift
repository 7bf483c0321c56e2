import Foundation
import Testing

@testable import KVValues

/// The GVariant text parser against GLib's own (python3-gi's `GLib.Variant.parse`, through
/// Tests/Python/gvariant_oracle.py): every `<default>` of every installed schema, read with its
/// key's type and with none (its type inferred, as a dconf keyfile's value is), and tricky texts,
/// must give the same type and value (and the same kvd form as the GSettings backend's
/// convert.c), or be refused where GLib refuses them.
@Suite struct GVariantTextTests {
    static let oracle = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Python/gvariant_oracle.py").standardizedFileURL.path

    /// Texts that try the edges of the language, each with no type and as given.
    static let tricky: [(String, String?)] = [
        ("5", nil), ("-5", nil), ("+5", nil), ("0x1F", nil), ("017", nil), ("08", nil), ("2147483648", nil),
        ("-2147483648", nil), ("uint32 5", nil), ("uint32 -1", nil), ("int64 9223372036854775807", nil),
        ("uint64 18446744073709551615", nil), ("18446744073709551616", "t"), ("byte 255", nil), ("byte 256", nil),
        ("int16 -32768", nil), ("handle 3", nil), ("5.0", nil), ("1e3", nil), ("0x10", "d"), ("5", "d"), (".5", nil),
        ("inf", nil), ("-inf", nil), ("nan", nil), ("1e400", nil), ("5e-324", nil), ("1e-400", nil), ("0.1", nil),
        ("true", nil), ("false", nil), ("True", nil), ("'x'", nil), ("\"it's\"", nil), ("'a\\'b'", nil),
        ("'\\u00e9\\U0001F600'", nil), ("'\\u0000'", nil), ("'\\n\\t\\x'", nil), ("'tab\there'", nil),
        ("'unterminated", nil),
        ("b'bytes'", nil), ("b\"it's\"", nil), ("b'a\\0b'", nil), ("b'\\101\\7'", nil), ("b''", nil),
        ("@as []", nil), ("[]", nil), ("[1, 2]", nil), ("[1, 2.5]", nil), ("[1, 'a']", nil), ("['a', 'b']", nil),
        ("[[1], []]", nil), ("[@ay [], b'x']", nil), ("['a', nothing]", nil), ("[just 1, nothing]", nil),
        ("nothing", nil), ("@mi nothing", nil), ("just 5", nil), ("just nothing", nil), ("@mmi just nothing", nil),
        ("@ms 'x'", nil), ("5", "mi"), ("<5>", nil), ("<@ai []>", nil), ("[<1>, <'a'>]", nil), ("<<true>>", nil),
        ("(1, 'a')", nil), ("(1,)", nil), ("()", nil), ("(1)", nil), ("{'a': 1}", nil), ("{'a': 1, 'b': 2}", nil),
        ("{'a', 1}", nil), ("{}", nil), ("@a{sv} {}", nil), ("{1: 'x'}", nil), ("{[1]: 'x'}", nil),
        ("{'b': 1, 'a': 2}", nil), ("{'a': 1, 'b': 2.5}", nil), ("{'a': <1>}", nil),
        ("{'gvariant': 's', 'text': 'x'}", nil),
        ("objectpath '/org/x'", nil), ("objectpath 'x'", nil), ("'/org/x'", "o"), ("signature 'a{sv}'", nil),
        ("signature 'mi'", nil), ("@(ii) (1, 2)", nil), ("@i 5", nil), ("@z 5", nil), ("@a* []", nil),
        ("[(1, 'a'), (2, 'b')]", nil),
        ("  5  ", nil), ("5 6", nil), ("", nil), ("[1,", nil), ("<5", nil), ("uint32", nil), ("unknown 5", nil),
        ("[@mi 5, nothing]", nil), ("(uint32 1, [<(1, 'x')>])", nil), ("{'k': (1, 2.5)}", nil), ("[{'a': 1}, {}]", nil),
        ("@a{ss} {'a': 'b'}", nil), ("{'a': 'b'}", "a{sv}"), ("[1, 2]", "ax"), ("[1, 2]", "ad"), ("(1, 2)", "(ud)"),
        ("'x'", "i"), ("just 'x'", "ms"), ("[nothing]", "ams"), ("[true, nothing]", nil), ("@t 5", nil),
        (String(repeating: "[", count: 130) + String(repeating: "]", count: 130), "as"),
        (String(repeating: "<", count: 100) + "1" + String(repeating: ">", count: 100), nil),
    ]

    @Test func agreesWithGLibOnSchemaDefaultsAndTrickyTexts() throws {
        let defaults = try run(["defaults"]).split(separator: "\n").map { line -> (String, String) in
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: String]
            return (object["text"]!, object["type"]!)
        }
        #expect(defaults.count > 300, "gsettings-desktop-schemas should be installed")
        var cases: [(String, String?)] = Self.tricky
        for (text, type) in defaults { cases += [(text, nil), (text, type)] }
        var lines: [String] = []
        for (text, type) in cases { lines.append(try answer(text, type)) }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("gvariant-\(getpid()).jsonl").path
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let report = try run(["check", file])
        #expect(report.hasSuffix("\(cases.count) passed, 0 failed\n"), "\(report)")
    }

    /// One line of Swift's answers for the oracle.
    func answer(_ text: String, _ type: String?) throws -> String {
        var object: [String: Any] = ["text": text, "type": type as Any]
        do {
            let value = try GVariantText.parse(text, as: type)
            object["ok"] = true
            object["gtype"] = value.typeString
            object["printed"] = value.printed()
            object["json"] = JSONWriter(sortKeys: true).string(value.kvdValue.typedJSON)
        } catch {
            object["ok"] = false
            object["error"] = error.description
        }
        return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [Self.oracle] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: output, as: UTF8.self)
    }

    @Test func inferredTypesAreGLibs() throws {
        #expect(try GVariantText.parse("5").typeString == "i")
        #expect(try GVariantText.parse("uint32 5") == .uint32(5))
        #expect(try GVariantText.parse("@as []") == .array(element: "s", []))
        #expect(try GVariantText.parse("[1, 2.5]").typeString == "ad")
        #expect(try GVariantText.parse("b'ab'") == .array(element: "y", [.byte(97), .byte(98), .byte(0)]))
        #expect(throws: GVariantText.ParseError.self) { try GVariantText.parse("[]") }
        #expect(throws: GVariantText.ParseError.self) { try GVariantText.parse("[1, 'a']") }
    }

    @Test func valuesTakeTheBackendsForm() throws {
        #expect(try GVariantText.parse("uint32 5").kvdValue == .integer(5))
        #expect(try GVariantText.parse("['a', 'b']").kvdValue == .array([.string("a"), .string("b")]))
        #expect(
            try GVariantText.parse("(1, 'a')").kvdValue
                == .dictionary(["gvariant": .string("(is)"), "text": .string("(1, 'a')")]))
        #expect(
            try GVariantText.parse("<5>").kvdValue == .dictionary(["gvariant": .string("v"), "text": .string("<5>")]))
    }
}
