import Foundation
import Testing

/// Completion of names that need quoting, in real interactive bash, zsh and fish: whatever the user
/// typed of the word (unquoted, in single or double quotes, backslash-escaped, `$'...'`), Tab
/// completes it to a word the shell passes to kvctl as exactly the key.
@Suite struct CompletionQuotingTests {
    /// A key and one way a user may have begun typing it.
    struct Typed: Sendable, CustomTestStringConvertible {
        var shell: String
        var typed: String
        var key: String
        var testDescription: String { "\(shell): \(typed.debugDescription) completes to \(key.debugDescription)" }
    }

    /// The keys, each with the beginnings a user may type in every shell; `$'...'` (bash's and
    /// zsh's quoting) and the key with a TAB are in ``bashAndZsh`` and ``bashOnly``.
    static let everywhere: [(key: String, typed: [String])] = [
        ("back\\slash", ["back", "back\\\\", "'back", "\"back\\\\"]),
        ("new\nline", ["new", "'new", "\"new"]),
        ("has space", ["has", "has\\ s", "'has", "\"has", "'has s'"]),
        ("quote'", ["quote", "quote\\'", "'quote", "\"quote"]),
        ("$(touch evaluated)", ["\\$\\(to", "'$(to", "\"\\$(to"]),
        ("x=y", ["x="]),
        ("a:b", ["a:"]),
        ("bang!", ["bang", "'bang", "\"bang"]),
        ("dq\"x", ["dq", "'dq", "\"dq"]),
    ]
    /// fish reads a TAB in a completion as the start of its description: it cannot offer such
    /// a key (the script leaves it out), and fish has no `$'...'`.
    static let bashAndZsh: [(key: String, typed: [String])] = [
        ("tab\tthere", ["tab", "'tab"]), ("quote'", ["$'quote"]), ("has space", ["$'has"]),
    ]
    /// zsh's completion matches nothing after an escape inside an open `$'` (its PREFIX holds
    /// the backslash doubled).
    static let bashOnly: [(key: String, typed: [String])] = [("new\nline", ["$'new\\nl"])]

    static func cases(_ shell: String) -> [Typed] {
        let lists =
            shell == "bash" ? everywhere + bashAndZsh + bashOnly : shell == "zsh" ? everywhere + bashAndZsh : everywhere
        return lists.flatMap { entry in entry.typed.map { Typed(shell: shell, typed: $0, key: entry.key) } }
    }

    /// Completes `typed.typed` after `kvctl get DOMAIN` in a shell on a terminal and checks the
    /// words the shell then passes kvctl.
    private static func check(_ typed: Typed) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let domain = "com.example.quoting"
        for entry in everywhere + bashAndZsh {
            #expect(try kvctl(sandbox, "set", domain, entry.key, "v").status == 0)
        }
        let shell = InteractiveShell(shell: typed.shell, sandbox: sandbox)
        let passed = try shell.complete("kvctl --socket \(sandbox.socket) get \(domain) \(typed.typed)")
        #expect(passed == ["--socket", sandbox.socket, "get", domain, typed.key])
        #expect(!FileManager.default.fileExists(atPath: sandbox.root + "/evaluated"), "a key name was run as a command")
        daemon.stop()
    }

    @Test(arguments: cases("bash")) func bashCompletesToTheExactKey(_ typed: Typed) throws { try Self.check(typed) }
    @Test(arguments: cases("zsh")) func zshCompletesToTheExactKey(_ typed: Typed) throws { try Self.check(typed) }
    @Test(arguments: cases("fish")) func fishCompletesToTheExactKey(_ typed: Typed) throws { try Self.check(typed) }

    /// A quoted domain is read as the shell passes it, and a domain completes inside quotes.
    @Test(arguments: ["bash", "zsh", "fish"]) func quotedDomainsComplete(_ shell: String) throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        #expect(try kvctl(sandbox, "set", "com.example.quoting", "has space", "v").status == 0)
        let session = InteractiveShell(shell: shell, sandbox: sandbox)
        #expect(
            try session.complete("kvctl --socket \(sandbox.socket) get 'com.example.q") == [
                "--socket", sandbox.socket, "get", "com.example.quoting",
            ])
        #expect(
            try session.complete("kvctl --socket \(sandbox.socket) get \"com.example.quoting\" 'has")
                == ["--socket", sandbox.socket, "get", "com.example.quoting", "has space"])
        daemon.stop()
    }
}
