import KVValues

/// What a typed read found in the stored value besides what it returned: every part it skipped,
/// did not know, or read as a fallback, with where it is.
///
/// ```swift
/// let reading = defaults.read(.notebook)
/// reading.value                       // what the app can use
/// reading.report.isClean              // false: something stored was not read
/// reading.report.newerVersion         // 3: a newer app wrote part of it (a downgrade)
/// for finding in reading.report.findings { print(finding) }   // "$.notes[1]: written by a newer version ..."
/// ```
///
/// A save over a value that did not read cleanly is refused unless the caller says what to do
/// with the unread parts (``KVDefaults/UnreadPolicy``), so nothing a read did not understand is
/// lost by writing.
public struct KVReadReport: Sendable, Equatable, CustomStringConvertible {
    /// One part of the stored value that the read did not turn into the app's value.
    public struct Finding: Sendable, Equatable, CustomStringConvertible {
        /// What the read did with the part.
        public enum Kind: Sendable, Equatable {
            /// It could not be decoded: the key read its default (path `$`), an array element or
            /// a dictionary entry was skipped, or an optional member read as nil.
            case undecodable
            /// It was written by a newer schema version than the app knows, and was skipped
            /// like an undecodable part.
            case newerVersion(stored: Int, known: Int)
            /// A stored member (or trailing array elements) that the type never read.
            case unread
            /// An enum raw value the app does not know; the app sees the enum's fallback. `kept`:
            /// read through ``KeepsUnknownCase``, which writes the raw value back unchanged.
            case unknownCase(raw: String, kept: Bool)
        }

        /// Where it is in the stored value: `$` for the whole value, then `.member` and `[index]`
        /// steps (`$.notes[1].title`).
        public var path: String
        /// What the read did with the part.
        public var kind: Kind
        /// What happened, in one sentence.
        public var message: String
        /// The stored value at ``path``, when it is one kvd can store (nil for JSON `null` inside
        /// a data value).
        public var stored: Value?

        /// A finding with these members.
        public init(path: String, kind: Kind, message: String, stored: Value?) {
            self.path = path
            self.kind = kind
            self.message = message
            self.stored = stored
        }

        public var description: String { "\(path): \(message)" }

        /// Whether a save without a policy must refuse over it (all but a kept unknown case).
        public var blocksWrite: Bool {
            if case .unknownCase(_, kept: true) = kind { return false }
            return true
        }

        /// The array index of the top-level element it is in or is (`$[3].x` → 3), if any.
        public var topLevelIndex: Int? {
            guard path.hasPrefix("$["), let close = path.firstIndex(of: "]") else { return nil }
            return Int(path[path.index(path.startIndex, offsetBy: 2)..<close])
        }
    }

    /// What was found, in the order the read met it.
    public var findings: [Finding]

    /// A report of `findings` (clean when empty).
    public init(findings: [Finding] = []) {
        self.findings = findings
    }

    /// Whether a plain save may overwrite the stored value: nothing was skipped or left unread
    /// (a kept unknown enum case does not count).
    public var isClean: Bool { !findings.contains(where: \.blocksWrite) }

    /// The newest schema version found anywhere in the stored value when it is newer than the
    /// app knows: the stored value was written (at least in part) by a newer version of the app.
    public var newerVersion: Int? {
        findings.compactMap { finding -> Int? in
            if case .newerVersion(let stored, _) = finding.kind { return stored }
            return nil
        }.max()
    }

    /// Whether the whole stored value could not be read, so the read returned the key's default.
    public var readDefault: Bool {
        findings.contains { finding in
            guard finding.path == "$" else { return false }
            switch finding.kind {
            case .undecodable, .newerVersion: return true
            case .unread, .unknownCase: return false
            }
        }
    }

    public var description: String {
        findings.isEmpty ? "read cleanly" : findings.map(\.description).joined(separator: "; ")
    }
}

/// A typed read: the value, and what the read found in the stored value besides it.
public struct KVReading<T> {
    /// The value by the search order; the key's default when nothing readable is stored.
    public var value: T
    /// What the read skipped or did not know (empty when it read cleanly or nothing is stored).
    public var report: KVReadReport
    /// Whether a value is stored for the key (in any domain of the search order).
    public var isStored: Bool
}

extension KVReading: Sendable where T: Sendable {}
extension KVReading: Equatable where T: Equatable {}

// MARK: collecting findings

/// One step of a path into a stored value.
enum PathStep: Sendable, Equatable {
    case member(String)
    case index(Int)

    static func steps(_ codingPath: [any CodingKey]) -> [PathStep] {
        codingPath.map { key in
            if key is IndexKey, let index = key.intValue { return .index(index) }
            return .member(key.stringValue)
        }
    }

    static func text(_ steps: [PathStep]) -> String {
        "$"
            + steps.map { step in
                switch step {
                case .member(let name): "." + name
                case .index(let index): "[\(index)]"
                }
            }.joined()
    }
}

/// A finding with what a write needs to keep the part it concerns.
struct Finding: Sendable {
    /// How a save with ``KVDefaults/UnreadPolicy/keep`` can put the stored part back.
    enum Keep: Sendable, Equatable {
        /// Append the stored node to the array that holds it (a skipped element).
        case append
        /// Put the stored member back if the new value has no member of that name (a member the
        /// type does not know).
        case memberIfAbsent
        /// Put the stored member back if the app left the member as the read produced it (an
        /// optional that read as nil, a skipped dictionary entry, an enum read as its fallback);
        /// a member the app changed is the app's.
        case memberIfUnchanged
        /// It cannot be kept by merging: the save must refuse.
        case never
    }

    var steps: [PathStep]
    var kind: KVReadReport.Finding.Kind
    var message: String
    /// The stored node at `steps`.
    var stored: Node?
    var keep: Keep

    /// A finding at `codingPath`, keepable as `keep` when its container is stable: reached from
    /// the root through member names only, with no migration on the way (so the same container
    /// exists, meaning the same thing, in the value the app writes back).
    init(
        _ codingPath: [any CodingKey], _ kind: KVReadReport.Finding.Kind, _ message: String, stored: Node?, keep: Keep,
        stable: Bool
    ) {
        steps = PathStep.steps(codingPath)
        self.kind = kind
        self.message = message
        self.stored = stored
        self.keep = stable && !steps.isEmpty ? keep : .never
    }

    var blocksWrite: Bool {
        if case .unknownCase(_, kept: true) = kind { return false }
        return true
    }

    var visible: KVReadReport.Finding {
        KVReadReport.Finding(
            path: PathStep.text(steps), kind: kind, message: message, stored: stored.flatMap { try? $0.value() })
    }
}

/// The findings of one read, collected as the decoder goes: a reference shared by every
/// container of that read. A failed attempt (a version tried and rejected, an element skipped)
/// rolls back what it recorded. Used by one thread at a time.
final class ReadLog {
    private(set) var findings: [Finding] = []

    var mark: Int { findings.count }

    func record(_ finding: Finding) { findings.append(finding) }

    func rollback(to mark: Int) { findings.removeSubrange(mark...) }

    func since(_ mark: Int) -> ArraySlice<Finding> { findings[mark...] }

    func append(_ more: some Sequence<Finding>) { findings.append(contentsOf: more) }
}
