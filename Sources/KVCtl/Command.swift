import KVValues

/// A failure outside kvctl (not found, kvd unreachable, a file unreadable): exit status 1
/// (`apply --check`: 1 means "would change", a failure is 3).
public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// The exit status.
    public var status: Int32 = 1

    public init(_ message: String) {
        self.message = message
    }

    public init(_ message: String, status: Int32) {
        self.message = message
        self.status = status
    }

    public var description: String { message }
}

/// Options before the command: `[--socket PATH] [--system] [--json] [--no-autostart] [--null]`.
public struct GlobalOptions: Sendable, Equatable {
    public var socket: String?
    /// `--system`: talk to the system instance (`kvd --system`), which is never autostarted.
    public var system = false
    public var json = false
    public var autostart = true
    /// `--null`: `domains` and `keys` print each name exactly as stored followed by a NUL byte,
    /// for programs (the completion scripts) that must not guess at escapes.
    public var null = false

    public init(
        socket: String? = nil, system: Bool = false, json: Bool = false, autostart: Bool = true, null: Bool = false
    ) {
        self.socket = socket
        self.system = system
        self.json = json
        self.autostart = autostart
        self.null = null
    }
}

/// One kvctl command with its arguments validated.
public enum Command: Sendable, Equatable {
    case get(Domain, Key?)
    /// `get DOMAIN KEY --effective`: the value in effect; with `--system`, the admins' value,
    /// else the drop-in files' (for everyone); a user's `get` already gives the value in effect.
    case getEffective(Domain, Key)
    case set(Domain, Key, ValueSpec)
    case delete(Domain, Key?)
    case domains
    case keys(Domain)
    case readType(Domain, Key)
    case rename(Domain, Key, Key)
    /// `export DOMAIN FILE|- [--effective]`: the user's own values (with `effective`, the
    /// values as the layers combine: system defaults and locked values too).
    case export(Domain, String, effective: Bool = false)
    case `import`(Domain, String)
    case watch(Domain, Key?)
    /// `source DOMAIN KEY`: where the value comes from (user, system, locked).
    case source(Domain, Key)
    /// `--system lock DOMAIN KEY`.
    case lock(Domain, Key)
    /// `--system unlock DOMAIN KEY`.
    case unlock(Domain, Key)
    /// `--system locks [DOMAIN]`.
    case locks(Domain?)
    /// `--system status`: the system instance's revision, domains and fleet mirror.
    case status
    /// `--system reload`: the system instance reads its drop-in files again.
    case reload
    /// `--system gnome enable|disable|status`: the machine's switch between dconf and kvd for
    /// GSettings apps (``GnomeSwitch``).
    case gnome(GnomeAction)
    /// `apply FILE|- [--check] [--diff] [--prune]`: domains made to hold what FILE says.
    case apply(String, check: Bool, diff: Bool, prune: Bool)
    /// `history DOMAIN [KEY] [--limit N] [--json]`.
    case history(Domain, Key?, limit: Int?, json: Bool)
    /// `blame DOMAIN [KEY]`: who set each current value.
    case blame(Domain, Key?)
    /// `permit APPID PATTERN [--read-only]`: grants a sandboxed app more domains.
    case permit(Permit)
    /// `permit --revoke APPID PATTERN`: takes a grant back.
    case revoke(AppID, DomainPattern)
    /// `permits [APPID]`: the grants, one a line.
    case permits(AppID?)
    /// `history --forget DOMAIN [KEY]`: the past values removed from every file kvd keeps.
    case forgetHistory(Domain, Key?)
    /// `history --keep-none DOMAIN [KEY]` (keep false) and `history --keep DOMAIN [KEY]`.
    case keepHistory(Domain, Key?, keep: Bool)
    /// `restore DOMAIN [KEY] --revision N`: the key, or the whole domain, as it was after N.
    case restore(Domain, Key?, revision: Int64)
    /// `backup FILE|-`: every domain at one revision, as one typed JSON file.
    case backup(String)
    /// `restore-backup FILE|- [--yes]`: each domain of a backup put back, atomically.
    case restoreBackup(String, yes: Bool)
    /// `help [COMMAND]`, `--help`, `COMMAND --help`.
    case help(String?)
    /// `--version`: prints `kvctl VERSION`.
    case version
    /// `completion bash|zsh|fish`: prints the shell's completion script.
    case completion(Shell)
    /// `export DOMAIN FILE --format xml|binary [--effective]` (`--format json` is ``export(_:_:effective:)``).
    case exportPlist(Domain, String, PlistFormat, effective: Bool = false)
}

extension Command {
    /// Whether the command exists only on the system instance (`kvctl --system ...`).
    var needsSystem: Bool {
        switch self {
        case .lock, .unlock, .locks, .status, .reload, .gnome: true
        default: false
        }
    }
}

/// The parsed command line.
public struct Invocation: Sendable, Equatable {
    public var options: GlobalOptions
    public var command: Command
}

extension Invocation {
    /// Parses kvctl's arguments (without the program name). A usage error carries the command
    /// name it concerns (for the usage line), if known.
    public static func parse(_ arguments: [String]) throws(CommandLineError) -> Invocation {
        var options = GlobalOptions()
        var rest = arguments[...]
        if let early = try readOptions(from: &rest, into: &options) {
            return Invocation(options: options, command: early)
        }
        guard let name = rest.popFirst() else { throw CommandLineError(command: nil, UsageError("missing COMMAND")) }
        guard let canonical = Help.canonicalName(name) else {
            throw CommandLineError(command: nil, UsageError("unknown command \"\(name)\""))
        }
        if rest.first == "--help" || rest.first == "-h" {
            return Invocation(options: options, command: .help(canonical))
        }
        do throws(UsageError) {
            let command = try parseCommand(canonical, Array(rest))
            if command.needsSystem, !options.system {
                throw UsageError(
                    "\(canonical) works on the system instance only: kvctl --system \(Help.entry(canonical)?.usage ?? canonical)"
                )
            }
            return Invocation(options: options, command: command)
        } catch {
            throw CommandLineError(command: canonical, error)
        }
    }

    /// Takes the options before the command off the front of `rest`; returns the command of a
    /// `--help` or `--version` among them (which ends the parse).
    private static func readOptions(
        from rest: inout ArraySlice<String>, into options: inout GlobalOptions
    ) throws(CommandLineError) -> Command? {
        while let option = rest.first, option.hasPrefix("-") {
            rest.removeFirst()
            switch option {
            case "--socket":
                guard let path = rest.popFirst() else {
                    throw CommandLineError(command: nil, UsageError("--socket needs a PATH"))
                }
                options.socket = try socketPath(path)
            case "--system": options.system = true
            case "--json": options.json = true
            case "--no-autostart": options.autostart = false
            case "--null": options.null = true
            case "--help", "-h": return .help(nil)
            case "--version": return .version
            default:
                guard option.hasPrefix("--socket=") else {
                    throw CommandLineError(command: nil, UsageError("unknown option \(option)"))
                }
                options.socket = try socketPath(String(option.dropFirst("--socket=".count)))
            }
        }
        return nil
    }

    /// The value of `--socket`: an empty one (a script's unset variable) is a usage error, not
    /// the default socket.
    private static func socketPath(_ value: String) throws(CommandLineError) -> String {
        guard !value.isEmpty else {
            throw CommandLineError(
                command: nil, UsageError("--socket needs a PATH, not an empty value (is a variable unset?)"))
        }
        return value
    }

    static func parseCommand(_ name: String, _ arguments: [String]) throws(UsageError) -> Command {
        var reader = ArgumentReader(arguments)
        let command: Command
        switch name {
        case "get": command = try parseGet(&reader)
        case "set":
            let domain = try reader.domain()
            let key = try reader.key()
            return .set(domain, key, try ValueParser.parse(reader.remaining()))
        case "delete": command = .delete(try reader.domain(), try reader.optionalKey())
        case "domains": command = .domains
        case "keys": command = .keys(try reader.domain())
        case "read-type": command = .readType(try reader.domain(), try reader.key())
        case "rename": command = .rename(try reader.domain(), try reader.key("OLD"), try reader.key("NEW"))
        case "export": command = try parseExport(&reader)
        case "import": command = .import(try reader.domain(), try reader.word("FILE"))
        case "watch": command = .watch(try reader.domain(), try reader.optionalKey())
        case "blame": command = .blame(try reader.domain(), try reader.optionalKey())
        case "source": command = .source(try reader.domain(), try reader.key())
        case "lock": command = .lock(try reader.domain(), try reader.key())
        case "unlock": command = .unlock(try reader.domain(), try reader.key())
        case "locks": command = .locks(try reader.optionalDomain())
        case "status": command = .status
        case "reload": command = .reload
        case "gnome":
            let word = try reader.word("enable|disable|status")
            guard let action = GnomeAction(rawValue: word) else {
                throw UsageError("gnome takes enable, disable or status, not \"\(word)\"")
            }
            command = .gnome(action)
        case "apply": return try parseApply(reader.remaining())
        case "history", "restore": command = try parseHistoryCommand(name, &reader)
        case "permit", "permits": command = try parsePermitCommand(name, &reader)
        case "backup", "restore-backup": command = try parseBackupCommand(name, &reader)
        case "completion": command = try parseCompletion(&reader)
        case "help": command = try parseHelp(&reader)
        default: throw UsageError("unknown command \"\(name)\"")
        }
        try reader.end()
        return command
    }

    /// `get DOMAIN [KEY [--effective]]`.
    private static func parseGet(_ reader: inout ArgumentReader) throws(UsageError) -> Command {
        let domain = try reader.domain()
        guard let key = try reader.optionalKey() else { return .get(domain, nil) }
        if key.name == "--effective" {  // a flag where the key goes, not a key
            throw UsageError(
                "get DOMAIN --effective needs a KEY (get DOMAIN KEY --effective); the whole domain in effect: kvctl export DOMAIN - --effective"
            )
        }
        let rest = reader.remaining()
        if rest == ["--effective"] { return .getEffective(domain, key) }
        try ArgumentReader(rest).end()
        return .get(domain, key)
    }

    /// `apply FILE [--check] [--diff] [--prune]`, the flags anywhere among the words.
    private static func parseApply(_ words: [String]) throws(UsageError) -> Command {
        var words = words
        let flags = ["--check", "--diff", "--prune"]
        let given = Set(words.filter(flags.contains))
        words.removeAll(where: flags.contains)
        if let option = words.first(where: { $0.hasPrefix("--") }) {
            throw UsageError("unknown option \(option) for apply")
        }
        var positional = ArgumentReader(words)
        let file = try positional.word("FILE")
        try positional.end()
        return .apply(
            file, check: given.contains("--check"), diff: given.contains("--diff"), prune: given.contains("--prune"))
    }

    /// `export DOMAIN FILE [--format xml|binary] [--effective]`.
    private static func parseExport(_ reader: inout ArgumentReader) throws(UsageError) -> Command {
        let (domain, file) = (try reader.domain(), try reader.word("FILE"))
        let (format, effective) = try reader.exportOptions()
        switch format {
        case nil: return .export(domain, file, effective: effective)
        case let format?: return .exportPlist(domain, file, format, effective: effective)
        }
    }

    /// `completion bash|zsh|fish`.
    private static func parseCompletion(_ reader: inout ArgumentReader) throws(UsageError) -> Command {
        let name = try reader.word("SHELL")
        guard let shell = Shell(rawValue: name) else {
            throw UsageError("no completion for the shell \"\(name)\": kvctl completion bash|zsh|fish")
        }
        return .completion(shell)
    }

    /// `help [COMMAND]`.
    private static func parseHelp(_ reader: inout ArgumentReader) throws(UsageError) -> Command {
        let topic = reader.optionalWord()
        if let topic, Help.canonicalName(topic) == nil { throw UsageError("no command \"\(topic)\" to explain") }
        return .help(topic.flatMap(Help.canonicalName))
    }
}

/// A usage error and the command it concerns.
public struct CommandLineError: Error, Sendable, Equatable {
    public var command: String?
    public var error: UsageError

    public init(command: String?, _ error: UsageError) {
        self.command = command
        self.error = error
    }
}

/// Takes a command's positional arguments one by one, validating names at the edge.
struct ArgumentReader {
    private let arguments: [String]
    private var index = 0

    init(_ arguments: [String]) {
        self.arguments = arguments
    }

    mutating func word(_ name: String) throws(UsageError) -> String {
        guard let word = optionalWord() else { throw UsageError("missing \(name)") }
        return word
    }

    mutating func optionalWord() -> String? {
        guard index < arguments.count else { return nil }
        index += 1
        return arguments[index - 1]
    }

    /// A domain; `-g` (or `-globalDomain`) stands for `NSGlobalDomain`.
    mutating func domain() throws(UsageError) -> Domain {
        let name = try word("DOMAIN")
        if name == "-g" || name == "-globalDomain" { return .global }
        do { return try Domain(validating: name) } catch { throw UsageError(error.description) }
    }

    mutating func optionalDomain() throws(UsageError) -> Domain? {
        guard index < arguments.count else { return nil }
        return try domain()
    }

    mutating func key(_ name: String = "KEY") throws(UsageError) -> Key {
        try Self.key(try word(name))
    }

    mutating func optionalKey() throws(UsageError) -> Key? {
        guard let name = optionalWord() else { return nil }
        return try Self.key(name)
    }

    static func key(_ name: String) throws(UsageError) -> Key {
        do { return try Key(validating: name) } catch { throw UsageError(error.description) }
    }

    /// `export`'s options after FILE, in any order: `--format json|xml|binary` (`nil` for JSON)
    /// and `--effective`.
    mutating func exportOptions() throws(UsageError) -> (format: PlistFormat?, effective: Bool) {
        var format: PlistFormat?
        var effective = false
        while let flag = optionalWord() {
            switch flag {
            case "--effective": effective = true
            case "--format":
                let name = try word("FORMAT after --format")
                guard name == "json" || PlistFormat(rawValue: name) != nil else {
                    throw UsageError("unknown format \"\(name)\": use --format json, xml or binary")
                }
                format = PlistFormat(rawValue: name)
            default:
                throw UsageError(
                    "unexpected argument: \(flag) (export takes --format json|xml|binary and --effective after FILE)")
            }
        }
        return (format, effective)
    }

    mutating func remaining() -> [String] {
        defer { index = arguments.count }
        return Array(arguments[index...])
    }

    func end() throws(UsageError) {
        guard index == arguments.count else {
            throw UsageError(
                "unexpected argument\(arguments.count - index > 1 ? "s" : ""): \(arguments[index...].joined(separator: " "))"
            )
        }
    }
}
