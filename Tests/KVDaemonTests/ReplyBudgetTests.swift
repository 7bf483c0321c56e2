import KVProtocol
import KVStorage
import KVValues
import Testing
@testable import KVDaemon

/// Issue 17, item 2: the budget the store keeps per domain matches the replies kvd really
/// sends. A domain filled to exactly ``Limits/domainBytes`` gives a `List` and a first `Watch`
/// reply that a client reads; one byte more is refused.
@Suite struct ReplyBudgetTests {
    @Test func domainFilledToItsBudgetIsListedAndWatchedInOneReplyEach() throws {
        let temp = try RequestHandlerTests.TempStore()
        let handler = RequestHandler(store: temp.store)
        let domain = try Domain(validating: "d")
        // Many small keys (the per-key overhead is what a budget can get wrong), some needing escapes.
        let small = (0..<20_000).map { Change(key: try! Key(validating: "k\($0)\($0 % 7 == 0 ? "\"\n" : "")"), value: .integer(Int64($0) * -1_000_003)) }
        _ = try temp.store.commit(domain, .apply(small, ifRevision: nil))
        let used = try #require(temp.store.list(domain)).budgetBytes
        let key = try Key(validating: "big")
        let fill = Limits.domainBytes - used - DomainBudget.cost(entryBytes: #""big""#.utf8.count + 2)
        _ = try temp.store.commit(domain, .set(key, .string(String(repeating: "x", count: fill)), ifRevision: nil))
        #expect(temp.store.list(domain)?.budgetBytes == Limits.domainBytes)
        #expect(throws: StorageError.self) {
            try temp.store.commit(domain, .set(key, .string(String(repeating: "x", count: fill + 1)), ifRevision: nil))
        }
        guard case .reply(let list) = handler.handle(.list(domain)) else { Issue.record("List must be answered"); return }
        let watch = handler.initialWatchReply(domain, nil, revision: .max)
        for reply in [list, watch] {
            let bytes = reply.encoded().dropLast()
            #expect(bytes.count <= Limits.messageBytes, "\(bytes.count) bytes")
            let read = try VarlinkReply(message: bytes)
            #expect(read.error == nil)
        }
        #expect(watch.encoded().count > Limits.messageBytes - Limits.replyOverhead, "the watch reply is what the budget counts")
    }

    @Test func tooLargeIsTheContractsError() {
        #expect(
            RequestHandler.reply(to: .tooLarge(limit: Limits.messageBytes, reason: "x")) == .failure("io.kvd.Defaults.TooLarge", ["limit": .integer(Int64(Limits.messageBytes))]))
        #expect(RequestHandler.reply(to: .invalidValue("nesting")).error == "io.kvd.Defaults.InvalidValue")
    }
}
