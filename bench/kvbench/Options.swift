// kvbench's command line.
import Glibc

/// What one kvbench invocation measures.
struct Options: Sendable {
    var socket = ""
    var clients = 1
    var seconds = 2.0
    /// get, set, ping (kvd: `Domains`; Redis: `PING`; echo: the raw round trip) or populate.
    var operation = "get"
    /// varlink (kvd), resp (Redis) or echo (the raw ping-pong server of `--serve-echo`).
    var proto = "varlink"
    var domain = "bench.kvd"
    /// How many runs of `seconds` each; one result line per run.
    var runs = 1
    /// Keys `populate` writes (in `domains` domains named `<domain>.<n>`, or `domain` if 1).
    var keys = 0
    var domains = 1
    /// Prints each run as one JSON object instead of the key=value line.
    var json = false
    /// Many clients as one thread each (blocking) instead of one epoll thread for them all.
    var threads = false
    /// Serves the raw ping-pong on this path instead of measuring.
    var serveEcho = ""
}

func usage() -> Never {
    print(
        """
        usage: kvbench --socket PATH [--proto varlink|resp|echo] [--op get|set|ping|populate]
                       [--clients N] [--seconds S] [--runs N] [--domain D] [--keys N] [--domains N] [--threads] [--json]
               kvbench --serve-echo PATH
        """)
    exit(2)
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    while let flag = arguments.popFirst() {
        if flag == "--json" {
            options.json = true
            continue
        }
        if flag == "--threads" {
            options.threads = true
            continue
        }
        guard let value = arguments.popFirst() else { usage() }
        switch flag {
        case "--socket": options.socket = value
        case "--clients": options.clients = max(1, Int(value) ?? 1)
        case "--seconds": options.seconds = Double(value) ?? 2
        case "--op": options.operation = value
        case "--proto": options.proto = value
        case "--domain": options.domain = value
        case "--runs": options.runs = max(1, Int(value) ?? 1)
        case "--keys": options.keys = max(0, Int(value) ?? 0)
        case "--domains": options.domains = max(1, Int(value) ?? 1)
        case "--serve-echo": options.serveEcho = value
        default: usage()
        }
    }
    if options.socket.isEmpty && options.serveEcho.isEmpty { usage() }
    guard ["varlink", "resp", "echo"].contains(options.proto) else { usage() }
    return options
}
