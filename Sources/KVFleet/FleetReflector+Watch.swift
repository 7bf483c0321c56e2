import KVSystem
import KVValues

extension FleetReflector {
    /// Watches from the applied revision + 1, handing the sink one apply per etcd revision,
    /// until stopped, compacted, broken, or the sink fails.
    func watch(_ loop: inout Loop, _ report: (FleetReflectorEvent) -> Void, _ sink: (FleetUpdate) throws -> Void)
        -> Outcome
    {
        update { $0.phase = .watching }
        let (start, end) = layout.range
        var ended: Outcome? = nil
        do {
            try etcd.watch(
                from: start, end: end, startRevision: loop.applied + 1, progressInterval: options.progressInterval
            ) { message in
                if let interrupted = interruption(at: message.revision, applied: loop.applied) {
                    ended = interrupted
                    return false
                }
                switch message {
                case .progress(let revision):
                    noteSeen(revision)
                case .events(let events, let headerRevision):
                    noteSeen(headerRevision)
                    if let failure = deliver(events, &loop, report, sink) {
                        ended = .failed(failure)
                        return false
                    }
                }
                stream.working()  // etcd answers and the sink commits
                return true
            }
        } catch .compacted {
            return .relist
        } catch .clusterChanged(let was, let now) {
            return .historyReplaced("\(EtcdError.clusterChanged(was: was, now: now)): listing again", revision: 0)
        } catch {
            return .failed("the fleet watch broke: \(error)")
        }
        return ended ?? .failed("the fleet watch ended without a reason")
    }

    /// Why the watch stops before a message at `revision`: kvd stops, a listing was asked for,
    /// or etcd's revision went back below `applied` (its data wiped or restored); nil to go on.
    private func interruption(at revision: Int64, applied: Int64) -> Outcome? {
        if isStopped { return .stopped }
        if let reason = takeRelistRequest() { return .historyReplaced(reason, revision: revision) }
        guard revision < applied else { return nil }
        let reason =
            "etcd's revision went back from \(applied) to \(revision) (its data was wiped or restored from an older backup): listing again"
        return .historyReplaced(reason, revision: revision)
    }

    /// Hands the sink the events above the applied revision, one apply per revision; returns
    /// why it stopped early (the sink failed), or nil.
    private func deliver(
        _ events: [EtcdEvent], _ loop: inout Loop, _ report: (FleetReflectorEvent) -> Void,
        _ sink: (FleetUpdate) throws -> Void
    ) -> String? {
        var index = events.startIndex
        while index < events.endIndex {
            let revision = events[index].keyValue.modRevision
            var next = index
            while next < events.endIndex, events[next].keyValue.modRevision == revision { next += 1 }
            let group = events[index..<next]
            index = next
            guard revision > loop.applied else { continue }  // replayed: the mirror has it
            var problems: [([UInt8], FleetProblem?)] = []
            let changes = self.changes(group, problems: &problems)
            if !changes.isEmpty {
                do {
                    try sink(.apply(changes, revision: revision))
                } catch {
                    return "committing fleet revision \(revision) failed: \(error)"
                }
                loop.applied = revision
            }
            noteApplied(loop.applied, .update(problems))
            let leftOut = problems.compactMap(\.1)
            if !leftOut.isEmpty { report(.leftOut(leftOut)) }
        }
        return nil
    }

    /// The changes one revision's events make, at most one per value or lock (the last), in
    /// the order of the events; appends to `problems` how they change the entries left out.
    private func changes(_ events: ArraySlice<EtcdEvent>, problems: inout [([UInt8], FleetProblem?)]) -> [FleetChange] {
        var changes: [FleetChange] = []
        var positions: [FleetName: Int] = [:]
        func record(_ change: FleetChange) {
            if let position = positions[change.name] {
                changes[position] = change
            } else {
                positions[change.name] = changes.count
                changes.append(change)
            }
        }
        for event in events {
            problems.append((event.keyValue.key, nil))
            if event.kind == .delete {
                guard case .fleet(let name) = layout.name(ofEtcdKey: event.keyValue.key) else { continue }
                record(name.kind == .value ? .remove(name.domain, name.key) : .unlock(name.domain, name.key))
                continue
            }
            switch read(event.keyValue) {
            case .ignored: break
            case .value(let name, let value): record(.set(name.domain, name.key, value))
            case .lock(let name): record(.lock(name.domain, name.key))
            case .unreadable(let name, let problem):
                problems.append((event.keyValue.key, problem))
                if let name { record(.remove(name.domain, name.key)) }
            }
        }
        return changes
    }
}
