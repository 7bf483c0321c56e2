import Foundation
import Testing

@testable import HabitsKit

@Suite struct ListFormatTests {
    let now = Date(timeIntervalSinceReferenceDate: 800_000_000)

    func habit(
        _ name: String, doneHoursAgo hours: Double, every: Schedule = Schedule(every: 1, unit: .days), times: Int = 1
    ) -> Habit {
        Habit(
            name: name, started: now.addingTimeInterval(-30 * 86_400), lastDone: now.addingTimeInterval(-hours * 3_600),
            timesDone: times, schedule: every)
    }

    @Test func markerFadesAsTheIntervalRunsOut() {
        #expect(
            [0, 0.24, 0.25, 0.5, 0.74, 0.99, 1, 3].map { DueState(fraction: $0).marker } == [
                "●", "●", "◕", "◑", "◑", "◔", "○", "○",
            ])
        #expect(DueState(habit("a", doneHoursAgo: 6), now: now).fraction == 0.25)
        #expect(DueState(habit("a", doneHoursAgo: 30), now: now).isDue)
        #expect(!DueState(habit("a", doneHoursAgo: -1), now: now).isDue, "a clock set back reads as just done")
    }

    @Test func tableShowsSinceDueAndCountsWithoutColourOffATerminal() {
        let habits = [
            habit("Dishes", doneHoursAgo: 3, times: 2),
            habit("Walk", doneHoursAgo: 100, every: Schedule(every: 1, unit: .weeks), times: 0),
            habit("Teeth", doneHoursAgo: 13, every: Schedule(every: 12, unit: .hours), times: 6),
        ]
        let table = ListFormat.table(habits, now: now, colour: false)
        #expect(!table.contains("\u{1B}"))
        let lines = table.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                "   HABIT   EVERY  LAST DONE  DUE          DONE",
                "●  Dishes  1d     3 h ago    in 21 h         2",
                "◑  Walk    1w     never      in 2 d          0",
                "○  Teeth   12h    13 h ago   overdue 1 h     6",
                "3 habits, 1 due",
            ])
    }

    @Test func colourOnlyOnMarkerAndDueColumnWhenAsked() {
        let table = ListFormat.table([habit("Dishes", doneHoursAgo: 30)], now: now, colour: true)
        #expect(table.contains("\u{1B}[1;31m○"))
        #expect(table.contains("\u{1B}[0m"))
    }

    @Test func colourIsForTerminalsAndRespectsNoColor() {
        #expect(HabitsCLI.wantsColour(environment: [:], isTerminal: true))
        #expect(!HabitsCLI.wantsColour(environment: [:], isTerminal: false))
        #expect(!HabitsCLI.wantsColour(environment: ["NO_COLOR": "1"], isTerminal: true))
        #expect(HabitsCLI.wantsColour(environment: ["NO_COLOR": ""], isTerminal: true))
        #expect(!HabitsCLI.wantsColour(environment: ["TERM": "dumb"], isTerminal: true))
    }

    @Test func spansReadAsPeopleSayThem() {
        let seconds: [Double] = [30, 600, 7_200, 259_200, 1_728_000, 17_280_000, 129_600_000]
        let texts = seconds.map(Span.text)
        #expect(texts == ["<1 min", "10 min", "2 h", "3 d", "2 w", "6 mo", "4 y"])
    }

    @Test func jsonHasTheContractsMembersWithRFC3339Dates() throws {
        let item = Habit(
            id: UUID(uuidString: "5D52B636-030A-4571-8B6E-2117AFD69304")!, name: "Dishes",
            started: Date(timeIntervalSinceReferenceDate: 0), lastDone: Date(timeIntervalSinceReferenceDate: 86_400.25),
            timesDone: 2, schedule: Schedule(every: 12, unit: .hours), preset: "Brush teeth")
        let array = try JSONSerialization.jsonObject(with: Data(ListFormat.json([item]).utf8)) as! [[String: Any]]
        let object = try #require(array.first)
        #expect(object["id"] as? String == "5D52B636-030A-4571-8B6E-2117AFD69304")
        #expect(object["name"] as? String == "Dishes")
        #expect(object["started"] as? String == "2001-01-01T00:00:00.000Z")
        #expect(object["lastDone"] as? String == "2001-01-02T00:00:00.250Z")
        #expect(object["due"] as? String == "2001-01-02T12:00:00.250Z")
        #expect(object["timesDone"] as? Int == 2)
        #expect(object["everyDays"] as? Double == 0.5)
        #expect(object["preset"] as? String == "Brush teeth")
        #expect(ListFormat.json([]) == "[]\n")
    }
}

/// An interval too long for a date is refused at input, and one stored anyway never crashes `list`,
/// `list --json` or `done`.
@Suite struct OutOfRangeIntervalTests {
    let now = Date(timeIntervalSinceReferenceDate: 800_000_000)

    @Test func intervalsBeyondAHundredYearsAreRefusedAtInput() {
        for text in ["1e308", "1e20", "36526", "5300000w", "inf", "nan", "0", "-1"] {
            #expect(Schedule(parsing: text) == nil, "--every \(text)")
        }
        #expect(Schedule(parsing: "36525") != nil)
        #expect(Schedule(parsing: "5217w") != nil)
        #expect(Schedule(parsing: "5218w") == nil)
    }

    @Test func aStoredIntervalOfAnySizeIsListedWithoutATrap() throws {
        for every in [1e308, 1e20, Double.greatestFiniteMagnitude] {
            let habit = Habit(
                name: "Forever", started: now, lastDone: now, timesDone: 1,
                schedule: Schedule(every: every, unit: .weeks))
            let table = ListFormat.table([habit], now: now, colour: false)
            #expect(table.contains("Forever") && table.contains("in over 9999 y"), "\(table)")
            let json = ListFormat.json([habit])
            #expect(json.contains("\"due\": \"9999-12-31T23:59:59.999Z\""), "\(json)")
            #expect(Span.text(habit.schedule.seconds) == "over 9999 y")
        }
    }
}
