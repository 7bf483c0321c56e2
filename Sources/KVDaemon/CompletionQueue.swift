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

    /// Any thread. Returns whether the queue was empty, that is whether the loop needs a wake:
    /// otherwise a wake is already on its way, and one per batch is enough.
    func push(_ item: Item) -> Bool {
        items.withLock { queue in
            queue.append(item)
            return queue.count == 1
        }
    }

    /// Everything pushed so far, oldest first; empties the queue.
    func takeAll() -> [Item] {
        items.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
    }
}
