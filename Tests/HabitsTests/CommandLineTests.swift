import Foundation
import Synchronization
import Testing
@testable import HabitsKit
import KVValues

final class RecordingConsole: HabitsConsole, @unchecked Sendable {
    var output = ""
    var errors = ""
    func out(_ text: String) { output += text }
    func err(_ text: String) { errors += text }
}

@Suite struct CommandLineTests {
    @Test func parsesTheContractsCommands() throws {
        #expect(try Invocation.parse(["list"]) == Invocation(socket: nil, command: .list(json: false)))
        #expect(try Invocation.parse(["--socket", "/s", "list", "--json"]) == Invocation(socket: "/s", command: .list(json: true)))
        #expect(try Invocation.parse(["add", "Brush", "teeth", "--every", "0.5"]).command == .add(name: "Brush teeth", every: Schedule(every: 12, unit: .hours)))
        #expect(try Invocation.parse(["add", "Read"]).command == .add(name: "Read", every: nil))
        #expect(try Invocation.parse(["add", "--preset", "Drink", "water"]).command == .addPreset("Drink water", every: nil))
        #expect(try Invocation.parse(["done", "Dishes", "--socket=/s"]) == Invocation(socket: "/s", command: .done("Dishes")))
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
        #expect(HabitsCLI.main(arguments: ["presets"], environment: ["KVD_NO_AUTOSTART": "1"], console: presets, colour: false) == 0)
        #expect(presets.output.contains("Drink water"))
        let down = RecordingConsole()
        let socket = "/tmp/habits-unit-\(getpid())-none/kvd.sock"
        #expect(HabitsCLI.main(arguments: ["--socket", socket, "list"], environment: ["KVD_NO_AUTOSTART": "1"], console: down, colour: false) == 1)
        #expect(down.errors.contains("cannot reach kvd at \(socket)") && down.errors.contains("--socket PATH"), "\(down.errors)")
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
        #expect(throws: HabitsError.failure("no habit named \"Dishs\"; did you mean \"Dishes\"?")) { try HabitsCLI.find("Dishs", in: habits) }
        #expect(throws: HabitsError.failure("no habit named \"Gym\" (the habits are listed by: habits list)")) { try HabitsCLI.find("Gym", in: habits) }
    }

    @Test func presetsLiveInCodeAndAreFoundByName() {
        #expect(Preset.named("drink WATER ")?.schedule == Schedule(every: 2, unit: .hours))
        #expect(Preset.named("Swim") == nil)
        #expect(Set(Preset.all.map(\.name)).count == Preset.all.count)
    }

    /// The warning for a damaged v0.1 element names the field and what is wrong with it.
    @Test func damagedV01ElementsAreDescribedByField() throws {
        var members: [String: JSON] = [
            "id": .string("5D52B636-030A-4571-8B6E-2117AFD69304"), "name": .string("Dishes"), "timesDone": .integer(2),
            "daysBetweenCompletions": .integer(1), "lastDone": .real(687916240.08548605), "started": .real(687741044.36479199),
        ]
        #expect(StoredShape.v01Problem(members) == nil)
        members["timesDone"] = .string("four")
        #expect(StoredShape.v01Problem(members) == "\"timesDone\" is the string \"four\", not a whole number")
        members["timesDone"] = .integer(2)
        members["id"] = .string("not-a-uuid")
        #expect(StoredShape.v01Problem(members) == "\"id\" is the string \"not-a-uuid\", not a UUID string")
        members["id"] = .string("5D52B636-030A-4571-8B6E-2117AFD69304")
        members["name"] = nil
        #expect(StoredShape.v01Problem(members) == "\"name\" is missing")
    }

    @Test func storedShapeFindsNewerElementsAndNonLists() throws {
        guard case .list(let elements) = StoredShape(.array([.dictionary(["name": .string("A"), "schemaVersion": .integer(3)]), .string("junk")])) else {
            Issue.record("not a list")
            return
        }
        #expect(elements.map(\.version) == [3, nil])
        #expect(elements.map(\.name) == ["A", nil])
        if case .list(let fromData) = StoredShape(.data(Fixture.seed002)) {
            #expect(fromData.count == 9 && fromData[0].name == "Dishes" && fromData[0].version == nil)
        } else {
            Issue.record("the seed's data value is not read as a list")
        }
        if case .newerList(3) = StoredShape(.dictionary(["schemaVersion": .integer(3), "habits": .array([])])) {} else { Issue.record("newer list not seen") }
        if case .other("a string") = StoredShape(.string("x")) {} else { Issue.record("a string is not other") }
        if case .absent = StoredShape(nil) {} else { Issue.record("nil is not absent") }
    }
}
