/// A parsed command line: `habits [--socket PATH] COMMAND [ARGUMENTS]`.
public struct Invocation: Equatable, Sendable {
    public enum Command: Equatable, Sendable {
        case list(json: Bool)
        case add(name: String, every: Schedule?)
        case addPreset(String, every: Schedule?)
        case done(String)
        case remove(String)
        case presets
        case help
        /// `--version`: prints `habits VERSION`.
        case version
    }

    public var socket: String?
    public var command: Command

    public static let usage =
        "usage: habits [--socket PATH] list [--json] | add NAME [--every DAYS] | add --preset NAME | done NAME | remove NAME | presets | help"

    /// Parses the arguments after the program name. Options may come anywhere; `--` ends them.
    public static func parse(_ arguments: [String]) throws(HabitsError) -> Invocation {
        let given = try Given(arguments)
        if given.flags.contains("--help") || given.words.first == "help" {
            return Invocation(socket: given.socket, command: .help)
        }
        if given.flags.contains("--version") { return Invocation(socket: given.socket, command: .version) }
        return Invocation(socket: given.socket, command: try given.command())
    }

    /// The options and words of a command line, before they make a command.
    struct Given {
        var socket: String?
        var words: [String] = []
        var flags: Set<String> = []
        var every: String?

        init(_ arguments: [String]) throws(HabitsError) {
            var rest = arguments[...]
            func value(_ option: String) throws(HabitsError) -> String {
                guard let next = rest.popFirst() else { throw .usage("\(option) needs a value") }
                return next
            }
            while let argument = rest.popFirst() {
                switch argument {
                case "--":
                    words += rest
                    rest = []
                case "--socket": socket = try Self.socketPath(try value(argument))
                case "--every": every = try value(argument)
                case "--json", "--preset", "--help", "-h", "--version":
                    flags.insert(argument == "-h" ? "--help" : argument)
                case _ where argument.hasPrefix("--socket="):
                    socket = try Self.socketPath(String(argument.dropFirst("--socket=".count)))
                case _ where argument.hasPrefix("--every="): every = String(argument.dropFirst("--every=".count))
                case _ where argument.hasPrefix("-") && argument.count > 1 && Double(argument) == nil:
                    throw .usage("unknown option \(argument)")
                default: words.append(argument)
                }
            }
        }

        static func socketPath(_ value: String) throws(HabitsError) -> String {
            guard !value.isEmpty else {
                throw .usage("--socket needs a PATH, not an empty value (is a variable unset?)")
            }
            return value
        }

        /// The command the words name, with the options it takes and no other.
        func command() throws(HabitsError) -> Command {
            guard let verb = words.first else { throw .usage("no command given") }
            let name = words.dropFirst().joined(separator: " ")
            func allowOnly(_ allowed: Set<String>) throws(HabitsError) {
                if let extra = flags.subtracting(allowed).sorted().first {
                    throw .usage("\(verb) does not take \(extra)")
                }
                if every != nil, !allowed.contains("--every") { throw .usage("\(verb) does not take --every") }
            }
            func needName() throws(HabitsError) -> String {
                guard !NameMatch.trimmed(name).isEmpty else { throw .usage("\(verb) needs the habit's NAME") }
                return name
            }
            switch verb {
            case "list", "ls":
                try allowOnly(["--json"])
                guard name.isEmpty else { throw .usage("list takes no NAME") }
                return .list(json: flags.contains("--json"))
            case "add":
                try allowOnly(["--every", "--preset"])
                let schedule = try Self.schedule(every)
                return flags.contains("--preset")
                    ? .addPreset(try needName(), every: schedule) : .add(name: try needName(), every: schedule)
            case "done":
                try allowOnly([])
                return .done(try needName())
            case "remove", "rm":
                try allowOnly([])
                return .remove(try needName())
            case "presets":
                try allowOnly([])
                return .presets
            default:
                throw .usage("unknown command \"\(verb)\"")
            }
        }

        /// `--every`'s schedule; `nil` when not given.
        static func schedule(_ every: String?) throws(HabitsError) -> Schedule? {
            guard let every else { return nil }
            guard let parsed = Schedule(parsing: every) else {
                throw .usage(
                    "--every needs a positive number of days up to 36525 (1, 0.5, 7) or a length such as 12h, 3d, 2w or 90m, not \"\(every)\""
                )
            }
            return parsed
        }
    }

    public static let help = """
        usage: habits [--socket PATH] COMMAND

        A habit tracker kept in kvd (domain com.example.habits, key Habits).

        commands:
          list [--json]              each habit, how long since it was done, and when it is due
          add NAME [--every DAYS]    add a habit due every DAYS days (default 1); DAYS may also
                                     be a length: 90m, 12h, 3d, 2w
          add --preset NAME [--every DAYS]
                                     add one of the built-in suggestions
          done NAME                  mark a habit done now
          remove NAME                remove a habit
          presets                    list the built-in suggestions
          help                       this text
          --version                  print the version

        NAME may be several words, and matches ignoring case and surrounding spaces.
        Markers: ● just done, then ◕ ◑ ◔ as the interval runs out, ○ due.
        Colour only on a terminal; set NO_COLOR to turn it off.
        The socket: --socket PATH, else $KVD_SOCKET, else $XDG_RUNTIME_DIR/kvd.sock, else
        /tmp/kvd-UID/kvd.sock. kvd is started from beside habits if nothing listens
        (KVD_NO_AUTOSTART=1 turns that off).
        Exit status: 0 done; 1 a failure (unknown habit, kvd unreachable, ...); 2 wrong usage.

        """
}
