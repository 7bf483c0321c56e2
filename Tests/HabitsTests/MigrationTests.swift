import Foundation
import Testing

@testable import HabitsKit

@Suite struct MigrationTests {
    /// v0.1 as its app decoded it: `JSONDecoder` defaults (dates as seconds since 2001).
    private func v01Items() throws -> [HabitItemV01] {
        try JSONDecoder().decode([HabitItemV01].self, from: Fixture.seed002)
    }

    @Test func fixtureIsTheSeedsJSONUnchanged() throws {
        let text = String(decoding: Fixture.seed002, as: UTF8.self)
        #expect(text.hasPrefix("[\n {\n \"id\":\"5D52B636-030A-4571-8B6E-2117AFD69304\",\n \"timesDone\":2,"))
        #expect(text.hasSuffix(" \"started\":687702096.33233297\n }\n]"))
        #expect(try v01Items().count == 9)
    }

    @Test func v01ToV2KeepsIdsNamesCountsAndDatesExactly() throws {
        let old = try v01Items()
        let habits = old.map(Habit.init(migrating:))
        #expect(
            habits.map(\.name) == [
                "Dishes", "Bed", "Eating ", "Brush teeth", "Write code", "Walk exercise", "Bins out", "Roomba kitchen",
                "Washing",
            ])
        for (habit, item) in zip(habits, old) {
            #expect(habit.id == item.id)
            #expect(habit.timesDone == item.timesDone)
            #expect(habit.started == item.started)
            #expect(habit.lastDone == item.lastDone)
            #expect(habit.everyDays == item.daysBetweenCompletions)
            #expect(habit.preset == nil)
        }
        #expect(habits[0].lastDone == Date(timeIntervalSinceReferenceDate: 687916240.08548605))
        #expect(habits[0].started == Date(timeIntervalSinceReferenceDate: 687741044.36479199))
    }

    @Test func legacyDaysBecomeAScheduleInTheLargestWholeUnit() {
        #expect(Schedule(legacyDays: 1) == Schedule(every: 1, unit: .days))
        #expect(Schedule(legacyDays: 0.5) == Schedule(every: 12, unit: .hours))
        #expect(Schedule(legacyDays: 7) == Schedule(every: 1, unit: .weeks))
        #expect(Schedule(legacyDays: 14) == Schedule(every: 2, unit: .weeks))
        #expect(Schedule(legacyDays: 3) == Schedule(every: 3, unit: .days))
        #expect(Schedule(legacyDays: 1.0 / 24 / 2) == Schedule(every: 30, unit: .minutes))
        #expect(Schedule(legacyDays: 1.3) == Schedule(every: 1.3, unit: .days), "no unit holds it whole: kept in days")
        #expect(Schedule(legacyDays: 0.0001) == Schedule(every: 0.0001, unit: .days))
        for days in [0.5, 1, 7, 1.3, 0.01, 0.0001, 100] { #expect(Schedule(legacyDays: days).everyDays == days) }
    }

    /// The current type must refuse a v0.1 element, so that KVClient falls back to v0.1 and
    /// migrates it instead of misreading it.
    @Test func aV01ElementIsNotReadableAsV2() throws {
        let first = try JSONSerialization.jsonObject(with: Fixture.seed002) as! [[String: Any]]
        let element = try JSONSerialization.data(withJSONObject: first[0])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Habit.self, from: element) }
    }

    @Test func v2RoundTripsAndLeavesOutAMissingPreset() throws {
        let habit = Habit(
            name: "Stretch", started: Date(timeIntervalSinceReferenceDate: 800_000_000),
            schedule: Schedule(every: 3, unit: .days))
        let data = try JSONEncoder().encode(habit)
        #expect(try JSONDecoder().decode(Habit.self, from: data) == habit)
        let object = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        #expect(object["preset"] == nil)
        #expect(Set(object.keys) == ["id", "name", "started", "lastDone", "timesDone", "schedule"])
        #expect(Habit.schemaVersion == 2 && HabitItemV01.schemaVersion == 1)
    }

    @Test func parsingEveryAcceptsDaysAndLengths() {
        #expect(Schedule(parsing: "1") == Schedule(every: 1, unit: .days))
        #expect(Schedule(parsing: "0.5") == Schedule(every: 12, unit: .hours))
        #expect(Schedule(parsing: "7") == Schedule(every: 1, unit: .weeks))
        #expect(Schedule(parsing: "12h") == Schedule(every: 12, unit: .hours))
        #expect(Schedule(parsing: "2w") == Schedule(every: 2, unit: .weeks))
        #expect(Schedule(parsing: "90min") == Schedule(every: 90, unit: .minutes))
        #expect(Schedule(parsing: "3D") == Schedule(every: 3, unit: .days))
        for bad in ["", "0", "-1", "soon", "nan", "inf", "h"] { #expect(Schedule(parsing: bad) == nil, "\(bad)") }
    }
}
