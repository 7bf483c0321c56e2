import FoundationEssentials
import KVValues
import Testing

@testable import KVCtl

/// The backup file written piece by piece as domains arrive is the same file as the whole document
/// written at once.
@Suite struct BackupFileTests {
    @Test func writtenPieceByPieceIsTheWholeDocument() throws {
        let created = Date(timeIntervalSince1970: 1_800_000_000)
        let two: [Domain: [Key: Value]] = [
            try Domain(validating: "com.example.b"): [
                try Key(validating: "$k"): .string("x\n"),
                try Key(validating: "n"): .array([.integer(1), .dictionary(["a": .bool(true)])]),
            ],
            try Domain(validating: "com.example.a"): [try Key(validating: "k"): .data(Data([0, 1, 255]))],
        ]
        for domains in [[:], two] {
            let file = BackupFile(revision: 42, created: created, domains: domains)
            let whole: JSON = .object([
                "format": .string(BackupFile.format), "version": .integer(BackupFile.version), "revision": .integer(42),
                "created": .string(RFC3339.format(created)),
                "domains": .object(
                    domains.reduce(into: [:]) {
                        $0[$1.key.name] =
                            Value.dictionary(Dictionary(uniqueKeysWithValues: $1.value.map { ($0.key.name, $0.value) }))
                            .typedJSON
                    }),
            ])
            let expected =
                JSONWriter(pretty: true, sortKeys: true, maxIndentedLevel: 2).bytes(whole) + [UInt8(ascii: "\n")]
            #expect(String(decoding: file.encoded(), as: UTF8.self) == String(decoding: expected, as: UTF8.self))
            #expect(try BackupFile(file.encoded(), name: "f") == file)
        }
    }
}
