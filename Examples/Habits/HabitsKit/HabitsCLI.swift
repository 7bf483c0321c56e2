import FoundationEssentials
import Glibc
import KVClient
import KVProtocol
import KVSystem

/// Where habits writes: standard output and standard error, replaceable in tests.
public protocol HabitsConsole: AnyObject {
    func out(_ text: String)
    func err(_ text: String)
}

/// The process's standard streams.
public final class StandardConsole: HabitsConsole {
    public init() {}
    public func out(_ text: String) { Self.write(1, text) }
    public func err(_ text: String) { Self.write(2, text) }

    private static func write(_ descriptor: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try LinuxSystem().writeAll(descriptor, raw) }
        }
    }
}

/// habits: all its logic; the `habits` executable only calls ``main(arguments:environment:console:colour:now:)``.
public enum HabitsCLI {
    /// Runs habits with `arguments` (without the program name); returns the exit status: 0 done,
    /// 1 a failure, 2 wrong usage.
    public static func main(
        arguments: [String], environment: [String: String], console: any HabitsConsole, colour: Bool,
        now: () -> Date = { Date() }
    ) -> Int32 {
        do throws(HabitsError) {
            let invocation = try Invocation.parse(arguments)
            try run(invocation, environment: environment, console: console, colour: colour, now: now)
            return 0
        } catch {
            switch error {
            case .usage(let message):
                console.err("habits: \(message)\n\(Invocation.usage)\n")
                return 2
            case .failure(let message):
                console.err("habits: \(message)\n")
                return 1
            }
        }
    }

    /// Whether to colour: only on a terminal, and not when `NO_COLOR` is set (to anything but
    /// the empty string) or `TERM` is `dumb`.
    public static func wantsColour(environment: [String: String], isTerminal: Bool) -> Bool {
        isTerminal && (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
    }

    /// The process's environment.
    public static func processEnvironment() -> [String: String] {
        ProcessEnvironment.current()
    }

    static func run(
        _ invocation: Invocation, environment: [String: String], console: any HabitsConsole, colour: Bool,
        now: () -> Date
    ) throws(HabitsError) {
        switch invocation.command {
        case .help:
            console.out(Invocation.help)
            return
        case .presets:
            console.out(ListFormat.presets(Preset.all))
            return
        case .version:
            console.out("habits \(KVDVersion.current)\n")
            return
        default:
            break
        }
        let store = HabitStore(socketPath: invocation.socket, environment: environment)
        let (loaded, warnings) = try store.load()
        for warning in warnings { console.err("habits: \(warning)\n") }
        var habits = loaded
        try perform(invocation.command, on: &habits, store, console: console, colour: colour, now: now)
    }

    /// The commands on the stored list of habits (`habits`, as loaded from `store`).
    private static func perform(
        _ command: Invocation.Command, on habits: inout [Habit], _ store: HabitStore, console: any HabitsConsole,
        colour: Bool, now: () -> Date
    ) throws(HabitsError) {
        switch command {
        case .list(let json):
            if json {
                console.out(ListFormat.json(habits))
            } else if habits.isEmpty {
                console.out(
                    "No habits yet. Add one with: habits add NAME [--every DAYS], or pick one from: habits presets\n")
            } else {
                console.out(ListFormat.table(habits, now: now(), colour: colour))
            }
        case .add(let name, let every):
            let habit = Habit(name: name, started: now(), schedule: every ?? Schedule(every: 1, unit: .days))
            try add(habit, to: &habits, store)
            console.out("Added \"\(habit.name)\", due \(habit.schedule.phrase).\n")
        case .addPreset(let presetName, let every):
            let preset = try preset(named: presetName)
            let habit = Habit(
                name: preset.name, started: now(), schedule: every ?? preset.schedule, preset: preset.name)
            try add(habit, to: &habits, store)
            console.out("Added \"\(habit.name)\", due \(habit.schedule.phrase).\n")
        case .done(let name):
            let index = try find(name, in: habits)
            habits[index].markDone(at: now())
            try store.save(habits)
            let habit = habits[index]
            console.out(
                "Done \"\(habit.name)\" (\(habit.timesDone) time\(habit.timesDone == 1 ? "" : "s")); due again in \(Span.text(habit.schedule.seconds)).\n"
            )
        case .remove(let name):
            let index = try find(name, in: habits)
            let removed = habits.remove(at: index)
            try store.save(habits)
            console.out(
                "Removed \"\(removed.name)\" (done \(removed.timesDone) time\(removed.timesDone == 1 ? "" : "s")).\n")
        case .presets, .help, .version:
            break
        }
    }

    /// The preset named `name`, or a failure that suggests the closest names.
    private static func preset(named name: String) throws(HabitsError) -> Preset {
        guard let preset = Preset.named(name) else {
            let close = NameMatch.suggestions(for: name, in: Preset.all.map(\.name))
            throw .failure(
                "no preset named \"\(name)\"\(didYouMean(close)) (the presets are listed by: habits presets)")
        }
        return preset
    }

    private static func add(_ habit: Habit, to habits: inout [Habit], _ store: HabitStore) throws(HabitsError) {
        if let existing = NameMatch.index(of: habit.name, in: habits.map(\.name)) {
            throw .failure(
                "there is already a habit named \"\(habits[existing].name)\" (mark it with: habits done \(habits[existing].name))"
            )
        }
        habits.append(habit)
        try store.save(habits)
    }

    /// The index of the habit called `name`, or a failure naming the close names.
    static func find(_ name: String, in habits: [Habit]) throws(HabitsError) -> Int {
        let names = habits.map(\.name)
        if let index = NameMatch.index(of: name, in: names) { return index }
        let close = NameMatch.suggestions(for: name, in: names)
        let hint =
            habits.isEmpty
            ? " (there are none yet; add one with: habits add NAME)"
            : close.isEmpty ? " (the habits are listed by: habits list)" : ""
        throw .failure("no habit named \"\(name)\"\(didYouMean(close))\(hint)")
    }

    static func didYouMean(_ names: [String]) -> String {
        guard !names.isEmpty else { return "" }
        let quoted = names.map { "\"\($0)\"" }
        let list = quoted.count == 1 ? quoted[0] : quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
        return "; did you mean \(list)?"
    }
}
