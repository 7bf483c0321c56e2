import KVStorage
import Synchronization

/// Finished commits passed to the loop thread, in commit order: from the loop's own inline
/// commits (a lone write), or from the store's commit thread (a pass's batch of two or more
/// writes, and any batch queued while that thread was busy syncing or compacting).
final class CompletionQueue: Sendable {
    struct Item: Sendable {
        /// The client that asked for the commit, or ``external`` for a commit made elsewhere
        /// (the fleet mirror's): then only watchers hear of it.
        var connection: Int
        var oneway: Bool
        var result: Result<Commit, StorageError>
        /// Whether watchers hear of the commit from this item (not for a fleet write: the
        /// mirror's own commits already told them).
        var notify = true

        static let external = -1
    }

    private struct Items {
        var queue: [Item] = []
        /// The loop is committing on its own thread and takes every item once it is done.
        var loopCommitting = false
    }

    private let items = Mutex(Items())

    /// Any thread. Returns whether the loop needs a wake: not while it is committing itself
    /// (it takes everything right after), nor when a wake is already on its way (one per batch).
    func push(_ item: Item) -> Bool {
        items.withLock { items in
            items.queue.append(item)
            return items.queue.count == 1 && !items.loopCommitting
        }
    }

    /// Loop thread: runs `commit` (the store's inline commit) with wakes suppressed. The loop
    /// must ``takeAll()`` afterwards.
    func whileLoopCommits(_ commit: () -> Void) {
        items.withLock { $0.loopCommitting = true }
        commit()
        items.withLock { $0.loopCommitting = false }
    }

    /// Everything pushed so far, oldest first; empties the queue.
    func takeAll() -> [Item] {
        items.withLock { items in
            defer { items.queue.removeAll(keepingCapacity: true) }
            return items.queue
        }
    }
}
