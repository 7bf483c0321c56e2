import Glibc
import KVConnection
import KVProtocol
import KVSystem
import KVValues

/// kvctl: the shell client of kvd. All logic lives here; the `kvctl` executable only calls
/// ``main(arguments:environment:)``.
public enum KVCtl {
    /// Runs kvctl with `arguments` (without the program name) and returns the exit status:
    /// 0 done, 1 not found or failed, 2 wrong usage (`apply --check`: 0 equal, 1 would change, 3 failed).
    public static func main(arguments: [String], environment: [String: String]) -> Int32 {
        run(arguments: arguments, environment: environment, console: StandardConsole())
    }

    /// ``main(arguments:environment:)`` with its streams (and, in tests, kvd's location) given.
    public static func run(
        arguments: [String], environment: [String: String], console: any Console, daemonPath: String? = nil
    ) -> Int32 {
        let invocation: Invocation
        do {
            invocation = try Invocation.parse(arguments)
        } catch {
            console.err("kvctl: \(error.error.message)\n\(Help.usageLine(error.command))\n")
            return 2
        }
        if let status = answerWithoutKvd(invocation.command, console: console) { return status }
        let options = invocation.options
        var runner = Runner(options: options, console: console) { () throws(ClientError) -> Connection in
            guard !options.system else {
                // The system instance is started by systemd (kvd-system.socket), never by kvctl.
                let path = Paths.systemSocket(explicit: options.socket, environment: environment)
                return try Autostart.connect(socketPath: path, enabled: false, environment: environment)
            }
            let path = Paths.socket(explicit: options.socket, environment: environment)
            return try Autostart.connect(
                socketPath: path, daemonPath: daemonPath, enabled: options.autostart, environment: environment)
        }
        runner.connectSystem = { () throws(ClientError) -> Connection in
            // Never `--socket`: that is the user's kvd here.
            let path = Paths.systemSocket(explicit: nil, environment: environment)
            return try Autostart.connect(socketPath: path, enabled: false, environment: environment)
        }
        do {
            try runner.run(invocation.command)
            return 0
        } catch {
            console.err("kvctl: \(error.message)\n")
            return error.status
        }
    }

    /// The commands answered without kvd (help, completion, version, the GNOME switch): their
    /// exit status, or `nil` for every other command.
    private static func answerWithoutKvd(_ command: Command, console: any Console) -> Int32? {
        if case .help(let topic) = command {
            console.out(Help.text(topic))
            return 0
        }
        if case .completion(let shell) = command {
            console.out(Completion.script(for: shell))
            return 0
        }
        if command == .version {
            console.out("kvctl \(KVDVersion.current)\n")
            return 0
        }
        if case .gnome(let action) = command {  // files of systemd's: no kvd needed
            do { try GnomeSwitch(system: Files.system, console: console).run(action) } catch {
                console.err("kvctl: \(error.message)\n")
                return error.status
            }
            return 0
        }
        return nil
    }

    /// The process's environment.
    public static func processEnvironment() -> [String: String] {
        Paths.processEnvironment()
    }
}
