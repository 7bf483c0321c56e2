import KVProtocol
import KVSystem
import KVValues

/// A reference that does not keep its object alive: the watch thread holds its cache this way,
/// so that releasing the cache stops the watch.
final class Weak<Object: AnyObject & Sendable>: Sendable {
    nonisolated(unsafe) private(set) weak var object: Object?

    init(_ object: Object) { self.object = object }
}

extension DomainCache {
    /// The watch thread: watches `domain` into `cache` through `stream` until the stream is
    /// stopped (the cache was released). Holds the cache only while it hands it an event.
    ///
    /// The first reply of each watch is a snapshot, reconciled with what is cached. A watch that
    /// merely ends (kvd restarting, exiting when idle) is not worth a report; the first failure
    /// to reach kvd after the watch last worked is (``noteOutage(_:)``).
    static func watch(
        _ domain: Domain, into cache: Weak<DomainCache>, connect: () throws(ClientError) -> Connection,
        stream: ReconnectingStream
    ) {
        stream.run(
            { () -> ReconnectingStream.Outcome in
                defer { cache.object?.firstAttempt.open() }
                do throws(ClientError) {
                    let connection = try connect()
                    defer { connection.close() }
                    guard stream.interrupting(with: { connection.interrupt() }) else { return .finished }
                    try connection.watch(domain, nil) { event in
                        guard let cache = cache.object else { return false }
                        if event.initial { stream.working() }
                        cache.receive(event)
                        return !stream.isStopped
                    }
                    return .ended("kvd ended the watch")
                } catch .connectionClosed {
                    return .ended("\(ClientError.connectionClosed)")
                } catch {
                    return .failed("\(error)")
                }
            },
            onRetry: { interruption, _ in
                if case .outage(let reason) = interruption { cache.object?.noteOutage(reason) }
            })
    }

    /// One event of the watch: the snapshot that starts it, or a commit.
    private func receive(_ event: WatchEvent) {
        guard event.initial else {
            apply(event.changes, revision: event.revision, streamed: true, sources: event.sources)
            return
        }
        var snapshot: [String: Value] = [:]
        for change in event.changes { snapshot[change.key.name] = change.value }
        let sources = Dictionary(uniqueKeysWithValues: event.sources.map { ($0.key.name, $0.value) })
        reconcile(snapshot, revision: event.revision, streamed: true, sources: sources)
    }

    /// Reports the first failure to reach kvd of an outage (`reason`), saying what reads return
    /// meanwhile.
    private func noteOutage(_ reason: String) {
        let serving =
            phase == .loaded
            ? "serving the last known values" : "reads return registered values and defaults until it can be reached"
        reportDiagnostic(
            KVDiagnostic(
                domain: domain.name, key: nil, kind: .unavailable,
                message: "cannot reach kvd to read or watch the domain (\(reason)); \(serving), and retrying"))
    }
}
