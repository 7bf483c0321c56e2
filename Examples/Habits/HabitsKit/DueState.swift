import FoundationEssentials

/// How far a habit is through its interval, and the marker that shows it: full just after it
/// was done, fading as the interval runs out, as the check mark fades in seed 002's app.
public struct DueState: Sendable, Equatable {
    /// Time since last done over the interval: 0 just done, 1 due, above 1 overdue.
    public var fraction: Double

    public init(fraction: Double) { self.fraction = fraction }

    public init(_ habit: Habit, now: Date) {
        let elapsed = now.timeIntervalSince(habit.lastDone)
        fraction = habit.schedule.seconds > 0 ? max(0, elapsed) / habit.schedule.seconds : 1
    }

    public var isDue: Bool { fraction >= 1 }

    /// `●` under a quarter of the interval, then `◕`, `◑`, `◔`, and `○` once due.
    public var marker: String {
        switch fraction {
        case ..<0.25: "●"
        case ..<0.5: "◕"
        case ..<0.75: "◑"
        case ..<1: "◔"
        default: "○"
        }
    }

    /// The ANSI colour of the marker: green while fresh, yellow in the last half, red when due.
    public var colour: String {
        switch fraction {
        case ..<0.5: "\u{1B}[32m"
        case ..<1: "\u{1B}[33m"
        default: "\u{1B}[1;31m"
        }
    }
}

/// Lengths of time as a person says them, roughly: "5 min", "3 h", "4 d", "3 w", "5 mo", "4 y".
public enum Span {
    /// Total for any length, NaN and infinities included: past 9,999 years, "over 9999 y".
    public static func text(_ seconds: Double) -> String {
        let s = abs(seconds)
        switch s {
        case _ where !(s < 10_000 * 365.25 * 86_400): return "over 9999 y"
        case ..<60: return "<1 min"
        case ..<3_600: return "\(Int(s / 60)) min"
        case ..<(48 * 3_600): return "\(Int(s / 3_600)) h"
        case ..<(14 * 86_400): return "\(Int(s / 86_400)) d"
        case ..<(91 * 86_400): return "\(Int(s / 604_800)) w"
        case ..<(730 * 86_400): return "\(Int(s / (30.44 * 86_400))) mo"
        default: return "\(Int(s / (365.25 * 86_400))) y"
        }
    }
}
