import FoundationEssentials
import KVSystem
import KVValues
import Testing

@testable import KVStorage

@Suite struct RecoveryTests {
    @Test func version0BareObjectIsReadAndRewrittenAsVersion1() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write(
            "com.example.old.json", #"{"name": "Ada", "count": 3, "when": {"$date": "2026-11-29T17:00:00.250Z"}}"#)
        let app = domain("com.example.old")
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(app, key("name")) == .value(.string("Ada"), revision: 1))
            #expect(store.list(app)?.values.count == 3)
            store.close()
        }
        #expect(
            folder.read("com.example.old.json")?.contains("formatVersion") == false, "loading alone does not rewrite")
        let store = try Store(directory: folder.state)
        _ = try store.commit(app, .set(key("count"), .integer(4), ifRevision: nil))
        store.close()
        let text = try #require(folder.read("com.example.old.json"))
        #expect(text.contains(#""format": "kvd-domain""#))
        #expect(text.contains(#""formatVersion": 1"#))
        #expect(text.contains(#""name": "Ada""#))
        let reopened = try Store(directory: folder.state)
        defer { reopened.close() }
        #expect(reopened.get(app, key("count")) == .value(.integer(4), revision: 2))
        #expect(reopened.get(app, key("name")) == .value(.string("Ada"), revision: 1))
    }

    @Test(arguments: [
        "{not json", #"["an", "array"]"#, #"{"format": "kvd-domain", "formatVersion": 99, "values": {}}"#,
        #"{"format": "other", "formatVersion": 1}"#,
    ])
    func unreadableDomainFileIsBackedUpAndOthersServed(content: String) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let good = domain("com.example.good")
        do {
            let store = try Store(directory: folder.state)
            _ = try store.commit(good, .set(key("k"), .string("fine"), ifRevision: nil))
            store.close()
        }
        folder.write("com.example.bad.json", content)
        let logs = LogCollector()
        let store = try Store(directory: folder.state, log: logs.callback)
        let backups = folder.names().filter { $0.hasPrefix("com.example.bad.unreadable-") }
        #expect(backups.count == 1)
        let name = try #require(backups.first)
        #expect(name.utf8.count == "com.example.bad.unreadable-20261129T181320Z.json".utf8.count)
        #expect(name.hasSuffix("Z.json"))
        #expect(folder.read(name) == content)
        #expect(logs.messages(at: .error).contains { $0.contains("com.example.bad.json") && $0.contains(name) })
        #expect(store.list(domain("com.example.bad")) == nil)
        #expect(store.domains() == [good])
        #expect(store.get(good, key("k")) == .value(.string("fine"), revision: 1))
        _ = try store.commit(domain("com.example.bad"), .set(key("new"), .bool(true), ifRevision: 0))
        store.close()
        let reopened = try Store(directory: folder.state)
        defer { reopened.close() }
        #expect(reopened.domains().count == 2, "the backup is never read as a domain")
        #expect(folder.names().filter { $0.hasPrefix("com.example.bad.unreadable-") }.count == 1)
    }

    @Test func backupNamesGetACounterWhenTaken() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        for _ in 0..<2 {
            folder.write("com.example.bad.json", "{broken")
            let store = try Store(directory: folder.state)
            store.close()
        }
        let backups = folder.names().filter { $0.hasPrefix("com.example.bad.unreadable-") }
        #expect(backups.count == 2)
        #expect(!folder.names().contains("com.example.bad.json"), "the empty domain replaced it on close")
    }

    @Test func oneBadValueCostsOnlyItsKeyAndSurvivesTheNextSave() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write(
            "com.example.mixed.json",
            """
            {"format": "kvd-domain", "formatVersion": 1, "domain": "com.example.mixed", "revision": 5,
             "savedAt": "2026-11-29T17:00:00.000Z",
             "values": {"good": 1, "bad": {"$date": "yesterday"}, "nulled": null},
             "revisions": {"good": 4, "bad": 5, "nulled": 3}}
            """)
        let app = domain("com.example.mixed")
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(app, key("good")) == .value(.integer(1), revision: 4))
            guard case .unreadable(let reason) = store.get(app, key("bad")) else {
                Issue.record("bad should be unreadable")
                return
            }
            #expect(reason.contains("RFC 3339"))
            let snapshot = try #require(store.list(app))
            #expect(Set(snapshot.unreadable.keys) == [key("bad"), key("nulled")])
            #expect(snapshot.revisions[key("bad")] == 5)
            _ = try store.commit(app, .set(key("good"), .integer(2), ifRevision: 4))
            store.close()
        }
        let text = try #require(folder.read("com.example.mixed.json"))
        #expect(text.contains(#""$date": "yesterday""#))
        #expect(text.contains(#""nulled": null"#))
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("good")) == .value(.integer(2), revision: 6))
        _ = try store.commit(app, .set(key("bad"), .string("fixed"), ifRevision: nil))
        #expect(store.list(app)?.unreadable.keys.map(\.name) == ["nulled"])
    }

    /// Commits overwrite space reserved ahead of the log's end instead of growing the file;
    /// the zeros left after the last record are the log's end, not damage.
    @Test func reservedSpaceAfterTheLastRecordIsNotDamage() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("com.example.reserved")
        let fileSystem = RecordingFileSystem()
        do {
            let store = try Store(
                directory: folder.state, options: StoreOptions(logReservationBytes: 4096), fileSystem: fileSystem)
            for index in 0..<50 {
                _ = try store.commit(app, .set(key("k\(index)"), .integer(Int64(index)), ifRevision: nil))
            }
            let reservations = fileSystem.calls.filter { $0 == "preallocate kvd.wal" }.count
            #expect(
                (1...3).contains(reservations),
                "one reservation per 4 KiB of records, not one per commit: \(reservations)")
            let log = try #require(folder.read("kvd.wal"))
            #expect(log.hasSuffix("\0\0\0\0"), "the file ends in reserved zeros")
            store.abandon()
        }
        let logs = LogCollector()
        do {
            let store = try Store(directory: folder.state, log: logs.callback)
            #expect(store.list(app)?.values.count == 50)
            #expect(logs.messages(at: .warning).isEmpty, "\(logs.messages(at: .warning))")
            _ = try store.commit(app, .set(key("after"), .integer(1), ifRevision: nil))
            store.abandon()
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.list(app)?.values.count == 51)
        #expect(store.revision == 51)
    }

    @Test func tornLogTailIsIgnored() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("com.example.torn")
        do {
            let store = try Store(directory: folder.state)
            _ = try store.commit(app, .set(key("a"), .integer(1), ifRevision: nil))
            _ = try store.commit(app, .set(key("b"), .integer(2), ifRevision: nil))
            store.abandon()
        }
        var log = try #require(folder.read("kvd.wal"))
        log = String(log.prefix { $0 != "\0" })  // without the space reserved ahead
        log.removeLast(10)  // the last record loses its end, as after a crash mid-write
        folder.write("kvd.wal", log)
        let logs = LogCollector()
        do {
            let store = try Store(directory: folder.state, log: logs.callback)
            #expect(store.get(app, key("a")) == .value(.integer(1), revision: 1))
            #expect(store.get(app, key("b")) == .missing)
            #expect(store.revision == 1)
            #expect(!folder.names().contains { $0.contains("unreadable") }, "a torn tail is no damage to keep")
            #expect(try store.commit(app, .set(key("c"), .integer(3), ifRevision: nil)).revision == 2)
            store.abandon()
        }
        let store = try Store(directory: folder.state)
        defer { store.close() }
        #expect(store.get(app, key("c")) == .value(.integer(3), revision: 2))
    }

    @Test func damageBeforeValidRecordsKeepsACopyOfTheLog() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("com.example.rot")
        do {
            let store = try Store(directory: folder.state)
            for index in 1...3 {
                _ = try store.commit(app, .set(key("k\(index)"), .integer(Int64(index)), ifRevision: nil))
            }
            store.abandon()
        }
        var lines = try #require(folder.read("kvd.wal")).split(separator: "\n", omittingEmptySubsequences: false).map(
            String.init)
        lines[2] = lines[2].replacing("\"k2\"", with: "\"kX\"")  // record 2: checksum no longer matches
        folder.write("kvd.wal", lines.joined(separator: "\n"))
        let logs = LogCollector()
        let store = try Store(directory: folder.state, log: logs.callback)
        defer { store.close() }
        #expect(store.get(app, key("k1")) == .value(.integer(1), revision: 1))
        #expect(store.get(app, key("k2")) == .missing)
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") })
        #expect(logs.messages(at: .warning).contains { $0.contains("kvd.wal.unreadable-") })
    }

    @Test func logWithADamagedHeaderIsKeptAsideAndReplaced() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("kvd.wal", "00000000 {}\n")
        let store = try Store(directory: folder.state)
        store.close()
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") })
        #expect(folder.read("kvd.wal")?.contains(#""format":"kvd-wal""#) == true)
    }

    @Test func logFromANewerKvdIsRefused() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let header = LogFormat.frame(
            .object(["format": .string("kvd-wal"), "formatVersion": .integer(2), "baseRevision": .integer(9)]))
        folder.write("kvd.wal", String(decoding: header, as: UTF8.self))
        #expect {
            try Store(directory: folder.state)
        } throws: { error in
            guard case .invalidStateDirectory(let message) = error as? StorageError else { return false }
            return message.contains("newer kvd")
        }
        #expect(folder.read("kvd.wal") == String(decoding: header, as: UTF8.self), "left untouched")
        #expect(throws: StorageError.self) { try Store(directory: folder.state) }
        do { _ = try Store(directory: folder.state) } catch {
            #expect(error != .locked("") && !"\(error)".contains("another kvd"), "the refused store released its lock")
        }
    }

    @Test func domainFileIsPrettySortedAndVersioned() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let app = domain("com.example.layout")
        let store = try Store(directory: folder.state)
        _ = try store.commit(
            app,
            .apply(
                [Change(key: key("b"), value: .integer(2)), Change(key: key("a"), value: .real(1))], ifRevision: nil))
        store.close()
        let text = try #require(folder.read("com.example.layout.json"))
        let json = try JSONParser.parse(text)
        #expect(json["format"] == .string("kvd-domain"))
        #expect(json["formatVersion"] == .integer(1))
        #expect(json["domain"] == .string("com.example.layout"))
        #expect(json["revision"] == .integer(1))
        #expect(json["values"] == .object(["a": .real(1), "b": .integer(2)]))
        #expect(json["revisions"] == .object(["a": .integer(1), "b": .integer(1)]))
        if case .string(let saved)? = json["savedAt"] {
            #expect(RFC3339.parse(saved) != nil)
        } else {
            Issue.record("no savedAt")
        }
        #expect(text == String(decoding: JSONWriter(pretty: true).bytes(json), as: UTF8.self) + "\n")
        #expect(text.contains("\n  \"domain\": "))
        #expect(folder.names() == ["com.example.layout.history", "com.example.layout.json", "kvd.lock", "kvd.wal"])
    }
}

/// Backup names are recognised by bytes now (the check runs for every submitted change).
@Suite struct BackupNameTests {
    @Test(arguments: [
        ("com.x.unreadable-20261129T181320Z.json", true),
        ("com.x.unreadable-20261129T181320Z-2.json", true),
        ("kvd.wal.unreadable-20261129T181320Z", true),
        ("a.unreadable-x.unreadable-20261129T181320Z", true),
        ("com.x.unreadable-2026112XT181320Z.json", false),
        ("com.x.unreadable-20261129T181320", false),
        ("com.x.unreadable.json", false),
        ("com.example.app.json", false),
        ("", false),
    ])
    func backupNamesAreRecognised(name: String, isBackup: Bool) {
        #expect(StorageFormat.isBackup(name) == isBackup)
    }
}
