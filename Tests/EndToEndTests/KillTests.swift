import Foundation
import Glibc
import KVTestSupport
import Synchronization
import Testing

/// The real `kvd` killed with SIGKILL at random moments while several clients write: after each
/// restart, every acknowledged change must be there.
///
/// `KVD_KILL_ROUNDS` sets the number of kills (default 200, about 40 s; try 5000 for a long run).
@Suite(.serialized) struct KillTests {
    static let domains = ["kill.a", "kill.b"]
    static let keys = (0..<12).map { "k\($0)" }
    static let writers = 4

    @Test func everyAcknowledgedChangeSurvivesSIGKILL() throws {
        let rounds = Int(ProcessInfo.processInfo.environment["KVD_KILL_ROUNDS"] ?? "") ?? 200
        let sandbox = Sandbox()
        let model = KillModel()
        // The writers' changes come from this seed (their timing, and so what a kill cuts, do not).
        let seed = SeededGenerator.forTest().state
        var acknowledged = 0
        var maybeApplied = 0
        let started = Date()
        for round in 0..<rounds {
            let daemon = try Daemon(sandbox)
            try model.verify(sandbox.socket, round: round)
            let outcome = try writeUntilKilled(daemon, model: model, round: round, seed: seed)
            acknowledged += outcome.acknowledged
            maybeApplied += outcome.inFlight
        }
        let daemon = try Daemon(sandbox)
        try model.verify(sandbox.socket, round: rounds)
        #expect(daemon.stop() == 0)
        let seconds = Date().timeIntervalSince(started)
        print(
            "KillTests: kvd survived \(rounds) SIGKILLs in \(String(format: "%.1f", seconds)) s; \(acknowledged) acknowledged changes all found after restarts; \(maybeApplied) calls were in flight at a kill (each all there or not at all)"
        )
        #expect(acknowledged > rounds, "too few writes were acknowledged for the test to mean anything")
    }

    /// Each round writes a value as deep as a request takes (and one that grows when written), then
    /// small writes, and is killed at a random moment; after each restart every acknowledged write
    /// is there and revisions keep rising.
    @Test func writesAfterADeepOrGrowingWriteSurviveSIGKILL() throws {
        let sandbox = Sandbox()
        var acknowledged: [String: (value: String, revision: Int)] = [:]
        var highest = 0
        let deep = String(repeating: "[", count: 510) + "1" + String(repeating: "]", count: 510)
        let grows = "[" + Array(repeating: "1e15", count: 2000).joined(separator: ",") + "]"
        for round in 0..<20 {
            let daemon = try Daemon(sandbox)
            let client = try RawClient(sandbox.socket)
            for (key, entry) in acknowledged {
                let reply =
                    client.receiveRaw(
                        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"kill.deep","key":"\#(key)"}}"#)
                    ?? "no reply"
                #expect(
                    reply.hasPrefix(
                        #"{"parameters":{"value":\#(entry.value),"revision":\#(entry.revision),"source":"user"}"#),
                    "round \(round): \(key) lost: \(reply.prefix(120))")
            }
            let pid = daemon.process.pid
            let killer = Thread {
                usleep(UInt32.random(in: 0...30_000))
                kill(pid, SIGKILL)
            }
            killer.start()
            for index in 0... {
                let key = "r\(round)-\(index)"
                let value = index == 0 ? deep : index == 1 ? grows : #""small \#(index)""#
                guard
                    let reply = client.receiveRaw(
                        #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"kill.deep","key":"\#(key)","value":\#(value)}}"#
                    ),
                    let range = reply.range(of: #"{"parameters":{"revision":"#)
                else { break }
                let revision = Int(reply[range.upperBound...].prefix { $0.isNumber })!
                #expect(revision > highest, "round \(round): revision \(revision) after \(highest)")
                highest = max(highest, revision)
                let written =
                    index == 1
                    ? "[" + Array(repeating: "1000000000000000.0", count: 2000).joined(separator: ",") + "]" : value
                acknowledged[key] = (written, revision)
            }
            client.close()
            daemon.waitForExit(timeout: 10)
        }
        #expect(acknowledged.count > 20, "too few writes were acknowledged for the test to mean anything")
    }

    /// Runs the writers against `daemon` and kills it after a random 0-60 ms; returns when every
    /// writer has seen its connection drop.
    private func writeUntilKilled(_ daemon: Daemon, model: KillModel, round: Int, seed: UInt64) throws -> (
        acknowledged: Int, inFlight: Int
    ) {
        let done = DispatchGroup()
        let counts = Mutex((acknowledged: 0, inFlight: 0, failure: String?.none))
        for writer in 0..<Self.writers {
            done.enter()
            let socket = daemon.sandbox.socket
            Thread {
                defer { done.leave() }
                var generator = SeededGenerator(seed: seed &+ UInt64(round * Self.writers + writer))
                let result = KillWriter(id: writer, round: round, model: model).run(socket, &generator)
                counts.withLock {
                    $0.acknowledged += result.acknowledged
                    $0.inFlight += result.inFlight ? 1 : 0
                    if let failure = result.failure { $0.failure = $0.failure ?? failure }
                }
            }.start()
        }
        usleep(UInt32.random(in: 0...60_000))
        daemon.stop(SIGKILL)
        guard done.wait(timeout: .now() + 30) == .success else {
            throw TestFailure("writers did not stop after the kill")
        }
        let result = counts.withLock { $0 }
        if let failure = result.failure { throw TestFailure("round \(round): \(failure)") }
        return (result.acknowledged, result.inFlight)
    }
}

/// One change a writer asked for: the keys it sets (to unique values) and removes.
struct KillChange: Sendable {
    var domain: String
    var sets: [String: String]
    var removals: [String]
    var isApply: Bool
}

/// What the test knows: per key, the latest acknowledged value (by revision); the changes in
/// flight at the last kill, which may or may not have committed.
final class KillModel: Sendable {
    struct Entry: Sendable {
        var revision: Int64
        var value: String?
    }

    private struct State: Sendable {
        var entries: [String: Entry] = [:]
        var inFlight: [KillChange] = []
        /// Every revision acknowledged before the current daemon started is below this one.
        var floor: Int64 = 0
        var highest: Int64 = 0
    }

    private let state = Mutex(State())

    static func id(_ domain: String, _ key: String) -> String { domain + "/" + key }

    /// Records an acknowledged change at `revision`; returns a complaint if the revision did not
    /// rise above everything acknowledged before the last restart.
    func acknowledge(_ change: KillChange, revision: Int64) -> String? {
        state.withLock { state in
            guard revision > state.floor else {
                return
                    "revision \(revision) acknowledged after a restart is not above \(state.floor), acknowledged before it"
            }
            state.highest = max(state.highest, revision)
            func record(_ key: String, _ value: String?) {
                let id = Self.id(change.domain, key)
                if revision > state.entries[id]?.revision ?? 0 {
                    state.entries[id] = Entry(revision: revision, value: value)
                }
            }
            for (key, value) in change.sets { record(key, value) }
            for key in change.removals { record(key, nil) }
            return nil
        }
    }

    func lost(_ change: KillChange) {
        state.withLock { $0.inFlight.append(change) }
    }

    /// Reads every key from the restarted daemon and checks it against the model; then takes
    /// what it saw of the in-flight changes as the new truth.
    func verify(_ socket: String, round: Int) throws {
        let client = try RawClient(socket)
        defer { client.close() }
        var observed: [String: Entry?] = [:]
        var batch: [UInt8] = []
        for domain in KillTests.domains {
            for key in KillTests.keys {
                batch +=
                    Array(
                        #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(domain)","key":"\#(key)"}}"#.utf8)
                    + [0]
            }
        }
        client.send(batch)
        for domain in KillTests.domains {
            for key in KillTests.keys {
                guard let text = client.receive(),
                    let reply = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                else {
                    throw TestFailure("round \(round): no reply to Get \(domain) \(key)")
                }
                let parameters = reply["parameters"] as? [String: Any] ?? [:]
                if let error = reply["error"] as? String {
                    guard error == "io.kvd.Defaults.NotFound" else {
                        throw TestFailure("round \(round): Get \(domain) \(key): \(text)")
                    }
                    observed[KillModel.id(domain, key)] = .some(nil)
                } else {
                    let revision = Int64(parameters["revision"] as? Int ?? -1)
                    observed[KillModel.id(domain, key)] = Entry(
                        revision: revision, value: parameters["value"] as? String)
                }
            }
        }
        try state.withLock { state throws(TestFailure) in try Self.check(&state, observed, round: round) }
    }

    private static func check(_ state: inout State, _ observed: [String: Entry?], round: Int) throws(TestFailure) {
        for (id, seen) in observed {
            let expected = state.entries[id]
            let seenValue = seen.flatMap { $0 }?.value
            if seenValue == expected?.value {
                if let seen = seen.flatMap({ $0 }), let expected, seen.revision != expected.revision {
                    throw TestFailure(
                        "round \(round): \(id) holds its acknowledged value at revision \(seen.revision), acknowledged at \(expected.revision)"
                    )
                }
                continue
            }
            // Not the acknowledged value: only a change in flight at the kill may explain it.
            let explained = state.inFlight.contains { change in
                let key = String(id.dropFirst(change.domain.count + 1))
                guard id.hasPrefix(change.domain + "/") else { return false }
                return seenValue == nil ? change.removals.contains(key) : change.sets[key] == seenValue
            }
            guard explained else {
                throw TestFailure(
                    "round \(round): acknowledged change lost: \(id) should be \(expected?.value.map { "\($0.prefix(40))" } ?? "absent") (revision \(expected?.revision ?? 0)), is \(seenValue.map { "\($0.prefix(40))" } ?? "absent")"
                )
            }
            let revision = seen.flatMap { $0 }?.revision ?? expected?.revision ?? 0
            state.entries[id] = Entry(revision: revision, value: seenValue)
        }
        // An Apply in flight: all of its keys, or none. Where some key shows its value, that key's
        // revision is the Apply's; every other key must hold a change made after it.
        for change in state.inFlight where change.isApply {
            let seen = { (key: String) in observed[KillModel.id(change.domain, key)] ?? nil }
            guard
                let revision = change.sets.compactMap({ key, value in
                    seen(key)?.value == value ? seen(key)?.revision : nil
                }).first
            else {
                continue  // not applied: nothing of it may be there, which the check above ensured
            }
            for key in change.sets.keys.sorted() + change.removals where seen(key)?.value != change.sets[key] {
                let id = KillModel.id(change.domain, key)
                let later: Bool
                if let entry = seen(key) {
                    later = entry.revision > revision
                } else {  // removed: by this Apply, or by a later delete
                    later =
                        change.removals.contains(key)
                        || (state.entries[id]?.value == nil && state.entries[id]?.revision ?? 0 > revision)
                        || state.inFlight.contains { $0.domain == change.domain && $0.removals.contains(key) }
                }
                if !later {
                    throw TestFailure(
                        "round \(round): an Apply in flight at the kill (revision \(revision)) is half there: \(id) is \(seen(key).map { "\($0.value?.prefix(30) ?? "") at revision \($0.revision)" } ?? "absent")"
                    )
                }
            }
        }
        state.inFlight = []
        state.floor = state.highest
        for entry in state.entries.values { state.floor = max(state.floor, entry.revision) }
    }
}

/// One client connection issuing sets, deletes and multi-key Applys, one call at a time, until
/// the daemon dies.
struct KillWriter {
    let id: Int
    let round: Int
    let model: KillModel

    func run(_ socket: String, _ generator: inout SeededGenerator) -> (
        acknowledged: Int, inFlight: Bool, failure: String?
    ) {
        guard let client = try? RawClient(socket) else { return (0, false, nil) }  // killed before we connected
        defer { client.close() }
        var acknowledged = 0
        for sequence in 0... {
            let change = makeChange(sequence, &generator)
            guard client.send(Array(message(for: change).utf8) + [0]), let text = client.receive() else {
                model.lost(change)
                return (acknowledged, true, nil)
            }
            let reply = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            // Deleting a key that is not there changes nothing.
            if reply?["error"] as? String == "io.kvd.Defaults.NotFound", !change.isApply, change.sets.isEmpty {
                continue
            }
            guard let reply, reply["error"] == nil,
                let revision = (reply["parameters"] as? [String: Any])?["revision"] as? Int
            else { return (acknowledged, false, "writer \(id) got \(text.prefix(200))") }
            if let complaint = model.acknowledge(change, revision: Int64(revision)) {
                return (acknowledged, false, complaint)
            }
            acknowledged += 1
        }
        return (acknowledged, false, nil)
    }

    private func makeChange(_ sequence: Int, _ generator: inout SeededGenerator) -> KillChange {
        let domain = KillTests.domains.randomElement(using: &generator)!
        // Now and then a large value, so the log passes its compaction threshold now and then.
        let padding =
            Int.random(in: 0..<20, using: &generator) == 0
            ? String(repeating: "x", count: Int.random(in: 1000...60_000, using: &generator)) : ""
        let value = { (key: String) in "w\(id)r\(round)s\(sequence)\(key)\(padding)" }
        switch Int.random(in: 0..<10, using: &generator) {
        case 0..<5:
            let key = KillTests.keys.randomElement(using: &generator)!
            return KillChange(domain: domain, sets: [key: value(key)], removals: [], isApply: false)
        case 5..<7:
            return KillChange(
                domain: domain, sets: [:], removals: [KillTests.keys.randomElement(using: &generator)!], isApply: false)
        default:
            var change = KillChange(domain: domain, sets: [:], removals: [], isApply: true)
            for key in KillTests.keys.shuffled(using: &generator).prefix(Int.random(in: 2...5, using: &generator)) {
                if change.sets.count >= 2, Bool.random(using: &generator) {
                    change.removals.append(key)
                } else {
                    change.sets[key] = value(key)
                }
            }
            return change
        }
    }

    private func message(for change: KillChange) -> String {
        func quoted(_ text: String) -> String { "\"\(text)\"" }
        if change.isApply {
            let changes =
                change.sets.map { #"{"key":\#(quoted($0.key)),"value":\#(quoted($0.value))}"# }
                + change.removals.map { #"{"key":\#(quoted($0))}"# }
            return
                #"{"method":"io.kvd.Defaults.Apply","parameters":{"domain":\#(quoted(change.domain)),"changes":[\#(changes.joined(separator: ","))]}}"#
        }
        if let (key, value) = change.sets.first {
            return
                #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":\#(quoted(change.domain)),"key":\#(quoted(key)),"value":\#(quoted(value))}}"#
        }
        return
            #"{"method":"io.kvd.Defaults.Delete","parameters":{"domain":\#(quoted(change.domain)),"key":\#(quoted(change.removals[0]))}}"#
    }
}
