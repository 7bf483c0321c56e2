import Dispatch
import FoundationEssentials
import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

extension TemporaryFolder {
    /// The names of the state folder's files whose bytes contain `text`.
    func files(containing text: String) -> [String] {
        names().filter { read($0)?.contains(text) == true }
    }
}

/// Secrets and history: forgetting, keys that keep no history, history off, the size bound, and
/// history dropped before the data on a full disk.
@Suite struct ForgetHistoryTests {
    static let options = StoreOptions(compactionLogBytes: 600, historyKeep: 20, historyDays: 30)
    let app = domain("app")

    /// Commits `mutation` and returns its revision.
    @discardableResult
    func commit(_ store: Store, _ mutation: Mutation, in domain: Domain? = nil) throws -> Int64 {
        try store.commit(domain ?? app, mutation).revision
    }

    @Test func forgetRemovesAKeysPastValuesFromHistoryLogAndCopies() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        var store = try Store(directory: folder.state, options: Self.options)
        for round in 1...12 {  // several folds: values in history files and in the log
            try commit(store, .set(key("token"), .string("SECRET-\(round)"), ifRevision: nil))
            try commit(store, .set(key("theme"), .string("dark-\(round)"), ifRevision: nil))
        }
        try commit(store, .delete(key("token")))
        store.waitForFold()  // a crash after the last fold: what follows is only in the log
        store.abandon()
        // Copies kvd set aside: of the log and of the history file.
        folder.write("kvd.wal.unreadable-20261129T181320Z", folder.read("kvd.wal")!)
        folder.write("app.history.unreadable-20261129T181320Z", folder.read("app.history")!)
        store = try Store(directory: folder.state, options: Self.options)
        try commit(store, .set(key("token"), .string("SECRET-in-the-log"), ifRevision: nil))
        try commit(store, .delete(key("token")))
        // (a fold beside the commits may have put it in the domain and history files too)
        #expect(folder.files(containing: "SECRET-in-the-log").contains("kvd.wal"))
        try store.changeHistory(.forget(app, key("token")))
        #expect(folder.files(containing: "SECRET") == [], "no file holds a forgotten value")
        #expect(try store.history(app, key: key("token")).entries == [])
        #expect(try store.history(app, key: key("theme")).entries.count == 12, "the other key's history stays")
        #expect(
            folder.names().contains("kvd.wal.unreadable-20261129T181320Z"), "the log's copy is rewritten, not removed")
        try commit(store, .set(key("theme"), .string("light"), ifRevision: nil))
        store.close()
        store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        #expect(try store.history(app, key: key("token")).entries == [])
        #expect(folder.files(containing: "SECRET") == [])
    }

    @Test func forgetOfADomainKeepsOnlyItsCurrentValues() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        for round in 1...8 { try commit(store, .set(key("password"), .string("S3cret-\(round)"), ifRevision: nil)) }
        try commit(store, .set(key("user"), .string("ann"), ifRevision: nil))
        try commit(store, .deleteDomain)
        try commit(store, .set(key("user"), .string("bob"), ifRevision: nil))
        let revision = try store.changeHistory(.forget(app, nil))
        #expect(folder.files(containing: "S3cret") == [] && folder.files(containing: "ann") == [])
        let page = try store.history(app)
        #expect(page.entries.map(\.value) == [.string("bob")] && page.entries.first?.time == nil, "\(page.entries)")
        #expect(page.oldestRevision == revision)
    }

    @Test func aKeyThatKeepsNoHistoryNeverReachesAHistoryFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        var store = try Store(directory: folder.state, options: Self.options)
        try commit(store, .set(key("token"), .string("OLD-SECRET"), ifRevision: nil))
        try store.changeHistory(.keep(app, key("token"), false))
        #expect(
            folder.files(containing: "OLD-SECRET") == ["app.json"], "marking forgets what was kept: the value is left")
        for round in 1...12 {
            try commit(store, .set(key("token"), .string("SECRET-\(round)"), ifRevision: nil))
            try commit(store, .set(key("theme"), .integer(Int64(round)), ifRevision: nil))
        }
        #expect(try store.history(app, key: key("token")).entries == [])
        let themes = try store.history(app, key: key("theme")).entries
        #expect(themes.count == 12, "\(themes.map(\.revision))")
        #expect(
            folder.files(containing: "SECRET").allSatisfy { $0 == "kvd.wal" || $0 == "app.json" },
            "\(folder.files(containing: "SECRET"))")
        store.abandon()
        // the mark is durable; the log replays without it
        store = try Store(directory: folder.state, options: Self.options)
        #expect(store.historyExclusions.excludes(app, key("token")))
        #expect(try store.history(app, key: key("token")).entries == [])
        try store.changeHistory(.keep(app, key("token"), true))
        try commit(store, .set(key("token"), .string("kept"), ifRevision: nil))
        #expect(try store.history(app, key: key("token")).entries.map(\.value) == [.string("kept")])
        store.close()
        #expect(!folder.names().contains(HistoryExclusions.fileName), "no mark left: the file goes")
    }

    /// A domain made since the start, folded several times before anyone read its history,
    /// once had its file "completed" as if it had been deleted while history was off.
    @Test func aFirstReadAfterFoldsOfANewDomainServesEveryChange() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        for round in 1...12 { try commit(store, .set(key("theme"), .integer(Int64(round)), ifRevision: nil)) }
        let page = try store.history(app)
        #expect(page.entries.map(\.revision) == Array((1...12).reversed()) && page.oldestRevision == 0, "\(page)")
    }

    @Test func aDomainThatKeepsNoHistoryHasNoHistoryFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let store = try Store(directory: folder.state, options: Self.options)
        defer { store.close() }
        try commit(store, .set(key("a"), .integer(1), ifRevision: nil))
        try store.changeHistory(.keep(app, nil, false))
        for round in 1...20 { try commit(store, .set(key("a"), .integer(Int64(round)), ifRevision: nil)) }
        #expect(!folder.names().contains("app.history"))
        #expect(try store.history(app).entries == [])
    }

    @Test func turningHistoryOffRemovesItsFiles() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        do {
            let store = try Store(directory: folder.state, options: Self.options)
            try commit(store, .set(key("token"), .string("SECRET"), ifRevision: nil))
            try commit(store, .delete(key("token")))
            store.close()
        }
        folder.write("app.history.unreadable-20261129T181320Z", "copy of SECRET")
        #expect(folder.files(containing: "SECRET") == ["app.history", "app.history.unreadable-20261129T181320Z"])
        let off = try Store(directory: folder.state, options: StoreOptions(historyKeep: 0, historyDays: 0))
        off.close()
        #expect(folder.files(containing: "SECRET") == [])
        let on = try Store(directory: folder.state, options: Self.options)
        defer { on.close() }
        #expect(try on.history(app, key: key("token")).entries == [], "history on again does not serve it")
    }

    @Test func historyIsBoundedPerDomainDeletedKeysIncluded() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let options = StoreOptions(compactionLogBytes: 64 << 10, historyKeep: 1, historyDays: 0)
        let store = try Store(directory: folder.state, options: options)
        defer { store.close() }
        var largest: Int64 = 0
        for batch in 0..<30 {  // 1,500 deleted keys of long names: 1.5 MB of removals for an empty domain
            let keys = (0..<50).map { key("session-\(batch)-\($0)-" + String(repeating: "n", count: 950)) }
            try commit(store, .apply(keys.map { Change(key: $0, value: .integer(1)) }, ifRevision: nil))
            try commit(store, .apply(keys.map { Change(key: $0, value: nil) }, ifRevision: nil))
            largest = max(largest, folder.size("app.history"))
        }
        try commit(store, .set(key("kept"), .integer(1), ifRevision: nil))
        // Commits never wait for a fold, and what no fold has taken yet is served from memory,
        // unpruned: let the folds catch up first (the running one, then one of everything).
        store.waitForFold()
        store.queue.sync { store.startFoldIfDue() }
        store.waitForFold()
        largest = max(largest, folder.size("app.history"))
        #expect(
            largest > 0 && largest <= 1 << 20, "history of an empty domain stays within 1 MiB: at most \(largest) bytes"
        )
        let page = try store.history(app)
        #expect(
            page.entries.first?.key == key("kept") && page.entries.contains { $0.key.name.hasPrefix("session-29-") },
            "the newest stay")
        #expect(!page.entries.contains { $0.key.name.hasPrefix("session-0-") }, "the oldest go first")
    }

    @Test func historyOfValuesIsBoundedToo() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        // keep 20, 30 days
        let store = try Store(directory: folder.state, options: StoreOptions(compactionLogBytes: 64 << 10))
        defer { store.close() }
        let blob = String(repeating: "x", count: 10_000)
        var largest: Int64 = 0
        for round in 0..<160 {  // 1.6 MB of values within 30 days, for a domain of 10 kB
            try commit(store, .set(key("blob"), .string("\(round)" + blob), ifRevision: nil))
            largest = max(largest, folder.size("app.history"))
        }
        #expect(largest > 0 && largest <= 1 << 20, "at most \(largest) bytes")
        #expect(try store.history(app).entries.first?.value == .string("159" + blob))
    }

    @Test func aFullDiskDropsHistoryBeforeItRefusesAWrite() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let store = try Store(directory: folder.state, options: Self.options, fileSystem: fileSystem)
        for round in 1...12 { try commit(store, .set(key("k"), .integer(Int64(round)), ifRevision: nil)) }
        store.waitForFold()
        #expect(folder.names().contains("app.history"))
        // The disk is full until a history file is removed.
        let full = Mutex(true)
        fileSystem.fail { operation, name in
            if operation == "unlink", name.hasSuffix(".history") { full.withLock { $0 = false } }
            let writes = ["write", "pwrite", "preallocate", "fsync", "fdatasync"].contains(operation)
            return writes && full.withLock({ $0 }) ? ENOSPC : nil
        }
        let revision = try commit(store, .set(key("k"), .integer(99), ifRevision: nil))
        #expect(!full.withLock { $0 }, "history was dropped")
        #expect(store.get(app, key("k")) == .value(.integer(99), revision: revision))
        try commit(store, .set(key("k"), .integer(100), ifRevision: nil))
        #expect(try store.history(app).entries.first?.value == .integer(100), "history goes on from the values")
        store.close()
        let reopened = try Store(directory: folder.state, options: Self.options)
        defer { reopened.close() }
        #expect(reopened.get(app, key("k")) == .value(.integer(100), revision: revision + 1))
    }
    /// The space history frees is used even when compacting the log does not fit.
    @Test func aWriteThatFitsOnceHistoryIsDroppedIsTakenEvenIfCompactionFails() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let fileSystem = RecordingFileSystem()
        let store = try Store(directory: folder.state, options: Self.options, fileSystem: fileSystem)
        defer { store.close() }
        for round in 1...12 { try commit(store, .set(key("k"), .integer(Int64(round)), ifRevision: nil)) }
        store.waitForFold()
        // The log is full until a history file is removed; a new domain file never fits.
        let full = Mutex(true)
        fileSystem.fail { operation, name in
            if operation == "unlink", name.hasSuffix(".history") { full.withLock { $0 = false } }
            let writes = ["write", "pwrite", "preallocate", "fsync", "fdatasync"].contains(operation)
            return writes && (full.withLock({ $0 }) || name.hasSuffix(".tmp")) ? ENOSPC : nil
        }
        let revision = try commit(store, .set(key("k"), .integer(99), ifRevision: nil))
        #expect(!full.withLock { $0 }, "history was dropped")
        #expect(store.get(app, key("k")) == .value(.integer(99), revision: revision))
    }
}
