import FoundationEssentials
import Glibc
@testable import KVStorage
import KVValues
import Testing

/// History at the storage level: what is kept, across folds, restarts and damage.
@Suite struct HistoryTests {
    static let tight = StoreOptions(compactionLogBytes: 1)  // folds after every batch

    @Test func tornAppendIsCutOffAndTheLogFillsIn() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let b = domain("com.example.b")
        do {
            let store = try Store(directory: folder.state, options: Self.tight)
            _ = try store.commit(b, .set(key("one"), .integer(1), ifRevision: nil))
            store.close()
        }
        let before = try #require(folder.read("com.example.b.history"))
        do {
            let store = try Store(directory: folder.state, options: StoreOptions())
            _ = try store.commit(b, .set(key("plain"), .real(2.5), ifRevision: nil))
            store.abandon()
        }
        // As if the append of the next fold was cut short by a crash.
        folder.write("com.example.b.history", before + "0000abcd {\"revision\":2,\"ke")
        let store = try Store(directory: folder.state, options: StoreOptions())
        let page = try store.history(b)
        #expect(page.entries.map(\.revision) == [2, 1])
        store.close()
        let again = try Store(directory: folder.state, options: StoreOptions())
        #expect(try again.history(b).entries.map(\.revision) == [2, 1])
        again.close()
    }
}
