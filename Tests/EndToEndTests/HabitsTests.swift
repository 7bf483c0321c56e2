import Foundation
import Glibc
import Testing

/// The real `habits` against the real `kvd`, on seed 002's data as its v0.1 app left it.
@Suite(.serialized) struct HabitsTests {
    static var habitsBinary: String { Binaries.directory + "/habits" }

    /// Seed 002's v0.1 JSON, byte for byte (the fixture of the HabitsTests unit tests).
    static let seedJSON: Data = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../HabitsTests/Fixtures/seed-002-v0.1-habits.json").standardized.path
        return FileManager.default.contents(atPath: path)!
    }()

    /// The nine habits as the seed lists them: name, times done, started and last done (seconds
    /// since 2001).
    static let seedHabits: [(id: String, name: String, timesDone: Int, started: Double, lastDone: Double)] = [
        ("5D52B636-030A-4571-8B6E-2117AFD69304", "Dishes", 2, 687741044.36479199, 687916240.08548605),
        ("26D89BA0-D3FA-49CF-BB01-249A19E90871", "Bed", 4, 687702031.59694302, 688060851.81663799),
        ("C73234ED-3FA9-4B91-AC24-42E7391E3BE1", "Eating ", 10, 687702494.12051105, 688108866.69676399),
        ("0940450A-2A5E-4B11-B049-9B33F9C01F7D", "Brush teeth", 6, 687702045.01338601, 688110048.34211302),
        ("FA6556A8-17A8-4556-8690-9522A5B22856", "Write code", 4, 687702594.956689, 688108275.33836806),
        ("DA2A1F85-1274-4C58-B411-D6FF9B2A2AAF", "Walk exercise", 0, 687702620.82411301, 687702620.82404804),
        ("155D50A7-1403-47C6-AFCA-12DB13270A55", "Bins out", 1, 687702107.33206701, 687879744.60854602),
        ("86FE01B9-4716-4C2C-B768-1AC8E3B03DDB", "Roomba kitchen", 1, 687702077.16412401, 687916244.61723006),
        ("EEA3D2CD-3717-49DD-B5E2-924956F41189", "Washing", 2, 687702096.33233297, 688115581.30661595),
    ]
    static let seedEveryDays: [Double] = [1, 1, 0.5, 0.5, 1, 7, 7, 7, 7]

    func habits(_ sandbox: Sandbox, _ arguments: String...) throws -> Run {
        try run(Self.habitsBinary, ["--socket", sandbox.socket] + arguments)
    }

    /// `habits list --json`, parsed.
    func listJSON(_ sandbox: Sandbox) throws -> [[String: Any]] {
        let list = try habits(sandbox, "list", "--json")
        #expect(list.status == 0, "\(list.stderr)")
        return try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as! [[String: Any]]
    }

    /// The stored value of `Habits` as kvctl prints it in typed JSON.
    func stored(_ sandbox: Sandbox) throws -> String {
        try kvctl(sandbox, "--json", "get", "com.example.habits", "Habits").stdout
    }

    /// The seed's v0.1 list stored both ways a `UserDefaults` app could have left it.
    enum SeedForm: CaseIterable { case dataValue, typedJSON }

    func storeSeed(_ sandbox: Sandbox, as form: SeedForm, json: Data = seedJSON) throws {
        let set: Run
        switch form {
        case .dataValue:
            set = try kvctl(
                sandbox, "set", "com.example.habits", "Habits", "-data",
                json.map { String(format: "%02x", $0) }.joined())
        case .typedJSON:
            set = try kvctl(
                sandbox, "set", "com.example.habits", "Habits", "--json", String(decoding: json, as: UTF8.self))
        }
        #expect(set.status == 0, "\(set.stderr)")
    }

    @Test(arguments: SeedForm.allCases)
    func seedV01ListIsReadThenUpgradedToV2ByTheFirstWrite(form: SeedForm) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        try storeSeed(sandbox, as: form)

        let before = try listJSON(sandbox)
        #expect(before.count == 9)
        for (object, seed) in zip(before, Self.seedHabits) {
            #expect(object["id"] as? String == seed.id)
            #expect(object["name"] as? String == seed.name)
            #expect(object["timesDone"] as? Int == seed.timesDone)
            #expect(Self.seconds(object["started"]) == seed.started, "\(seed.name) started")
            #expect(Self.seconds(object["lastDone"]) == seed.lastDone, "\(seed.name) lastDone")
        }
        #expect(before.map { $0["everyDays"] as? Double } == Self.seedEveryDays)
        #expect(
            try kvctl(sandbox, "read-type", "com.example.habits", "Habits").stdout
                == (form == .dataValue ? "data\n" : "array\n"),
            "reading alone changes nothing")

        let done = try habits(sandbox, "done", "Dishes")
        #expect(done.status == 0 && done.stderr.isEmpty, "\(done.stderr)")
        #expect(done.stdout.contains("Dishes") && done.stdout.contains("3 times"))

        let storedValue = try JSONSerialization.jsonObject(with: Data(try stored(sandbox).utf8)) as! [[String: Any]]
        #expect(storedValue.count == 9)
        #expect(storedValue.allSatisfy { $0["schemaVersion"] as? Int == 2 }, "the first write stores v2")
        #expect(storedValue.allSatisfy { $0["daysBetweenCompletions"] == nil && $0["schedule"] != nil })

        let after = try listJSON(sandbox)
        #expect(after.count == 9)
        #expect(after[0]["timesDone"] as? Int == 3, "Dishes' count rose by one")
        #expect(after[0]["id"] as? String == Self.seedHabits[0].id)
        #expect(Self.seconds(after[0]["lastDone"])! > Self.seedHabits[0].lastDone)
        #expect(Self.seconds(after[0]["started"]) == Self.seedHabits[0].started)
        for index in 1..<9 {
            #expect(
                NSDictionary(dictionary: after[index]) == NSDictionary(dictionary: before[index]),
                "\(Self.seedHabits[index].name) unchanged")
        }
        daemon.stop()
    }

    @Test func aDamagedElementIsSkippedWithAWarningAndKeptWhileTheOthersWork() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        var elements = try JSONSerialization.jsonObject(with: Self.seedJSON) as! [[String: Any]]
        elements[1]["timesDone"] = "four"  // Bed: a wrong type
        elements[4].removeValue(forKey: "name")  // Write code: a required field missing
        try storeSeed(sandbox, as: .dataValue, json: try JSONSerialization.data(withJSONObject: elements))

        let list = try habits(sandbox, "list", "--json")
        #expect(list.status == 0)
        let shown = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as! [[String: Any]]
        #expect(
            shown.map { $0["name"] as? String } == [
                "Dishes", "Eating ", "Brush teeth", "Walk exercise", "Bins out", "Roomba kitchen", "Washing",
            ])
        let warnings = list.stderr.split(separator: "\n")
        #expect(warnings.count == 2, "\(list.stderr)")
        #expect(warnings.first?.contains("#2 (\"Bed\") cannot be read") == true, "\(list.stderr)")
        #expect(warnings.first?.contains("timesDone") == true, "\(list.stderr)")
        #expect(warnings.last?.contains("#5") == true && warnings.last?.contains("name") == true, "\(list.stderr)")
        #expect(list.stderr.contains("stays stored"))

        let done = try habits(sandbox, "done", "Dishes")
        #expect(done.status == 0, "\(done.stderr)")
        let storedValue = try JSONSerialization.jsonObject(with: Data(try stored(sandbox).utf8)) as! [[String: Any]]
        #expect(storedValue.count == 9, "the damaged elements stay stored")
        #expect(storedValue.filter { $0["schemaVersion"] as? Int == 2 }.count == 7)
        let bed = try #require(storedValue.first { $0["name"] as? String == "Bed" })
        #expect(
            bed["timesDone"] as? String == "four" && bed["id"] as? String == Self.seedHabits[1].id,
            "kept as it was, recoverable")
        #expect(storedValue.contains { $0["id"] as? String == Self.seedHabits[4].id && $0["name"] == nil })
        #expect(try listJSON(sandbox).first?["timesDone"] as? Int == 3)
        daemon.stop()
    }

    @Test func aListFromANewerVersionIsLeftUntouched() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let newer = """
            [{"schemaVersion": 2, "id": "5D52B636-030A-4571-8B6E-2117AFD69304", "name": "Dishes", "started": {"$date": "2022-10-17T23:10:44.364Z"},
              "lastDone": {"$date": "2022-10-19T23:50:40.085Z"}, "timesDone": 2, "schedule": {"every": 1.0, "unit": "days"}},
             {"schemaVersion": 3, "id": "26D89BA0-D3FA-49CF-BB01-249A19E90871", "name": "Bed", "rhythm": {"weekdays": [1, 3, 5]}, "timesDone": 4}]
            """
        #expect(try kvctl(sandbox, "set", "com.example.habits", "Habits", "--json", newer).status == 0)
        let original = try stored(sandbox)

        let list = try habits(sandbox, "list", "--json")
        #expect(list.status == 0)
        #expect(
            list.stderr.contains("#2 (\"Bed\") was written by a newer version of habits (schema version 3"),
            "\(list.stderr)")
        #expect((try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as! [[String: Any]]).count == 1)

        for arguments in [["done", "Dishes"], ["add", "Stretch"], ["remove", "Dishes"]] {
            let write = try run(Self.habitsBinary, ["--socket", sandbox.socket] + arguments)
            #expect(write.status == 1, "\(arguments)")
            #expect(
                write.stderr.contains("newer version of habits") && write.stderr.contains("update habits"),
                "\(write.stderr)")
            #expect(try stored(sandbox) == original, "\(arguments) left the list untouched")
        }

        // A whole list stored by a newer version in another shape: not even read.
        let reshaped = #"{"schemaVersion": 3, "habits": []}"#
        #expect(try kvctl(sandbox, "set", "com.example.habits", "Habits", "--json", reshaped).status == 0)
        let reshapedStored = try stored(sandbox)
        let refused = try habits(sandbox, "done", "Dishes")
        #expect(
            refused.status == 1 && refused.stderr.contains("newer version of habits (schema version 3"),
            "\(refused.stderr)")
        #expect(try habits(sandbox, "list").status == 1)
        #expect(try stored(sandbox) == reshapedStored)
        daemon.stop()
    }

    /// A v2 habit with a member this version does not know (a later habits added it without a new
    /// schema version) is shown, but saving would drop the member: no rewrite.
    @Test func aHabitWithAMemberThisVersionDoesNotReadIsShownAndTheListIsNotRewritten() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let list = """
            [{"schemaVersion": 2, "id": "5D52B636-030A-4571-8B6E-2117AFD69304", "name": "Dishes", "started": {"$date": "2022-10-17T23:10:44.364Z"},
              "lastDone": {"$date": "2022-10-19T23:50:40.085Z"}, "timesDone": 2, "schedule": {"every": 1.0, "unit": "days"}, "streak": 5}]
            """
        #expect(try kvctl(sandbox, "set", "com.example.habits", "Habits", "--json", list).status == 0)
        let original = try stored(sandbox)
        let shown = try habits(sandbox, "list", "--json")
        #expect(shown.status == 0 && shown.stdout.contains("Dishes"))
        #expect(
            shown.stderr.contains("stored habit #1 holds something this version of habits does not read ($[0].streak"),
            "\(shown.stderr)")
        let done = try habits(sandbox, "done", "Dishes")
        #expect(
            done.status == 1 && done.stderr.contains("habits will not rewrite the stored list")
                && done.stderr.contains("$[0].streak"), "\(done.stderr)")
        #expect(try stored(sandbox) == original)
        daemon.stop()
    }

    @Test func presetsStayInCodeUntilAddedAndErrorsArePlainSentences() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let presets = try habits(sandbox, "presets")
        #expect(presets.status == 0 && presets.stdout.contains("Drink water"))
        let empty = try habits(sandbox, "list")
        #expect(empty.status == 0 && empty.stdout.contains("No habits yet"))
        #expect(
            try kvctl(sandbox, "domains").stdout.contains("com.example.habits") == false,
            "nothing written by reading or listing presets")

        #expect(try habits(sandbox, "add", "--preset", "drink", "water").status == 0)
        #expect(try habits(sandbox, "add", "Floss", "--every", "0.5").status == 0)
        #expect(try kvctl(sandbox, "keys", "com.example.habits").stdout == "Habits\n")
        let list = try listJSON(sandbox)
        #expect(list.map { $0["name"] as? String } == ["Drink water", "Floss"])
        #expect(list.map { $0["everyDays"] as? Double } == [2.0 / 24, 0.5])
        #expect(list[0]["preset"] as? String == "Drink water")

        let duplicate = try habits(sandbox, "add", "floss")
        #expect(duplicate.status == 1 && duplicate.stderr.contains("already a habit named \"Floss\""))
        let unknown = try habits(sandbox, "done", "Flos")
        #expect(unknown.status == 1 && unknown.stderr == "habits: no habit named \"Flos\"; did you mean \"Floss\"?\n")
        let usage = try habits(sandbox, "done")
        #expect(usage.status == 2 && usage.stderr.contains("usage: habits"))
        let table = try habits(sandbox, "list")
        #expect(
            table.status == 0 && table.stdout.contains("●  Drink water") && !table.stdout.contains("\u{1B}["),
            "no colour off a terminal")
        #expect(try habits(sandbox, "remove", "Floss").status == 0)
        #expect(try listJSON(sandbox).count == 1)
        daemon.stop()

        let down = try habits(sandbox, "list")
        #expect(down.status == 1 && down.stderr.contains("cannot reach kvd at \(sandbox.socket)"), "\(down.stderr)")
    }

    /// Seconds since 2001 of an RFC 3339 text such as `2022-10-19T23:50:40.08548605442047119Z`,
    /// with all its fraction digits.
    static func seconds(_ text: Any?) -> Double? {
        guard let text = text as? String, text.hasSuffix("Z"), let dot = text.firstIndex(of: ".") else { return nil }
        let formatter = ISO8601DateFormatter()
        guard let whole = formatter.date(from: String(text[..<dot]) + "Z"),
            let fraction = Double("0" + text[dot...].dropLast())
        else { return nil }
        return whole.timeIntervalSinceReferenceDate + fraction
    }
}
