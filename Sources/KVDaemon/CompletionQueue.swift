import KVStorage
import Synchronization

/// Finished commits passed from the store's commit thread to the loop thread, in commit order.
final class CompletionQueue: Sendable {
    struct Item: Sendable {
        var connection: Int
        var oneway: Bool
        var result: Result<Commit, StorageError>
    }

    private let items = Mutex<[Item]>([])

    /// Any thread.
    func push(_ item: Item) {
        items.withLock { $0.append(item) }
    }

    /// Everything pushed so far, oldest first; empties the queue.
    func takeAll() -> [Item] {
        items.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
    }
}
