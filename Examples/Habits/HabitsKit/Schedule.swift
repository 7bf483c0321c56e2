import FoundationEssentials

/// How often a habit falls due: every `every` `unit`s, such as every 12 hours or every 1 week.
///
/// Version 0.1 stored a bare number of days (`daysBetweenCompletions: 0.5`); version 2 stores the
/// interval in the unit a person would say (`{"every": 12, "unit": "hours"}`), and
/// ``init(legacyDays:)`` is the conversion between the two. ``everyDays`` gives the interval
/// back in days, as `habits list --json` prints it.
public struct Schedule: Codable, Sendable, Equatable {
    public enum Unit: String, Codable, Sendable, CaseIterable {
        case minutes, hours, days, weeks

        /// The length of one unit in seconds.
        public var seconds: Double {
            switch self {
            case .minutes: 60
            case .hours: 3_600
            case .days: 86_400
            case .weeks: 604_800
            }
        }
    }

    /// How many units between completions (positive; whole in all but unusual legacy values).
    public var every: Double
    public var unit: Unit

    public init(every: Double, unit: Unit) {
        self.every = every
        self.unit = unit
    }

    /// Version 0.1's `daysBetweenCompletions`, in the largest unit that holds it as a whole
    /// number (0.5 → 12 hours, 7 → 1 week, 3 → 3 days; minutes only under a day); a value no
    /// unit holds whole (1.3) stays in days as it was, so no interval changes length.
    public init(legacyDays days: Double) {
        for unit in Unit.allCases.reversed() where unit != .minutes || days < 1 {
            let count = days * Unit.days.seconds / unit.seconds
            if count >= 1, count == count.rounded(), count * unit.seconds / Unit.days.seconds == days {
                self.init(every: count, unit: unit)
                return
            }
        }
        self.init(every: days, unit: .days)
    }

    /// The interval in days (12 hours → 0.5).
    public var everyDays: Double { seconds / Unit.days.seconds }

    /// The interval in seconds; always finite (a stored `every` too large for seconds, from a
    /// hand edit or another app, saturates at the largest finite Double).
    public var seconds: Double { min(every * unit.seconds, .greatestFiniteMagnitude) }

    /// "every day", "every 12 hours", "every 2 weeks".
    public var phrase: String {
        let singular = String(unit.rawValue.dropLast())
        if every == 1 { return "every \(singular)" }
        return "every \(Self.number(every)) \(unit.rawValue)"
    }

    /// Short form for the table: "1d", "12h", "2w", "90m".
    public var short: String {
        "\(Self.number(every))\(unit.rawValue.prefix(1) == "m" ? "min" : String(unit.rawValue.prefix(1)))"
    }

    /// The longest interval `--every` takes: 100 years (36,525 days). Longer ones could not be
    /// shown as a due date; a stored one (hand-edited, or from another app) is still listed.
    public static let maxSeconds = 36_525 * Unit.days.seconds

    /// Parses `--every`: a number of days (`1`, `0.5`, `7`), or a number with a unit suffix
    /// (`90m`/`90min`, `12h`, `3d`, `2w`). Nil if it is not a positive interval of at most
    /// ``maxSeconds``.
    public init?(parsing text: String) {
        let lowered = NameMatch.trimmed(text).lowercased()
        let suffixes: [(String, Unit)] = [
            ("min", .minutes), ("m", .minutes), ("h", .hours), ("d", .days), ("w", .weeks),
        ]
        for (suffix, unit) in suffixes where lowered.hasSuffix(suffix) {
            guard let count = Double(lowered.dropLast(suffix.count)), count > 0, count * unit.seconds <= Self.maxSeconds
            else { return nil }
            self.init(every: count, unit: unit)
            return
        }
        guard let days = Double(lowered), days > 0, days * Unit.days.seconds <= Self.maxSeconds else { return nil }
        self.init(legacyDays: days)
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
