import KVValues
import Testing

@testable import KVStorage

/// The log's records, byte for byte: recovery reads logs every kvd wrote, so a change to how a
/// record is written (how fast, into which buffer) must leave its bytes as they were.
@Suite struct LogRecordBytesTests {
    static let writer = Writer(uid: 1000, pid: 4242, program: "/usr/bin/gedit", app: "org.gnome.gedit")

    static func text(_ record: LogRecord) -> String {
        String(decoding: LogFormat.encode(record), as: UTF8.self)
    }

    @Test func setWithWriterIsWrittenAsAlways() {
        let record = LogRecord(
            revision: 42, domain: domain("com.example.app"), kind: "set",
            changes: [Change(key: key("theme \"dark\""), value: .string("x\ny"))], time: 1_764_900_000_123,
            writer: Self.writer)
        #expect(
            Self.text(record)
                == #"5d4676a6 {"revision":42,"time":1764900000123,"uid":1000,"pid":4242,"program":"/usr/bin/gedit","app":"org.gnome.gedit","domain":"com.example.app","kind":"set","changes":[{"key":"theme \"dark\"","value":"x\ny"}]}"#
                + "\n")
    }

    @Test func applyOfSeveralChangesWithoutTimeOrWriterIsWrittenAsAlways() {
        let value = Value.dictionary(["b": .array([.integer(-7), .bool(true)]), "a": .string("é")])
        let record = LogRecord(
            revision: 7, domain: domain("org.gnome.desktop"), kind: "apply",
            changes: [Change(key: key("k"), value: value), Change(key: key("gone"), value: nil)])
        #expect(
            Self.text(record)
                == #"37bbcdfb {"revision":7,"domain":"org.gnome.desktop","kind":"apply","changes":[{"key":"k","value":{"a":"é","b":[-7,true]}},{"key":"gone"}]}"#
                + "\n")
    }

    @Test func groupIsWrittenAsAlways() {
        let parts = [
            LogRecord.Part(domain: domain("a"), changes: [Change(key: key("k"), value: .integer(1))]),
            LogRecord.Part(domain: domain("b"), changes: [Change(key: key("k"), value: nil)]),
        ]
        let record = LogRecord(revision: 3, kind: "group", parts: parts, time: 5)
        #expect(
            Self.text(record)
                == #"1f67aaca {"revision":3,"time":5,"kind":"group","parts":[{"domain":"a","changes":[{"key":"k","value":1}]},{"domain":"b","changes":[{"key":"k"}]}]}"#
                + "\n")
    }

    @Test func entrySizesAndTheSoleValueAreWhereTheBytesAre() {
        var out: [UInt8] = []
        var sizes: [Int] = []
        let record = LogRecord(
            revision: 1, domain: domain("d"), kind: "set", changes: [Change(key: key("k"), value: .integer(12))])
        let recordSizes = LogFormat.append(record, to: &out, entryBytes: &sizes)
        #expect(sizes == [5])  // "k" and 12
        #expect(recordSizes.soleValue.map { String(decoding: out[$0], as: UTF8.self) } == "12")
        #expect(recordSizes.payloadBytes == out.count - 10)
    }
}
