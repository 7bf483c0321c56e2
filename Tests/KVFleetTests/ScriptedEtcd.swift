import KVFleet
import Synchronization

/// A fake etcd for the reflector's tests: a real keyspace with history (puts and deletes at
/// revisions, a compaction point), range reads that behave like etcd's (pinned revisions,
/// "compacted", pages, a header with the newest revision), and watches that follow a script.
///
/// Each `watch` call takes the next script; with none left it calls `whenExhausted` (the tests
/// stop the reflector there) and fails as unreachable. `beforeRange` runs before each range
/// call is served, with the call's index, so a test can write or compact between pages.
final class ScriptedEtcd: EtcdAPI, @unchecked Sendable {
    enum Step: Sendable {
        /// Every event in the history from the watch's start revision, in one message
        /// (several revisions, as etcd batches them); "compacted" when the start is compacted.
        case history
        /// This message as it stands.
        case send(EtcdWatchMessage)
        /// Changes the keyspace (a write while watching).
        case run(@Sendable (ScriptedEtcd) -> Void)
        /// The stream breaks with this error.
        case fail(EtcdError)
        /// Progress notifications until the receiver stops the watch.
        case progressForever(revision: Int64)
    }

    struct RangeCall: Sendable, Equatable {
        var from: [UInt8]
        var revision: Int64?
        var limit: Int
    }

    private struct State: Sendable {
        var history: [EtcdEvent] = []
        var revision: Int64 = 1
        var compacted: Int64 = 0
        var scripts: [[Step]] = []
        var rangeCalls: [RangeCall] = []
        var watchStarts: [Int64] = []
        var beforeRange: (@Sendable (Int, ScriptedEtcd) -> Void)? = nil
        var whenExhausted: (@Sendable () -> Void)? = nil
    }

    private let state = Mutex(State())

    var rangeCalls: [RangeCall] { state.withLock { $0.rangeCalls } }
    var watchStarts: [Int64] { state.withLock { $0.watchStarts } }
    var revision: Int64 { state.withLock { $0.revision } }

    func script(_ steps: [Step]...) { state.withLock { $0.scripts += steps } }
    func beforeRange(_ hook: @escaping @Sendable (Int, ScriptedEtcd) -> Void) {
        state.withLock { $0.beforeRange = hook }
    }
    func whenExhausted(_ hook: @escaping @Sendable () -> Void) { state.withLock { $0.whenExhausted = hook } }

    /// Puts and deletes in one new revision (a transaction); returns the revision.
    @discardableResult
    func write(put: [(String, String)] = [], delete: [String] = []) -> Int64 {
        state.withLock { state in
            state.revision += 1
            for (key, value) in put {
                state.history.append(
                    EtcdEvent(
                        kind: .put,
                        keyValue: EtcdKeyValue(
                            key: Array(key.utf8), value: Array(value.utf8), modRevision: state.revision)))
            }
            for key in delete {
                state.history.append(
                    EtcdEvent(
                        kind: .delete,
                        keyValue: EtcdKeyValue(key: Array(key.utf8), value: [], modRevision: state.revision)))
            }
            return state.revision
        }
    }

    @discardableResult
    func put(_ key: String, _ value: String) -> Int64 { write(put: [(key, value)]) }

    func compact() { state.withLock { $0.compacted = $0.revision } }

    /// The events of revisions after `revision`.
    func events(after revision: Int64) -> [EtcdEvent] {
        state.withLock { $0.history.filter { $0.keyValue.modRevision > revision } }
    }

    func range(from key: [UInt8], end: [UInt8], revision: Int64?, limit: Int) throws(EtcdError) -> EtcdRangePage {
        let (index, hook) = state.withLock { state in
            state.rangeCalls.append(RangeCall(from: key, revision: revision, limit: limit))
            return (state.rangeCalls.count - 1, state.beforeRange)
        }
        hook?(index, self)
        return try state.withLock { state throws(EtcdError) in
            let at = revision ?? state.revision
            if at < state.compacted { throw .compacted(state.compacted) }
            var keys: [[UInt8]: EtcdKeyValue] = [:]
            for event in state.history where event.keyValue.modRevision <= at {
                keys[event.keyValue.key] = event.kind == .put ? event.keyValue : nil
            }
            let inRange = keys.values.filter {
                !$0.key.lexicographicallyPrecedes(key) && $0.key.lexicographicallyPrecedes(end)
            }
            .sorted { $0.key.lexicographicallyPrecedes($1.key) }
            let page = limit > 0 ? Array(inRange.prefix(limit)) : inRange
            return EtcdRangePage(keyValues: page, more: page.count < inRange.count, revision: state.revision)
        }
    }

    func commit(_ transaction: EtcdTransaction) throws(EtcdError) -> (succeeded: Bool, revision: Int64) {
        throw .protocolError("the scripted etcd takes no transactions")
    }

    func watch(
        from key: [UInt8], end: [UInt8], startRevision: Int64, progressInterval: Duration,
        receive: (EtcdWatchMessage) -> Bool
    ) throws(EtcdError) {
        let steps: [Step]? = state.withLock { state in
            state.watchStarts.append(startRevision)
            return state.scripts.isEmpty ? nil : state.scripts.removeFirst()
        }
        guard let steps else {
            state.withLock { $0.whenExhausted }?()
            throw .unreachable("the script is exhausted")
        }
        for step in steps {
            switch step {
            case .history:
                let (compacted, now) = state.withLock { ($0.compacted, $0.revision) }
                if startRevision < compacted { throw .compacted(compacted) }
                let replay = events(after: startRevision - 1)
                if !replay.isEmpty, !receive(.events(replay, headerRevision: now)) { return }
            case .send(let message):
                if !receive(message) { return }
            case .run(let change):
                change(self)
            case .fail(let error):
                throw error
            case .progressForever(let revision):
                while receive(.progress(revision: revision)) {}
                return
            }
        }
        throw .unreachable("the script of this watch ended")
    }
}
