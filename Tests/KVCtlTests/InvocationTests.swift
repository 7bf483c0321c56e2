import KVValues
import Testing

@testable import KVCtl

@Suite struct InvocationTests {
    let domain = try! Domain(validating: "com.a")
    let key = try! Key(validating: "k")

    @Test func globalOptionsComeBeforeTheCommand() throws {
        let invocation = try Invocation.parse(["--socket", "/s.sock", "--json", "--no-autostart", "domains"])
        #expect(invocation.options == GlobalOptions(socket: "/s.sock", json: true, autostart: false))
        #expect(invocation.command == .domains)
        #expect(try Invocation.parse(["--socket=/t.sock", "domains"]).options.socket == "/t.sock")
    }

    @Test func aliasesAndGlobalDomain() throws {
        #expect(try Invocation.parse(["read", "com.a", "k"]).command == .get(domain, key))
        #expect(try Invocation.parse(["get", "-g"]).command == .get(.global, nil))
        #expect(
            try Invocation.parse(["write", "-g", "k", "-int", "1"]).command == .set(.global, key, .replace(.integer(1)))
        )
    }

    @Test func everyCommandParses() throws {
        let new = try Key(validating: "n")
        #expect(try Invocation.parse(["delete", "com.a"]).command == .delete(domain, nil))
        #expect(try Invocation.parse(["delete", "com.a", "k"]).command == .delete(domain, key))
        #expect(try Invocation.parse(["keys", "com.a"]).command == .keys(domain))
        #expect(try Invocation.parse(["read-type", "com.a", "k"]).command == .readType(domain, key))
        #expect(try Invocation.parse(["rename", "com.a", "k", "n"]).command == .rename(domain, key, new))
        #expect(try Invocation.parse(["export", "com.a", "-"]).command == .export(domain, "-"))
        #expect(try Invocation.parse(["import", "com.a", "f.json"]).command == .import(domain, "f.json"))
        #expect(try Invocation.parse(["watch", "com.a"]).command == .watch(domain, nil))
        #expect(try Invocation.parse(["set", "com.a", "k", "v"]).command == .set(domain, key, .replace(.string("v"))))
        #expect(try Invocation.parse(["source", "com.a", "k"]).command == .source(domain, key))
        let system = try Invocation.parse(["--system", "locks"])
        #expect(system.options == GlobalOptions(system: true) && system.command == .locks(nil))
        #expect(try Invocation.parse(["--system", "locks", "com.a"]).command == .locks(domain))
        #expect(try Invocation.parse(["--system", "lock", "com.a", "k"]).command == .lock(domain, key))
        #expect(try Invocation.parse(["--system", "unlock", "com.a", "k"]).command == .unlock(domain, key))
        for action in GnomeAction.allCases {
            #expect(try Invocation.parse(["--system", "gnome", action.rawValue]).command == .gnome(action))
        }
    }

    @Test func theGnomeSwitchIsTheSystemsAndTakesOneAction() {
        for arguments in [
            ["gnome", "enable"], ["--system", "gnome"], ["--system", "gnome", "on"],
            ["--system", "gnome", "enable", "now"],
        ] {
            #expect(throws: CommandLineError.self) { try Invocation.parse(arguments) }
        }
    }

    @Test func historyForgetsAndMarks() throws {
        #expect(try Invocation.parse(["history", "--forget", "com.a", "k"]).command == .forgetHistory(domain, key))
        #expect(try Invocation.parse(["history", "com.a", "--forget"]).command == .forgetHistory(domain, nil))
        #expect(
            try Invocation.parse(["history", "--keep-none", "com.a", "k"]).command
                == .keepHistory(domain, key, keep: false))
        #expect(try Invocation.parse(["history", "--keep", "com.a"]).command == .keepHistory(domain, nil, keep: true))
        #expect(throws: CommandLineError.self) {
            try Invocation.parse(["history", "--forget", "--keep-none", "com.a"])
        }
        #expect(throws: CommandLineError.self) {
            try Invocation.parse(["history", "--forget", "com.a", "--limit", "3"])
        }
        #expect(throws: CommandLineError.self) { try Invocation.parse(["restore", "--forget", "com.a"]) }
    }

    @Test func helpHasFourSpellings() throws {
        #expect(try Invocation.parse(["--help"]).command == .help(nil))
        #expect(try Invocation.parse(["help"]).command == .help(nil))
        #expect(try Invocation.parse(["help", "write"]).command == .help("set"))
        #expect(try Invocation.parse(["rename", "--help"]).command == .help("rename"))
    }

    @Test(
        arguments: [
            ([], nil, "missing COMMAND"),
            (["--bogus", "domains"], nil, "unknown option --bogus"),
            (["--socket"], nil, "--socket needs a PATH"),
            (["--socket=", "domains"], nil, "--socket needs a PATH, not an empty value"),
            (["--socket", "", "domains"], nil, "--socket needs a PATH, not an empty value"),
            (["frobnicate"], nil, "unknown command \"frobnicate\""),
            (["get"], "get", "missing DOMAIN"),
            (["get", "a/b"], "get", "a domain name may hold only"),
            (["get", ".a"], "get", "must not start with '.' or '-'"),
            (["set", "com.a"], "set", "missing KEY"),
            (["set", "com.a", "k"], "set", "missing VALUE"),
            (["domains", "extra"], "domains", "unexpected argument: extra"),
            (["rename", "com.a", "k"], "rename", "missing NEW"),
            (["export", "com.a"], "export", "missing FILE"),
            (["help", "nope"], "help", "no command \"nope\""),
        ] as [([String], String?, String)])
    func usageErrorsNameTheCommandAndTheProblem(arguments: [String], command: String?, expected: String) {
        let error = #expect(throws: CommandLineError.self) { try Invocation.parse(arguments) }
        #expect(error?.command == command)
        #expect(error?.error.message.contains(expected) == true, "\(error?.error.message ?? "no error")")
    }
}
