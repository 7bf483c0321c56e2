import Dispatch
import FoundationEssentials
import Glibc
import KVValues
import Synchronization
import Testing

@testable import KVStorage

struct StoreOpenTimeout: Error, CustomStringConvertible {
    var description: String { "opening the store did not finish within 10 s" }
}

/// Odd entries in the state folder, and long domain names.
@Suite struct StateFolderEntryTests {
    /// Opens a store on another thread and gives up after 10 s (so a FIFO in the folder that hangs
    /// it fails the test).
    static func open(_ folder: TemporaryFolder, logs: LogCollector, options: StoreOptions = .init()) throws -> Store {
        let outcome = Mutex<Result<Store, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(StorageError) in
                try Store(directory: folder.state, options: options, log: logs.callback)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { throw StoreOpenTimeout() }
        return try outcome.withLock { $0! }.get()
    }

    /// Starts a folder with one good domain.
    static func folderWithAGoodDomain() throws -> TemporaryFolder {
        let folder = TemporaryFolder()
        let store = try Store(directory: folder.state)
        _ = try store.commit(domain("good"), .set(key("k"), .string("fine"), ifRevision: nil))
        store.close()
        return folder
    }

    static func expectGoodDomainServed(_ store: Store) {
        #expect(store.get(domain("good"), key("k")) == .value(.string("fine"), revision: 1))
    }

    @Test(arguments: ["directory", "fifo", "socket", "symlink to a file", "symlink to /dev/zero"])
    func oddEntryNamedLikeADomainFileIsSetAsideAndOthersServed(kind: String) throws {
        let folder = try Self.folderWithAGoodDomain()
        defer { folder.remove() }
        let path = folder.file("x.json")
        switch kind {
        case "directory": mkdir(path, 0o700)
        case "fifo": mkfifo(path, 0o600)
        case "socket":
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            Glibc.close(descriptor)
        case "symlink to a file":
            folder.write("target", #"{"k": "read through a link"}"#)
            symlink(folder.file("target"), path)
        default: symlink("/dev/zero", path)
        }
        defer {
            for name in folder.names() where name.hasPrefix("x.") {
                rmdir(folder.file(name))
                unlink(folder.file(name))
            }
        }
        let logs = LogCollector()
        let store = try Self.open(folder, logs: logs)
        defer { store.close() }
        Self.expectGoodDomainServed(store)
        #expect(store.list(domain("x")) == nil, "a \(kind) is not read as a domain file")
        #expect(
            logs.messages(at: .error).contains { $0.contains("x.json") && $0.contains("not a regular file") },
            "\(logs.lines.withLock { $0 })")
        // The domain can be written and compacted: its file name is free.
        _ = try store.commit(domain("x"), .set(key("k"), .integer(1), ifRevision: nil))
        store.close()
        let reopened = try Store(directory: folder.state)
        defer { reopened.close() }
        #expect(reopened.get(domain("x"), key("k")) == .value(.integer(1), revision: 2))
        #expect(
            folder.names().contains { $0.hasPrefix("x.unreadable-") }, "the odd entry is kept aside: \(folder.names())")
    }

    /// A file over the size limit is not read at all; it is renamed aside, not copied.
    @Test func domainFileOverTheSizeLimitIsSetAsideUnread() throws {
        let folder = try Self.folderWithAGoodDomain()
        defer { folder.remove() }
        let descriptor = Glibc.open(folder.file("huge.json"), O_WRONLY | O_CREAT, 0o600)
        ftruncate(descriptor, off_t(StorageFormat.maxDomainFileBytes + 1))  // sparse: costs no disk
        Glibc.close(descriptor)
        let logs = LogCollector()
        let store = try Self.open(folder, logs: logs)
        defer { store.close() }
        Self.expectGoodDomainServed(store)
        #expect(!folder.names().contains("huge.json"))
        #expect(folder.names().contains { $0.hasPrefix("huge.unreadable-") })
        #expect(
            logs.messages(at: .error).contains {
                $0.contains("huge.json") && $0.contains("\(StorageFormat.maxDomainFileBytes)")
            })
    }

    /// `kvd.wal` that is a directory (or a FIFO) holds no log of kvd's: it is moved aside and a
    /// new log is started.
    @Test(arguments: ["directory", "fifo"])
    func logThatIsNotARegularFileIsMovedAside(kind: String) throws {
        let folder = try Self.folderWithAGoodDomain()
        defer { folder.remove() }
        unlink(folder.file("kvd.wal"))
        if kind == "directory" { mkdir(folder.file("kvd.wal"), 0o700) } else { mkfifo(folder.file("kvd.wal"), 0o600) }
        defer { for name in folder.names() where name.hasPrefix("kvd.wal.") { rmdir(folder.file(name)) } }
        let logs = LogCollector()
        let store = try Self.open(folder, logs: logs)
        defer { store.close() }
        Self.expectGoodDomainServed(store)
        #expect(try store.commit(domain("good"), .set(key("k2"), .integer(2), ifRevision: nil)).revision == 2)
        #expect(folder.names().contains { $0.hasPrefix("kvd.wal.unreadable-") })
        #expect(logs.messages(at: .error).contains { $0.contains("kvd.wal") && $0.contains("not a regular file") })
    }

    /// A symbolic link at `kvd.wal` may point to the log holding acknowledged writes: kvd does
    /// not follow it, and does not start without it either; it says what to do.
    @Test func logThatIsASymbolicLinkIsRefusedWithAClearMessage() throws {
        let folder = try Self.folderWithAGoodDomain()
        defer { folder.remove() }
        rename(folder.file("kvd.wal"), folder.path + "/moved.wal")
        symlink(folder.path + "/moved.wal", folder.file("kvd.wal"))
        defer { unlink(folder.path + "/moved.wal") }
        #expect {
            try Self.open(folder, logs: LogCollector())
        } throws: { error in
            guard case .invalidStateDirectory(let message) = error as? StorageError else { return false }
            return message.contains("symbolic link") && message.contains("kvd.wal")
        }
    }

    /// Every name the contract accepts (1–255 bytes) can be stored, compacted, backed up and
    /// loaded again.
    @Test(arguments: [200, 223, 246, 250, 255])
    func longDomainNameIsStoredCompactedAndBackedUp(length: Int) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let long = domain("a" + String(repeating: "b", count: length - 1))
        let tight = StoreOptions(compactionLogBytes: 1)  // compacts after every batch
        do {
            let logs = LogCollector()
            let store = try Self.open(folder, logs: logs, options: tight)
            _ = try store.commit(long, .set(key("k"), .string(String(repeating: "v", count: 1000)), ifRevision: nil))
            _ = try store.commit(domain("short"), .set(key("k"), .integer(1), ifRevision: nil))
            store.close()
            #expect(logs.messages(at: .error).isEmpty, "\(logs.messages(at: .error))")
        }
        let files = folder.names().filter { !["kvd.lock", "kvd.wal", "short.json", "short.history"].contains($0) }
        #expect(
            files.count == 2 && files.filter { $0.hasSuffix(".json") }.count == 1,
            "one file and one history file for the long domain: \(files)")
        #expect(files.allSatisfy { $0.utf8.count <= 255 })
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(long, key("k")) == .value(.string(String(repeating: "v", count: 1000)), revision: 1))
            #expect(store.domains() == [long, domain("short")].sorted())
            store.close()
        }
        let file = try #require(files.first)
        folder.write(file, "{broken")
        let logs = LogCollector()
        let store = try Self.open(folder, logs: logs)
        defer { store.close() }
        #expect(store.get(domain("short"), key("k")) == .value(.integer(1), revision: 2))
        _ = try? store.history(long)  // a history file is read (and set aside if need be) when first needed
        #expect(folder.names().filter { $0.contains(".unreadable-") }.count == 1, "\(folder.names())")
        #expect(folder.names().allSatisfy { $0.utf8.count <= 255 })
        #expect(logs.messages(at: .error).contains { $0.contains("unreadable") })
    }

    /// A `DOMAIN.json` of a long name (an older kvd wrote those up to 245 bytes) is read, and
    /// replaced by the domain's own file at the next compaction; with both present (a crash
    /// between writing one and removing the other), the newer is read.
    @Test func longNameFileOfAnOlderKvdIsReadAndRenamed() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let name = String(repeating: "l", count: 230)
        func envelope(_ revision: Int, _ value: String) -> String {
            #"{"format": "kvd-domain", "formatVersion": 1, "domain": "\#(name)", "revision": \#(revision), "values": {"k": "\#(value)"}}"#
        }
        folder.write(name + ".json", envelope(3, "old"))
        do {
            let store = try Store(directory: folder.state)
            #expect(store.get(domain(name), key("k")) == .value(.string("old"), revision: 3))
            store.close()
        }
        let own = StorageFormat.fileName(for: domain(name))
        #expect(own.contains("~") && own.utf8.count <= 205)
        let history = HistoryFormat.fileName(for: domain(name))
        #expect(history == own.dropLast(".json".count) + ".history")
        #expect(
            folder.names() == [own, "kvd.lock", "kvd.wal"].sorted(), "no history file is written until one is needed")
        folder.write(name + ".json", envelope(2, "older"))  // as if a crash left it behind
        let logs = LogCollector()
        let store = try Store(directory: folder.state, log: logs.callback)
        defer { store.close() }
        #expect(store.get(domain(name), key("k")) == .value(.string("old"), revision: 3))
        #expect(logs.messages(at: .warning).contains { $0.contains("two files") })
        #expect(
            try store.history(domain(name)).entries.map(\.value) == [.string("old")],
            "history begins with the value it had")
        store.close()
        #expect(folder.names() == [own, history, "kvd.lock", "kvd.wal"].sorted())
    }

    /// The name of a long domain's file is part of the on-disk format: it must never change
    /// (the hash computed independently, with Python's integers, from FNV-1a's published constants).
    @Test func longDomainFileNameIsStable() {
        #expect(
            StorageFormat.fileName(for: domain("a" + String(repeating: "b", count: 254)))
                == "a" + String(repeating: "b", count: 166) + "~52f4de1bcc5833f197db6890a7fdeda8.json")
        #expect(
            StorageFormat.fileName(for: domain(String(repeating: "c", count: 200))) == String(
                repeating: "c", count: 200) + ".json")
        #expect(StorageFormat.entry(forFileName: "a~52f4de1bcc5833f197db6890a7fdeda8.json") == .longDomainFile)
        #expect(StorageFormat.entry(forFileName: "a~52f4.json") == nil)
        #expect(
            StorageFormat.entry(forFileName: "a~52f4de1bcc5833f197db6890a7fdeda8.unreadable-20261129T181320Z.json")
                == nil)
    }
}
