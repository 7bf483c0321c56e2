import FoundationEssentials
import KVClient
import KVProtocol
import KVSystem

extension KVDefaults.Keys {
    /// The habit list: read from any version (a v0.1 data value too), written as v2.
    public static let habits = Key<[Habit]>(HabitStore.key, default: [])
}

/// The habit list in kvd: reads it (reporting what it cannot read), and writes it back only
/// when doing so loses nothing.
///
/// What KVClient's read reports decides everything: a stored element that cannot be read
/// (damaged) is left out of the list with a warning and stays stored (saves keep it, appended);
/// if any part of the list was written by a newer version of habits (``KVReadReport/newerVersion``),
/// the list is shown as far as it can be read and ``save(_:)`` refuses, so a downgraded habits
/// never edits a list it cannot show whole; a stored value that is not a list at all is left
/// untouched, and so is a list with parts KVClient cannot keep through a save.
public final class HabitStore: Sendable {
    public static let domain = "com.example.habits"
    public static let key = "Habits"

    let defaults: KVDefaults
    /// The socket this store talks to, for messages.
    public let socketPath: String

    public init(socketPath: String?, environment: [String: String]) {
        self.socketPath = Paths.socket(explicit: socketPath, environment: environment)
        // Reads report through `read(_:)`; the diagnostics would only repeat that.
        let configuration = KVDefaults.Configuration(
            socketPath: self.socketPath, environment: environment, arguments: [], diagnostics: { _ in })
        defaults = KVDefaults(suiteName: Self.domain, configuration: configuration)!
    }

    /// The readable habits, in stored order, and a warning for each stored part left out.
    public func load() throws(HabitsError) -> (habits: [Habit], warnings: [String]) {
        guard defaults.synchronize() else { throw .failure(unreachable) }
        let reading = defaults.read(.habits)
        if reading.report.readDefault {
            if let version = reading.report.newerVersion {
                throw .failure(
                    "the stored habit list was written by a newer version of habits (schema version \(version); this one knows up to \(Habit.schemaVersion)), so it is left untouched; update habits to use it"
                )
            }
            let what = defaults.value(forKey: Self.key).map(Self.describe) ?? "something else"
            throw .failure(
                "\(Self.domain) \"\(Self.key)\" holds \(what), not a list of habits, so it is left untouched; see it with `kvctl get \(Self.domain) \(Self.key)` and remove it with `kvctl delete \(Self.domain) \(Self.key)` to start afresh"
            )
        }
        return (reading.value, reading.report.findings.filter(\.blocksWrite).map(Self.warning))
    }

    /// Stores `habits` as v2, keeping the stored elements it could not read; refuses when part
    /// of the stored list is from a newer version, or cannot be kept, leaving it untouched.
    public func save(_ habits: [Habit]) throws(HabitsError) {
        let report = defaults.read(.habits).report
        if let newer = report.findings.first(where: { if case .newerVersion = $0.kind { true } else { false } }),
            case .newerVersion(let version, let known) = newer.kind
        {
            throw .failure(
                "\(Self.which(newer)) was written by a newer version of habits (schema version \(version); this one knows up to \(known)), so habits will not rewrite the list and changed nothing; update habits to make changes"
            )
        }
        do {
            try defaults.set(habits, for: .habits, unread: .keep)
        } catch .wouldLoseStoredData(_, let report) {
            let parts = report.findings.map { "\(Self.which($0)): \($0.message)" }.joined(separator: "; ")
            throw .failure(
                "habits will not rewrite the stored list, because saving it would lose what this version cannot read (\(parts)); it changed nothing. See it with `kvctl get \(Self.domain) \(Self.key)`"
            )
        } catch .client(let error) {
            if case .cannotConnect = error { throw .failure(unreachable) }
            throw .failure("the change was not stored: \(error)")
        } catch {
            throw .failure("the change was not stored: \(error)")
        }
    }

    var unreachable: String {
        "cannot reach kvd at \(socketPath) (is it running?); start it with `systemctl --user start kvd.socket` or by running `kvd`, or give its socket with --socket PATH"
    }

    /// The warning for one part of the stored list that `load` left out or read only in part.
    static func warning(_ finding: KVReadReport.Finding) -> String {
        let which = Self.which(finding)
        let isElement = finding.path == "$[\(finding.topLevelIndex ?? -1)]"
        switch finding.kind {
        case .newerVersion(let stored, let known):
            return
                "warning: \(which) was written by a newer version of habits (schema version \(stored); this one knows up to \(known)); it is not shown, and habits will not change the list until it is updated"
        case .undecodable where isElement:
            return
                "warning: \(which) cannot be read (\(reason(finding.message))); it is not shown, stays stored as it is, and is kept when habits saves the list"
        default:
            return
                "warning: \(which) holds something this version of habits does not read (\(finding.path): \(finding.message)); habits will not rewrite the list while it is there"
        }
    }

    /// "stored habit #2 ("Bed")" for a finding in or at an element, "the stored list" otherwise.
    static func which(_ finding: KVReadReport.Finding) -> String {
        guard let index = finding.topLevelIndex else { return "the stored list" }
        var name = ""
        if finding.path == "$[\(index)]", case .dictionary(let members)? = finding.stored,
            case .string(let text)? = members["name"]
        {
            name = " (\"\(text)\")"
        }
        return "stored habit #\(index + 1)\(name)"
    }

    /// KVClient's "skipped: REASON" as REASON.
    private static func reason(_ message: String) -> String {
        message.hasPrefix("skipped: ") ? String(message.dropFirst("skipped: ".count)) : message
    }

    private static func describe(_ value: Value) -> String {
        switch value {
        case .data: "a data value that holds no list of habits"
        case .integer, .array: "an \(value.typeName)"
        default: "a \(value.typeName)"
        }
    }
}

/// Why a habits command did not do what was asked.
public enum HabitsError: Error, Equatable, Sendable {
    /// Wrong usage: exit status 2, with the usage line.
    case usage(String)
    /// A failure (unknown habit, kvd unreachable, a list that must not be rewritten): exit status 1.
    case failure(String)
}
