import KVValues
import Testing

@testable import KVCtl

/// `kvctl completion SHELL`: parsing, and the scripts' tables derived from kvctl's own (the
/// end-to-end CompletionTests run the scripts in real shells against a real kvd).
@Suite struct CompletionScriptTests {
    @Test func completionTakesOneKnownShell() throws {
        #expect(try Invocation.parse(["completion", "zsh"]).command == .completion(.zsh))
        #expect(throws: CommandLineError.self) { try Invocation.parse(["completion", "tcsh"]) }
        #expect(throws: CommandLineError.self) { try Invocation.parse(["completion"]) }
        do {
            _ = try Invocation.parse(["completion", "tcsh"])
        } catch {
            #expect(
                error.error.message.contains("tcsh") && error.error.message.contains("bash|zsh|fish"),
                "\(error.error.message)")
        }
    }

    @Test func slotsComeFromTheUsageLines() throws {
        let slots = { (name: String) in Help.entry(name).map(Completion.slots(of:)) }
        #expect(slots("get") == [.domain, .key, .words(["--effective"])])
        #expect(slots("set") == [.domain, .key, .value, .value])
        #expect(slots("rename") == [.domain, .key, .key])
        #expect(
            slots("export") == [
                .domain, .file, .words(["--format"]), .words(["json", "xml", "binary"]), .words(["--effective"]),
            ])
        #expect(slots("help") == [.command])
        #expect(slots("completion") == [.words(["bash", "zsh", "fish"])])
    }

    @Test func everyScriptNamesEveryCommandAliasAndFlag() throws {
        for shell in Shell.allCases {
            let script = Completion.script(for: shell)
            for word in Completion.commandNames + Completion.globalOptions + Completion.typeFlags {
                #expect(script.contains(" \(word)"), "\(shell) script lacks \(word)")
            }
        }
        #expect(Completion.typeFlags.contains("-integer") && Completion.commandNames.contains("write"))
    }

    /// `--null`, which the scripts read names with: each name exactly as stored, then a NUL.
    @Test func nullListsNamesExactlyEachEndedByANul() throws {
        #expect(try Invocation.parse(["--null", "keys", "com.a"]).options.null)
        #expect(try !Invocation.parse(["keys", "com.a"]).options.null)
        #expect(
            Format.names(["back\\slash", "new\nline", "tab\tthere"], json: false, null: true)
                == "back\\slash\u{0}new\nline\u{0}tab\tthere\u{0}")
        #expect(Format.names([], json: false, null: true) == "")
        for shell in Shell.allCases {
            #expect(Completion.script(for: shell).contains("--null keys"), "\(shell) reads keys without --null")
        }
    }
}
