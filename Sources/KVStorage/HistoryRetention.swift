import KVValues

/// What history keeps, and how a domain's state at a past revision is rebuilt from it. Pure
/// functions; thread-safe.
///
/// Retention: of each key, walking back from its newest entry, every entry while fewer than
/// `keep` are kept or the entry is at most `days` days old; so what a key keeps is always its
/// newest entries. Pruning drops the rest; states can then be rebuilt from the new `since` on:
/// the largest revision of any key's oldest kept entry (of a key that lost entries). A key that
/// would keep none (`keep` 0) keeps its newest entry if it is a value: the value it still has.
///
/// Size: whatever `keep` and `days` say, a domain's history takes at most `maxBytes` (see
/// ``maxBytes(domainBytes:)``): past it, the oldest entries are dropped first, removals and
/// deleted keys' values included, but never a key's newest entry when that is its value.
enum HistoryRetention {
    /// The most a domain's history file holds: the larger of 1 MiB and 8 times the domain
    /// (its typed JSON, ``DomainState/budgetBytes``). A fold that would take the file past it
    /// rewrites it down to ``pruneTarget(_:)``.
    static func maxBytes(domainBytes: Int) -> Int { max(1 << 20, 8 * domainBytes) }

    /// What a rewrite for size brings a file of bound `maxBytes` down to: three quarters of it,
    /// so that appends follow before the next rewrite.
    static func pruneTarget(_ maxBytes: Int) -> Int { maxBytes - maxBytes / 4 }

    /// At least the bytes `lines` history lines take, without encoding them: the log's length
    /// (`logLength`, which holds their values and keys) and 128 bytes a line for the rest.
    static func lineBytesBound(lines: Int, _ logLength: Int64) -> Int64 {
        logLength + 128 * Int64(lines)
    }

    /// Whether the lines of `entries` take at most `room` bytes (measured one by one, no copy
    /// of them all; it stops at the first line past `room`, so a fold bound to rewrite the file
    /// does not encode every new entry to learn it).
    static func lineBytes(_ entries: [HistoryEntry], fitIn room: Int64) -> Bool {
        var scratch: [UInt8] = []
        var total: Int64 = 0
        for entry in entries {
            total += Int64(lineBytes(entry, scratch: &scratch))
            if total > room { return false }
        }
        return true
    }

    /// The values of `state` as history entries of no known time (values a domain has when its
    /// history begins).
    static func baseline(_ state: DomainState?) -> [HistoryEntry] {
        guard let state else { return [] }
        var entries: [HistoryEntry] = []
        state.entries.forEachEntry { key, entry in
            guard case .value(let value) = entry.content else { return }
            entries.append(HistoryEntry(revision: entry.revision, time: nil, key: key, value: value))
        }
        return entries
    }

    /// The bytes the line of `entry` takes in a history file.
    static func lineBytes(_ entry: HistoryEntry, scratch: inout [UInt8]) -> Int {
        scratch.removeAll(keepingCapacity: true)
        HistoryFormat.append(entry, to: &scratch)
        return scratch.count
    }

    /// `entries` in revision order, with at most one entry per revision and key (the last
    /// given wins: a commit that changed a key twice leaves its final value).
    static func normalized(_ entries: [HistoryEntry]) -> [HistoryEntry] {
        if isNormalized(entries) { return entries }  // as files and the log mostly give them: one pass
        var seen: [HistoryPoint: Int] = [:]
        var result: [HistoryEntry] = []
        result.reserveCapacity(entries.count)
        for entry in entries {
            let point = HistoryPoint(revision: entry.revision, key: entry.key)
            if let index = seen[point] {
                result[index] = entry
            } else {
                seen[point] = result.count
                result.append(entry)
            }
        }
        return stableSorted(result)
    }

    /// Whether `entries` rise by revision with no key twice at one revision.
    static func isNormalized(_ entries: [some RetainedLine]) -> Bool {
        var keysAtRevision: Set<Key> = []
        var previous: Int64 = .min
        for entry in entries {
            if entry.revision < previous { return false }
            if entry.revision > previous {
                previous = entry.revision
                keysAtRevision.removeAll(keepingCapacity: true)
            }
            guard keysAtRevision.insert(entry.key).inserted else { return false }
        }
        return true
    }

    private static func stableSorted(_ entries: [HistoryEntry]) -> [HistoryEntry] {
        entries.enumerated().sorted { ($0.element.revision, $0.offset) < ($1.element.revision, $1.offset) }.map(
            \.element)
    }

    /// What pruning `entries` (normalized) keeps, and the `since` after it (at least `since`).
    /// `now` and the entries' times are milliseconds since the epoch; an entry without a time
    /// counts as old.
    /// With `maxBytes`, the oldest kept entries are then dropped until the lines of what is
    /// kept take at most that many bytes (a key's newest entry is kept if it is a value).
    static func prune(
        _ entries: [HistoryEntry], since: Int64, keep: Int, days: Int, now: Int64, maxBytes: Int = .max
    ) -> (entries: [HistoryEntry], since: Int64) {
        var scratch: [UInt8] = []
        let kept = prune(entries, since: since, keep: keep, days: days, now: now, maxBytes: maxBytes) {
            lineBytes(entries[$0], scratch: &scratch)
        }
        return (kept.indices.map { entries[$0] }, kept.since)
    }

    /// ``prune(_:since:keep:days:now:maxBytes:)`` of any lines: the indices of what it keeps,
    /// rising. `lineBytes` gives the bytes of the line at an index; it is asked only of lines
    /// the size bound measures (what is kept, and the first line that no longer fits).
    static func prune<Line: RetainedLine>(
        _ entries: [Line], since: Int64, keep: Int, days: Int, now: Int64, maxBytes: Int,
        lineBytes: (Int) -> Int
    ) -> (indices: [Int], since: Int64) {
        let cutoff = days > 0 ? now - Int64(days) * 86_400_000 : Int64.max
        var byKey: [Key: [Int]] = [:]
        for (index, entry) in entries.enumerated() { byKey[entry.key, default: []].append(index) }
        var kept = [Bool](repeating: false, count: entries.count)
        var newSince = since
        for indices in byKey.values {
            var count = 0
            for index in indices.reversed() {
                guard count < keep || (entries[index].time ?? .min) >= cutoff else { break }
                kept[index] = true
                count += 1
            }
        }
        if maxBytes < .max { bound(entries, &kept, byKey: byKey, maxBytes: maxBytes, lineBytes: lineBytes) }
        for indices in byKey.values where !kept[indices[0]] {
            if let oldest = indices.first(where: { kept[$0] }) {
                newSince = max(newSince, entries[oldest].revision)  // from there on, this key's values are all kept
            } else if let newest = indices.last {
                newSince = max(newSince, entries[newest].revision)
                if entries[newest].isValue { kept[newest] = true }  // the value it still has
            }
        }
        return (entries.indices.filter { kept[$0] }, newSince)
    }

    /// Unmarks the oldest kept entries of `entries` (normalized: in revision order) until the
    /// rest take at most `maxBytes`; a key's newest entry stays when it is a value. Walks from
    /// the newest entry back and stops measuring at the first that no longer fits: a fold that
    /// brings a large history down encodes only what it keeps (and the keys' newest values),
    /// never the entries it drops.
    private static func bound<Line: RetainedLine>(
        _ entries: [Line], _ kept: inout [Bool], byKey: [Key: [Int]], maxBytes: Int, lineBytes: (Int) -> Int
    ) {
        var current = Set<Int>()
        var total = 0
        for indices in byKey.values where entries[indices.last!].isValue && kept[indices.last!] {
            current.insert(indices.last!)
            total += lineBytes(indices.last!)
        }
        var index = entries.count - 1
        while index >= 0 {
            if kept[index] && !current.contains(index) {
                let bytes = lineBytes(index)
                guard total + bytes <= maxBytes else { break }
                total += bytes
            }
            index -= 1
        }
        while index >= 0 {  // the first that did not fit and all older: dropped
            if !current.contains(index) { kept[index] = false }
            index -= 1
        }
    }

    /// The values of `entries` (normalized, complete from `since` on) at `revision`: for each
    /// key, its newest entry at or below `revision`, where that entry is a value.
    static func state(of entries: [HistoryEntry], at revision: Int64) -> [Key: HistoryEntry] {
        var state: [Key: HistoryEntry] = [:]
        for entry in entries where entry.revision <= revision {
            state[entry.key] = entry.value == nil ? nil : entry
        }
        return state
    }
}

/// One key at one revision.
struct HistoryPoint: Hashable {
    var revision: Int64
    var key: Key
}

/// What retention reads of a history line: an entry, or a line of a file not decoded
/// (``HistoryLine``).
protocol RetainedLine {
    var revision: Int64 { get }
    /// Nil for a value older than history (it counts as old).
    var time: Int64? { get }
    var key: Key { get }
    /// It holds a value (not a removal).
    var isValue: Bool { get }
}

extension HistoryEntry: RetainedLine {
    var isValue: Bool { value != nil }
}
