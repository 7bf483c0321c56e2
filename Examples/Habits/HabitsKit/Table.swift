import FoundationEssentials
import KVValues

/// What `habits list` prints: a table for people, or JSON for programs.
public enum ListFormat {
    /// One row per habit: marker, name, interval, time since last done, when due, times done.
    /// With `colour`, the marker and the due column are coloured by ``DueState``.
    public static func table(_ habits: [Habit], now: Date, colour: Bool) -> String {
        let header = ["", "HABIT", "EVERY", "LAST DONE", "DUE", "DONE"]
        let rows = habits.map { habit -> (DueState, [String]) in
            let state = DueState(habit, now: now)
            let last = habit.timesDone == 0 ? "never" : Span.text(now.timeIntervalSince(habit.lastDone)) + " ago"
            let untilDue = habit.due.timeIntervalSince(now)
            let due =
                untilDue > 0 ? "in " + Span.text(untilDue) : untilDue > -60 ? "now" : "overdue " + Span.text(untilDue)
            return (state, [state.marker, habit.name, habit.schedule.short, last, due, String(habit.timesDone)])
        }
        var widths = header.map(\.count)
        for (_, cells) in rows { for (i, cell) in cells.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String], _ state: DueState?) -> String {
            var parts: [String] = []
            for (i, cell) in cells.enumerated() {
                let padded =
                    i == cells.count - 1
                    ? String(repeating: " ", count: widths[i] - cell.count) + cell
                    : cell + String(repeating: " ", count: widths[i] - cell.count)
                if colour, let state, i == 0 || i == 4 {
                    parts.append(state.colour + padded + "\u{1B}[0m")
                } else {
                    parts.append(padded)
                }
            }
            return parts.joined(separator: "  ")
        }
        var out = (colour ? "\u{1B}[1m" + line(header, nil) + "\u{1B}[0m" : line(header, nil)) + "\n"
        for (state, cells) in rows { out += line(cells, state) + "\n" }
        let due = rows.filter { $0.0.isDue }.count
        out += "\(habits.count) habit\(habits.count == 1 ? "" : "s"), \(due) due\n"
        return out
    }

    /// The contract's `list --json`: an array of objects with `id`, `name`, `started`,
    /// `lastDone` (RFC 3339), `timesDone`, `everyDays`, and also `due`, `schedule` and `preset`.
    public static func json(_ habits: [Habit]) -> String {
        let array = JSON.array(
            habits.map { habit in
                var members: [String: JSON] = [
                    "id": .string(habit.id.uuidString),
                    "name": .string(habit.name),
                    "started": .string(RFC3339.format(habit.started)),
                    "lastDone": .string(RFC3339.format(habit.lastDone)),
                    "timesDone": .integer(Int64(habit.timesDone)),
                    "everyDays": .real(habit.everyDays),
                    "due": .string(RFC3339.format(habit.due)),
                    "schedule": .object([
                        "every": .real(habit.schedule.every), "unit": .string(habit.schedule.unit.rawValue),
                    ]),
                ]
                if let preset = habit.preset { members["preset"] = .string(preset) }
                return .object(members)
            })
        return JSONWriter(pretty: true, sortKeys: true).string(array) + "\n"
    }

    /// `habits presets`: the built-in suggestions.
    public static func presets(_ presets: [Preset]) -> String {
        let width = presets.map(\.name.count).max() ?? 0
        let everyWidth = presets.map(\.schedule.phrase.count).max() ?? 0
        var out = ""
        for preset in presets {
            out +=
                preset.name.padding(width) + "  " + preset.schedule.phrase.padding(everyWidth) + "  " + preset.summary
                + "\n"
        }
        return out + "Add one with: habits add --preset NAME\n"
    }
}

extension String {
    func padding(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
