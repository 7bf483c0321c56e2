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
    /// The bytes of the string a `set` writes (and `populate`, and the keys a `get` reads).
    var valueBytes = 100
    /// Prints each run as one JSON object instead of the key=value line.
    var json = false
    /// How many clients are driven: one epoll thread for them all, or a blocking thread each.
    var mode = Mode.epoll
    /// Writes every call's start and latency to this file (``writeTrace(_:to:)``).
    var trace = ""
    /// Serves the raw ping-pong on this path instead of measuring.
    var serveEcho = ""

    /// How the generator drives its clients (one client is always a blocking thread).
    enum Mode: String, Sendable {
        /// Every connection non-blocking on one epoll thread: many clients cost no thread
        /// switches in the generator, but a reply waits while the thread reads the others.
        case epoll
        /// A blocking thread per connection, as separate client processes behave: each reply
        /// wakes its own thread.
        case threads
    }

    /// The mode a run uses: a single client is one blocking thread whatever the mode.
    var effectiveMode: Mode { clients == 1 ? .threads : mode }
}

func usage() -> Never {
    print(
        """
        usage: kvbench --socket PATH [--proto varlink|resp|echo] [--op get|set|ping|populate]
                       [--clients N] [--mode epoll|threads] [--seconds S] [--runs N] [--domain D]
                       [--value-bytes N] [--keys N] [--domains N] [--trace FILE] [--json]
               kvbench --serve-echo PATH
          --mode epoll      many clients on one epoll thread (the default)
          --mode threads    a blocking thread per connection (--threads: the same)
          --trace FILE      every call's start and latency in ns (CLOCK_MONOTONIC), a line each;
                            with --runs N > 1, FILE.1 ... FILE.N
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
            options.mode = .threads
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
        case "--value-bytes": options.valueBytes = max(1, Int(value) ?? 100)
        case "--mode":
            guard let mode = Options.Mode(rawValue: value) else { usage() }
            options.mode = mode
        case "--trace": options.trace = value
        case "--serve-echo": options.serveEcho = value
        default: usage()
        }
    }
    if options.socket.isEmpty && options.serveEcho.isEmpty { usage() }
    guard ["varlink", "resp", "echo"].contains(options.proto) else { usage() }
    return options
}
