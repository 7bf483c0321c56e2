import Foundation
import Glibc

/// A real interactive bash, zsh or fish on a pseudo-terminal (util-linux `script`), with
/// kvctl's completion script loaded, into which a test types a line and a Tab as a user would.
///
/// The line's `kvctl` is a shell function standing in for kvctl: called by the completion
/// script (its calls start with `--no-autostart`) it runs the real kvctl on PATH; called by
/// the line itself once Enter is typed, it writes the arguments the shell passes, each ended by
/// a NUL, and exits the shell. So a test sees exactly the words the shell would pass kvctl.
struct InteractiveShell {
    let shell: String
    let sandbox: Sandbox

    /// Types `line`, a Tab and Enter; returns the arguments kvctl was called with, or `nil` if
    /// the shell did not run the line (the completion left a quote open, for one).
    func complete(_ line: String) throws -> [String]? {
        let folder = sandbox.root + "/\(shell)-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let printed = try run(Binaries.kvctl, ["completion", shell])
        guard printed.status == 0 else { throw TestFailure("kvctl completion \(shell): \(printed.stderr)") }
        try printed.stdout.write(toFile: folder + "/completion", atomically: false, encoding: .utf8)
        let (command, environment) = try start(in: folder)
        let input = folder + "/tty-in"
        guard mkfifo(input, 0o600) == 0 else {
            throw TestFailure("mkfifo \(input): \(String(cString: strerror(errno)))")
        }
        let writer = open(input, O_RDWR | O_CLOEXEC)  // read-write: opening never waits for the other end
        defer { close(writer) }
        let log = folder + "/terminal.log"
        let session = try ChildProcess(
            "/usr/bin/script", ["-qfec", command, "/dev/null"], environment: environment, stdin: input, stdout: log,
            stderr: log)
        // Keys typed before the shell reads the terminal would meet the terminal's line editing.
        let deadline = Date().addingTimeInterval(30)
        while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("KVREADY") {
            guard session.isRunning, Date() < deadline else {
                throw TestFailure("\(shell) did not start: \(terminal(log))")
            }
            usleep(10_000)
        }
        guard Self.send(writer, line + "\t\r") else { throw TestFailure("cannot type into \(shell)") }
        session.wait(timeout: 15)
        guard let arguments = try? Data(contentsOf: URL(fileURLWithPath: folder + "/arguments")) else { return nil }
        return arguments.split(separator: 0, omittingEmptySubsequences: false).dropLast().map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// The command `script` runs and its environment: the shell reads a startup file that loads
    /// the completion script, defines the stand-in `kvctl`, enters the sandbox and prints KVREADY.
    private func start(in folder: String) throws -> (String, [String: String]) {
        var environment = [
            "PATH": Binaries.directory + ":/usr/bin:/bin", "HOME": folder, "LANG": "C.UTF-8", "TERM": "xterm",
            "XDG_CONFIG_HOME": folder + "/config", "XDG_DATA_HOME": folder + "/data", "XDG_RUNTIME_DIR": folder,
        ]
        let out = folder + "/arguments"
        switch shell {
        case "bash":
            try """
            source \(folder)/completion
            kvctl() { [[ $1 == --no-autostart ]] && { command kvctl "$@"; return; }; printf '%s\\0' "$@" > \(out); exit; }
            cd \(sandbox.root) && echo KVREADY
            """.write(toFile: folder + "/rc", atomically: false, encoding: .utf8)
            return ("bash --noprofile --rcfile \(folder)/rc -i", environment)
        case "zsh":
            environment["ZDOTDIR"] = folder
            try """
            autoload -Uz compinit && compinit -u -D
            source \(folder)/completion
            kvctl() { [[ $1 == --no-autostart ]] && { command kvctl "$@"; return; }; printf '%s\\0' "$@" > \(out); exit; }
            cd \(sandbox.root) && echo KVREADY
            """.write(toFile: folder + "/.zshrc", atomically: false, encoding: .utf8)
            return ("zsh -i", environment)
        default:
            try """
            source \(folder)/completion
            function kvctl; printf '%s\\0' $argv > \(out); exit; end
            cd \(sandbox.root); and echo KVREADY
            """.write(toFile: folder + "/rc.fish", atomically: false, encoding: .utf8)
            return ("fish --no-config -i -C 'source \(folder)/rc.fish'", environment)
        }
    }

    private func terminal(_ log: String) -> String {
        String(((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(2000))
    }

    /// Writes all of `text` to `descriptor`; false on failure.
    private static func send(_ descriptor: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }
}
