import KVConnection
import KVProtocol
import KVSystem
import KVValues

/// `kvctl watch`: prints the current values, then one line per change, until interrupted.
///
/// When the connection is lost (kvd restarted, or was stopped and is started again), it
/// reconnects (a `ReconnectingStream`), with a backoff of 50 ms doubling to 1 s, and compares the new watch's current
/// values with the last ones it printed: every key that changed meanwhile gets one line with its
/// current value (or `removed`), at the new watch's revision, so no change is missed; only
/// intermediate values of a key that changed several times while disconnected are not seen.
///
/// Events are ordered by revision, then by system revision (a change of the system layer
/// keeps the user's revision and raises `systemRevision`), so the system administrator's
/// changes are printed too, each value with its source when it is not the user's own.
struct WatchCommand {
    let domain: Domain
    let key: Key?
    let json: Bool
    let console: any Console
    let connect: () throws(ClientError) -> Connection

    /// The values as last printed, and the revisions of the last event.
    private final class Seen {
        var values: [Key: Value] = [:]
        var sources: [Key: ValueSource] = [:]
        var revision: Int64 = 0
        var systemRevision: Int64?
        var started = false

        func note(_ event: WatchEvent) {
            if event.isAfter(revision: revision, systemRevision: systemRevision) {
                (revision, systemRevision) = (event.revision, event.systemRevision)
            }
        }
    }

    func run() throws(ClientError) {
        let seen = Seen()
        let stream = ReconnectingStream(backoff: .init(initial: .milliseconds(50), maximum: .seconds(1)))
        try stream.run(
            { () throws(ClientError) -> ReconnectingStream.Outcome in
                do throws(ClientError) {
                    let connection = try connect()
                    try connection.watch(domain, key) { event in
                        handle(event, seen)
                        stream.working()
                        return true
                    }
                    return .finished
                } catch  where Self.isConnectionLoss(error) && (seen.started || error == .connectionClosed) {
                    return .failed("\(error)")
                }
            },
            onRetry: { interruption, _ in
                // Once per loss: when a stream that printed ends, or (nothing printed yet) at the first failure.
                switch interruption {
                case .lost,
                    .outage where !seen.started:
                    console.err("kvctl: lost the connection to kvd (\(interruption.reason)); reconnecting\n")
                default: break
                }
            })
    }

    private func handle(_ event: WatchEvent, _ seen: Seen) {
        if event.initial && seen.started {
            let changes = differences(from: seen.values, seen.sources, to: event)
            apply(event, to: seen)
            seen.note(event)
            print(
                WatchEvent(
                    revision: event.revision, changes: changes, initial: false, sources: event.sources,
                    systemRevision: event.systemRevision))
            return
        }
        guard event.initial || event.isAfter(revision: seen.revision, systemRevision: seen.systemRevision) else {
            return
        }
        seen.started = true
        apply(event, to: seen)
        seen.note(event)
        print(event)
    }

    private func print(_ event: WatchEvent) {
        for line in Format.watchLines(event, json: json) { console.out(line + "\n") }
    }

    private func apply(_ event: WatchEvent, to seen: Seen) {
        if event.initial { (seen.values, seen.sources) = ([:], [:]) }
        for change in event.changes {
            seen.values[change.key] = change.value
            seen.sources[change.key] = event.sources[change.key]
        }
    }

    /// What differs (a value, or where it comes from) between the values printed before and a
    /// new watch's current values.
    func differences(from old: [Key: Value], _ oldSources: [Key: ValueSource], to current: WatchEvent) -> [Change] {
        var now: [Key: Value] = [:]
        for change in current.changes { now[change.key] = change.value }
        var changes = now.filter { old[$0.key] != $0.value || oldSources[$0.key] != current.sources[$0.key] }.map {
            Change(key: $0.key, value: $0.value)
        }
        changes += old.keys.filter { now[$0] == nil }.map { Change(key: $0, value: nil) }
        return changes
    }

    /// Whether `error` means kvd went away (worth reconnecting), not that the request is wrong.
    static func isConnectionLoss(_ error: ClientError) -> Bool {
        switch error {
        case .cannotConnect, .cannotStart: true
        default: error.isConnectionLost
        }
    }
}
