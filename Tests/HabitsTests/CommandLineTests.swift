import Foundation
import KVValues
import Synchronization
import Testing

@testable import HabitsKit
@testable import KVClient

final class RecordingConsole: HabitsConsole, @unchecked Sendable {
    var output = ""
    var errors = ""
    func out(_ text: String) { output += text }
    func err(_ text: String) { errors += text }
}

@Suite struct CommandLineTests {
    @Test func parsesTheContractsCommands() throws {
        #expect(try Invocation.parse(["list"]) == Invocation(socket: nil, command: .list(json: false)))
        #expect(
            try Invocation.parse(["--socket", "/s", "list", "--json"])
                == Invocation(socket: "/s", command: .list(json: true)))
        #expect(
            try Invocation.parse(["add", "Brush", "teeth", "--every", "0.5"]).command
                == .add(name: "Brush teeth", every: Schedule(every: 12, unit: .hours)))
        #expect(try Invocation.parse(["add", "Read"]).command == .add(name: "Read", every: nil))
        #expect(
            try Invocation.parse(["add", "--preset", "Drink", "water"]).command == .addPreset("Drink water", every: nil)
        )
        #expect(
            try Invocation.parse(["done", "Dishes", "--socket=/s"])
                == Invocation(socket: "/s", command: .done("Dishes")))
        #expect(try Invocation.parse(["remove", "--", "-odd name"]).command == .remove("-odd name"))
        #expect(try Invocation.parse(["presets"]).command == .presets)
        #expect(try Invocation.parse(["--help"]).command == .help)
        #expect(try Invocation.parse(["done", "-h"]).command == .help)
    }

    @Test func wrongUsageIsRefusedWithTheReason() {
        let cases: [([String], String)] = [
            ([], "no command"), (["fly"], "unknown command \"fly\""), (["add"], "needs the habit's NAME"),
            (["done", "  "], "needs the habit's NAME"), (["add", "x", "--every", "soon"], "\"soon\""),
            (["add", "x", "--every"], "--every needs a value"), (["list", "--every", "2"], "does not take --every"),
            (["done", "x", "--json"], "does not take --json"), (["list", "--colour"], "unknown option --colour"),
            (["--socket=", "list"], "--socket needs a PATH, not an empty value"),
            (["--socket", "", "list"], "--socket needs a PATH, not an empty value"),
        ]
        for (arguments, reason) in cases {
            #expect {
                try Invocation.parse(arguments)
            } throws: { error in
                guard case .usage(let message) = error as? HabitsError else { return false }
                return message.contains(reason)
            }
        }
    }

    @Test func exitStatusTwoForUsageZeroForHelpOneWhenKvdIsUnreachable() {
        let usage = RecordingConsole()
        #expect(HabitsCLI.main(arguments: ["fly"], environment: [:], console: usage, colour: false) == 2)
        #expect(usage.errors.hasPrefix("habits: unknown command \"fly\"\nusage: habits"))
        let help = RecordingConsole()
        #expect(HabitsCLI.main(arguments: ["help"], environment: [:], console: help, colour: false) == 0)
        #expect(help.output.contains("add NAME [--every DAYS]") && help.output.contains("NO_COLOR"))
        let presets = RecordingConsole()
        #expect(
            HabitsCLI.main(
                arguments: ["presets"], environment: ["KVD_NO_AUTOSTART": "1"], console: presets, colour: false) == 0)
        #expect(presets.output.contains("Drink water"))
        let down = RecordingConsole()
        let socket = "/tmp/habits-unit-\(getpid())-none/kvd.sock"
        #expect(
            HabitsCLI.main(
                arguments: ["--socket", socket, "list"], environment: ["KVD_NO_AUTOSTART": "1"], console: down,
                colour: false) == 1)
        #expect(
            down.errors.contains("cannot reach kvd at \(socket)") && down.errors.contains("--socket PATH"),
            "\(down.errors)")
        #expect(down.errors.split(separator: "\n").count == 1)
    }

    @Test func unknownNamesGetTheCloseOnes() throws {
        let names = ["Dishes", "Bed", "Eating ", "Brush teeth", "Bins out"]
        #expect(NameMatch.index(of: "Dishes", in: names) == 0)
        #expect(NameMatch.index(of: "eating", in: names) == 2, "case and v0.1's trailing space ignored")
        #expect(NameMatch.index(of: "Dishs", in: names) == nil)
        #expect(NameMatch.suggestions(for: "Dishs", in: names) == ["Dishes"])
        #expect(NameMatch.suggestions(for: "bed", in: ["Bed", "Beds"]) == ["Bed", "Beds"])
        #expect(NameMatch.suggestions(for: "Brush", in: names) == ["Brush teeth"])
        #expect(NameMatch.suggestions(for: "Zebra crossing", in: names).isEmpty)
        #expect(NameMatch.editDistance("kitten", "sitting") == 3)
        let habits = names.map { Habit(name: $0, started: Date(), schedule: Schedule(every: 1, unit: .days)) }
        #expect(throws: HabitsError.failure("no habit named \"Dishs\"; did you mean \"Dishes\"?")) {
            try HabitsCLI.find("Dishs", in: habits)
        }
        #expect(throws: HabitsError.failure("no habit named \"Gym\" (the habits are listed by: habits list)")) {
            try HabitsCLI.find("Gym", in: habits)
        }
    }

    @Test func presetsLiveInCodeAndAreFoundByName() {
        #expect(Preset.named("drink WATER ")?.schedule == Schedule(every: 2, unit: .hours))
        #expect(Preset.named("Swim") == nil)
        #expect(Set(Preset.all.map(\.name)).count == Preset.all.count)
    }

    /// What KVClient's read of a stored list reports, as habits words it.
    private func warnings(_ stored: Value) -> (habits: [Habit]?, report: KVReadReport, warnings: [String]) {
        let read = KVDefaults.typedRead([Habit].self, stored, argument: false)
        let report = KVReadReport(findings: read.findings.map(\.visible))
        return (read.value, report, report.findings.filter(\.blocksWrite).map(HabitStore.warning))
    }

    /// The warning for a damaged v0.1 element names the habit, the field and what is wrong.
    @Test func damagedV01ElementsAreDescribedByField() throws {
        var elements = try JSONSerialization.jsonObject(with: Fixture.seed002) as! [[String: Any]]
        elements[1]["timesDone"] = "four"
        elements[3]["id"] = "not-a-uuid"
        elements[4].removeValue(forKey: "name")
        let (habits, _, lines) = warnings(.data(try JSONSerialization.data(withJSONObject: elements)))
        #expect(habits?.count == 6)
        #expect(lines.count == 3, "\(lines)")
        #expect(
            lines[0].hasPrefix("warning: stored habit #2 (\"Bed\") cannot be read (")
                && lines[0].contains("HabitItemV01"), "\(lines[0])")
        #expect(
            lines[0].contains("found the string \"four\" at $[1].timesDone")
                && lines[0].hasSuffix("kept when habits saves the list"), "\(lines[0])")
        #expect(lines[1].contains("#4 (\"Brush teeth\")") && lines[1].contains("$[3].id"), "\(lines[1])")
        #expect(lines[2].contains("#5 cannot be read") && lines[2].contains("no member \"name\""), "\(lines[2])")
    }

    /// Elements from a newer habits, members it does not know, a reshaped list, something else.
    @Test func newerElementsUnknownMembersAndNonListsAreReported() throws {
        let newer = warnings(.array([.dictionary(["name": .string("A"), "schemaVersion": .integer(3)])]))
        #expect(newer.habits == [] && newer.report.newerVersion == 3)
        #expect(
            newer.warnings == [
                "warning: stored habit #1 (\"A\") was written by a newer version of habits (schema version 3; this one knows up to 2); it is not shown, and habits will not change the list until it is updated"
            ])
        let v2 = Habit(
            name: "Run", started: Date(timeIntervalSinceReferenceDate: 0), schedule: Schedule(every: 1, unit: .days))
        let stored = try #require(try StoredHabits.stored([v2]))
        guard case .array(let elements) = stored, case .dictionary(var members)? = elements.first else {
            Issue.record("a stored habit list is not an array of dictionaries: \(stored)")
            return
        }
        members["mood"] = .string("keen")
        let unknown = warnings(.array([.dictionary(members)]))
        #expect(unknown.habits == [v2])
        #expect(
            unknown.warnings.count == 1
                && unknown.warnings[0].contains(
                    "stored habit #1 holds something this version of habits does not read ($[0].mood"),
            "\(unknown.warnings)")
        let reshaped = warnings(.dictionary(["schemaVersion": .integer(3), "habits": .array([])]))
        #expect(reshaped.habits == nil && reshaped.report.readDefault && reshaped.report.newerVersion == 3)
        let other = warnings(.string("x"))
        #expect(other.habits == nil && other.report.readDefault && other.report.newerVersion == nil)
        #expect(warnings(.data(Fixture.seed002)).warnings.isEmpty, "the seed reads cleanly")
    }
}

/// Habits as KVClient stores them (typed JSON, v2), for building stored values in tests.
enum StoredHabits {
    static func stored(_ habits: [Habit]) throws -> Value? {
        try NodeEncoder().encode(habits).value()
    }
}
