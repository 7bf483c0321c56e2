import FoundationEssentials
import KVSystem
import KVValues
import Testing

@testable import KVStorage

/// Who made each change: kept in the log and in history with the change, bounded, read back from
/// files written before writers (unknown), and forgotten with the history.
@Suite struct WriterRecordTests {
    static let options = StoreOptions(compactionLogBytes: 600, historyKeep: 20, historyDays: 30)
    static let editor = Writer(uid: 1000, pid: 4242, program: "/usr/bin/gnome-text-editor", app: "org.gnome.TextEditor")
    let app = domain("com.example.blame")

    @Test func writerIsKeptThroughTheLogTheFoldAndARestart() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        var store = try Store(directory: folder.state, options: Self.options)
        for round in 1...8 {  // several folds: writers in the history file and in the log
            _ = try store.commit(app, .set(key("theme"), .integer(Int64(round)), ifRevision: nil), writer: Self.editor)
        }
        _ = try store.commit(app, .set(key("theme"), .integer(9), ifRevision: nil))  // kvd's own: no writer
        store.waitForFold()
        let served = try store.history(app).entries
        #expect(served.map(\.writer) == [nil] + Array(repeating: Self.editor, count: 8))
        store.abandon()  // a crash: what the last fold left is replayed from the log
        store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        #expect(try store.history(app).entries.map(\.writer) == served.map(\.writer))
        #expect(try store.history(app, at: 8).first?.writer == Self.editor)
    }

    @Test func recordsWithoutWriterReadAsUnknownAndAnOldUIDAsItsUser() throws {
        // A history file as kvd wrote it before writers: no writer, or the system instance's uid.
        var bytes = HistoryFormat.header(app, since: 0)
        LogFormat.appendLine(to: &bytes) { $0 += Array(#"{"revision":1,"time":5,"key":"a","value":1}"#.utf8) }
        LogFormat.appendLine(to: &bytes) {
            $0 += Array(#"{"revision":2,"time":6,"uid":1000,"key":"b","value":2}"#.utf8)
        }
        let content = try HistoryFormat.read(bytes, domain: app)
        #expect(content.entries.map(\.writer) == [nil, Writer(uid: 1000)])
        let record = try LogFormat.decodeRecord(
            Array(#"{"revision":3,"time":7,"domain":"com.example.blame","kind":"set","changes":[{"key":"a"}]}"#.utf8)[
                ...])
        #expect(record.writer == nil && record.revision == 3)
    }

    @Test func aWriterThatIsNotOneIsRefusedLikeAnyDamagedLine() {
        var bytes = HistoryFormat.header(app, since: 0)
        LogFormat.appendLine(to: &bytes) { $0 += Array(#"{"revision":1,"pid":"x","key":"a"}"#.utf8) }
        LogFormat.appendLine(to: &bytes) { $0 += Array(#"{"revision":2,"key":"a"}"#.utf8) }
        #expect(throws: HistoryFileError.self) { try HistoryFormat.read(bytes, domain: app) }
    }

    @Test func everyTextIsBoundedSoARecordGrowsByABoundedAmount() {
        let long = String(repeating: "é", count: 300)  // 600 bytes; cut at a character boundary
        let writer = Writer(uid: .max, pid: .max, program: "/" + long, app: long + "\u{1}")
        #expect(writer.program!.utf8.count <= Writer.maxTextBytes && writer.app!.utf8.count <= Writer.maxTextBytes)
        #expect(writer.program!.utf8.count >= Writer.maxTextBytes - 1)
        let change = [Change(key: key("k"), value: .integer(1))]
        let without = LogFormat.encode(LogRecord(revision: 1, domain: app, kind: "set", changes: change, time: 1))
        let with = LogFormat.encode(
            LogRecord(revision: 1, domain: app, kind: "set", changes: change, time: 1, writer: writer))
        #expect(with.count - without.count <= Writer.maxEncodedBytes)
        let evil = Writer(program: String(repeating: "\u{1}", count: 400), app: String(repeating: "\u{1}", count: 400))
        let worst = LogFormat.encode(
            LogRecord(revision: 1, domain: app, kind: "set", changes: change, time: 1, writer: evil))
        #expect(worst.count - without.count <= Writer.maxEncodedBytes)
        #expect(Writer(program: "", app: "").isUnknown, "an empty text is none")
    }

    @Test func forgettingHistoryForgetsWhoMadeTheChanges() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        for round in 1...8 {
            _ = try store.commit(app, .set(key("theme"), .integer(Int64(round)), ifRevision: nil), writer: Self.editor)
        }
        store.waitForFold()
        #expect(folder.files(containing: "gnome-text-editor").isEmpty == false)
        try store.changeHistory(.forget(app, nil))
        #expect(folder.files(containing: "gnome-text-editor") == [], "no file names the writer")
        #expect(try store.history(app).entries.map(\.writer) == [nil], "the current value, of no known writer")
    }
}
