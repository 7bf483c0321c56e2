import Glibc
import KVSystem
import KVValues
import Synchronization
import Testing

@testable import KVStorage

/// Fails each file-system call of a session in turn (with `EIO`) and checks that reopening
/// the folder gives exactly the acknowledged commits: nothing acknowledged is lost, nothing
/// that failed appears.
@Suite struct FaultInjectionTests {
    let app = domain("com.example.faults")
    let other = domain("com.example.other")

    /// Runs the session; returns the expected contents of the two domains from the commits that
    /// succeeded, or nil if the store could not even open.
    func session(_ folder: TemporaryFolder, _ fileSystem: RecordingFileSystem) -> [Domain: [Key: Value]]? {
        guard
            let store = try? Store(
                directory: folder.state, options: StoreOptions(compactionLogBytes: 400, logReservationBytes: 64),
                fileSystem: fileSystem)
        else {
            return nil
        }
        var model: [Domain: [Key: Value]] = [:]
        let steps: [(Domain, Mutation)] = [
            (app, .set(key("a"), .integer(1), ifRevision: nil)),
            (
                other,
                .apply(
                    [Change(key: key("x"), value: .string("x")), Change(key: key("y"), value: .bool(true))],
                    ifRevision: nil)
            ),
            (app, .set(key("b"), .real(2.5), ifRevision: nil)),
            (app, .set(key("a"), .integer(3), ifRevision: nil)),
            (other, .deleteDomain),
            (
                app,
                .apply(
                    [Change(key: key("c"), value: .string("long value to pass the compaction threshold soon"))],
                    ifRevision: nil)
            ),
            (app, .delete(key("b"))),
            (other, .set(key("z"), .integer(26), ifRevision: nil)),
        ]
        for (domain, mutation) in steps {
            guard let commit = try? store.commit(domain, mutation) else { continue }
            for change in commit.changes { model[domain, default: [:]][change.key] = change.value }
        }
        store.close()
        return model.filter { !$0.value.isEmpty }
    }

    @Test func everyFailedCallLosesNoAcknowledgedCommitAndAddsNoFailedOne() throws {
        let calls: Int
        do {
            let folder = TemporaryFolder()
            defer { folder.remove() }
            let fileSystem = RecordingFileSystem()
            _ = session(folder, fileSystem)
            calls = fileSystem.callCount
        }
        #expect(calls > 30)
        for index in 0..<calls {
            let folder = TemporaryFolder()
            defer { folder.remove() }
            let fileSystem = RecordingFileSystem()
            fileSystem.failCall(index)
            guard let expected = session(folder, fileSystem) else { continue }
            let store = try Store(directory: folder.state)
            defer { store.close() }
            var found: [Domain: [Key: Value]] = [:]
            for domain in store.domains() { found[domain] = store.list(domain)?.values }
            #expect(found == expected, "failing call \(index) (\(fileSystem.counts.withLock { $0.calls[index] }))")
        }
    }
}
