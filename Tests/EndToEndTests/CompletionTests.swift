import Foundation
import Glibc
import Testing

/// `kvctl completion bash|zsh|fish`: the real kvctl prints the script, a real shell loads it, and
/// completing asks a real running kvd for its domains and keys.
@Suite(.serialized) struct CompletionTests {
    /// Domains with a shared prefix, one that does not match, and a key with a space.
    private static func populate(_ sandbox: Sandbox) throws {
        for (domain, key) in [("com.example.one", "alpha"), ("com.example.two", "a key"), ("org.other", "k")] {
            #expect(try kvctl(sandbox, "set", domain, key, "v").status == 0)
        }
    }

    /// Saves kvctl's script for `shell` in the sandbox and returns its path.
    private static func script(_ shell: String, _ sandbox: Sandbox) throws -> String {
        let printed = try run(Binaries.kvctl, ["completion", shell])
        #expect(printed.status == 0 && printed.stderr.isEmpty, "\(printed.stderr)")
        let path = sandbox.root + "/completion." + shell
        try printed.stdout.write(toFile: path, atomically: false, encoding: .utf8)
        return path
    }

    /// Completes `line` (the words before the cursor, then the word being completed; none needs
    /// quoting) in bash with kvctl's script through its completion function, the way bash calls
    /// it on Tab; returns
    /// COMPREPLY, one a line. kvctl is found on PATH, as after installing; autostart is allowed,
    /// so a completion that started kvd would show.
    private static func bash(_ script: String, _ line: [String]) throws -> [String] {
        let words = line.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let program = """
            source \(script)
            [[ $(complete -p kvctl) == *"-F _kvctl"* ]] || { echo "kvctl has no completion function" >&2; exit 3; }
            COMP_WORDS=(\(words)); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
            _kvctl kvctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let shell = try run(
            "/bin/bash", ["-c", program],
            environment: ["PATH": Binaries.directory + ":/usr/bin:/bin", "KVD_NO_AUTOSTART": "0"])
        #expect(shell.status == 0 && shell.stderr.isEmpty, "bash: \(shell.stderr)")
        return shell.stdout.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesTheDomainsOfTheRunningKvd() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        try Self.populate(sandbox)
        let script = try Self.script("bash", sandbox)
        #expect(
            try Self.bash(script, ["kvctl", "--socket", sandbox.socket, "get", "com.ex"]) == [
                "com.example.one", "com.example.two",
            ])
        #expect(try Self.bash(script, ["kvctl", "--socket=" + sandbox.socket, "read", "o"]) == ["org.other"])
        // A key with a space comes back quoted for the command line.
        #expect(
            try Self.bash(script, ["kvctl", "--socket", sandbox.socket, "get", "com.example.two", ""]) == ["a\\ key"])
        #expect(try Self.bash(script, ["kvctl", "--socket", sandbox.socket, "g"]) == ["get", "gnome"])
        #expect(try Self.bash(script, ["kvctl", "--no"]) == ["--no-autostart"])
        #expect(try Self.bash(script, ["kvctl", "set", "d", "k", "-arr"]) == ["-array", "-array-add"])
        #expect(try Self.bash(script, ["kvctl", "completion", "f"]) == ["fish"])
        #expect(try Self.bash(script, ["kvctl", "export", "d", "f", "--f"]) == ["--format"])
        #expect(try Self.bash(script, ["kvctl", "export", "d", "f", "--format", "b"]) == ["binary"])
        daemon.stop()
    }

    @Test func bashCompletionNeverStartsKvdAndStaysQuiet() throws {
        let sandbox = Sandbox()
        let script = try Self.script("bash", sandbox)
        // Nothing listens: only -g is offered, nothing is printed, and kvd was not started.
        #expect(try Self.bash(script, ["kvctl", "--socket", sandbox.socket, "get", ""]) == ["-g"])
        #expect(!FileManager.default.fileExists(atPath: sandbox.socket), "completion started kvd at \(sandbox.socket)")
    }

    @Test func bashCompletionNeverEvaluatesNamesFromKvd() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        let marker = sandbox.root + "/evaluated"
        #expect(try kvctl(sandbox, "set", "com.example.x", "$(touch \(marker))", "v").status == 0)
        let offered = try Self.bash(
            try Self.script("bash", sandbox), ["kvctl", "--socket", sandbox.socket, "get", "com.example.x", ""])
        #expect(offered == ["\\$\\(touch\\ \(marker)\\)"])
        #expect(!FileManager.default.fileExists(atPath: marker), "a key name was run as a command")
        daemon.stop()
    }

    @Test func zshCompletesTheDomainsOfTheRunningKvd() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        try Self.populate(sandbox)
        let script = try Self.script("zsh", sandbox)
        // compadd and _files are zsh's completion builtins; outside a Tab press they are stood in
        // for by functions printing what the script offers, so the script's own logic runs.
        let program = """
            compadd() { while [[ $1 == -* && $1 != -- ]]; do shift; done; [[ $1 == -- ]] && shift; print -l -- "$@"; }
            compdef() { :; }
            source \(script)
            words=(kvctl --socket \(sandbox.socket) get com.ex); CURRENT=5; PREFIX=com.ex
            _kvctl | grep '^com\\.ex'
            """
        let shell = try run(
            "/usr/bin/zsh", ["-f", "-c", program], environment: ["PATH": Binaries.directory + ":/usr/bin:/bin"])
        #expect(shell.status == 0 && shell.stderr.isEmpty, "zsh: \(shell.stderr)")
        #expect(shell.stdout == "com.example.one\ncom.example.two\n")
        daemon.stop()
    }

    @Test func fishCompletesTheDomainsOfTheRunningKvd() throws {
        let sandbox = Sandbox()
        let daemon = try Daemon(sandbox)
        try Self.populate(sandbox)
        let script = try Self.script("fish", sandbox)
        let shell = try run(
            "/usr/bin/fish",
            ["--no-config", "-c", "source \(script); complete -C 'kvctl --socket \(sandbox.socket) get com.ex'"],
            environment: ["PATH": Binaries.directory + ":/usr/bin:/bin"])
        #expect(shell.status == 0 && shell.stderr.isEmpty, "fish: \(shell.stderr)")
        #expect(shell.stdout == "com.example.one\ncom.example.two\n")
        daemon.stop()
    }
}
