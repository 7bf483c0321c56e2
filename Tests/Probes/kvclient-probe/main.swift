// kvclient-probe: a small program built on KVClient, for the end-to-end tests of the library
// (two real processes against a real kvd). Reads commands from stdin, one a line, and answers
// each with one line on stdout:
//
//   get KEY               the value from the cache, as typed JSON, or "nil"
//   set KEY TYPED_JSON    writes it; "ok" or "error: ..."
//   remove KEY            removes it; "ok"
//   wait KEY TYPED_JSON SECONDS   polls the cache (no IPC) until the value equals; "ok" or "timeout"
//   watch KEY             from now on, prints "change KEY VALUE" for each update of KEY
//   forced KEY            objectIsForced(forKey:) and isWritable(forKey:): "forced writable",
//                         "forced read-only", ...
//   setquietly KEY TYPED_JSON   set(_:forKey:) (errors go to diagnostics, on stderr); "ok"
//   quit
//
// Usage: kvclient-probe --socket PATH --domain DOMAIN
import Glibc
import KVClient
import KVSystem
import KVValues

var socket: String?
var domainName = "com.example.probe"
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--socket": socket = arguments.popFirst()
    case "--domain": domainName = arguments.popFirst() ?? domainName
    default: break
    }
}
let configuration = KVDefaults.Configuration(
    socketPath: socket, arguments: [], autostart: false,
    diagnostics: { diagnostic in
        FileHandleLike.err("diagnostic: \(diagnostic)")
    })
guard let defaults = KVDefaults(suiteName: domainName, configuration: configuration) else { exit(2) }

/// Unbuffered output, so the test reading the pipe sees each line at once.
enum FileHandleLike {
    static func out(_ line: String) { write(1, line + "\n") }
    static func err(_ line: String) { write(2, line + "\n") }

    private static func write(_ descriptor: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try LinuxSystem().writeAll(descriptor, raw) }
        }
    }

    static func show(_ value: Value?) -> String {
        value.map { JSONWriter(sortKeys: true).string($0.typedJSON) } ?? "nil"
    }
}

func parse(_ text: String) -> Value? {
    try? Value(typedJSONText: Array(text.utf8))
}

var observations: [KVObservation] = []
while let line = readLine() {
    let words = line.split(separator: " ", maxSplits: 2).map(String.init)
    switch words.first {
    case "get" where words.count == 2:
        FileHandleLike.out(FileHandleLike.show(defaults.value(forKey: words[1])))
    case "set" where words.count == 3:
        guard let value = parse(words[2]) else {
            FileHandleLike.out("error: not typed JSON")
            continue
        }
        do {
            try defaults.write(value, forKey: words[1])
            FileHandleLike.out("ok")
        } catch {
            FileHandleLike.out("error: \(error)")
        }
    case "remove" where words.count == 2:
        defaults.removeObject(forKey: words[1])
        FileHandleLike.out("ok")
    case "wait" where words.count == 3:
        let rest = words[2].split(separator: " ")
        let expected = parse(rest.dropLast().joined(separator: " "))
        let seconds = Double(rest.last ?? "5") ?? 5
        var waited = 0.0
        var matched = false
        while waited < seconds {
            if defaults.value(forKey: words[1]) == expected {
                matched = true
                break
            }
            LinuxSystem().sleep(microseconds: 2_000)
            waited += 0.002
        }
        FileHandleLike.out(matched ? "ok" : "timeout")
    case "watch" where words.count == 2:
        let key = words[1]
        observations.append(
            defaults.observe(key) { value in FileHandleLike.out("change \(key) \(FileHandleLike.show(value))") })
        FileHandleLike.out("ok")
    case "forced" where words.count == 2:
        let forced = defaults.objectIsForced(forKey: words[1]) ? "forced" : "free"
        FileHandleLike.out("\(forced) \(defaults.isWritable(forKey: words[1]) ? "writable" : "read-only")")
    case "setquietly" where words.count == 3:
        guard let value = parse(words[2]) else {
            FileHandleLike.out("error: not typed JSON")
            continue
        }
        defaults.set(value, forKey: words[1])
        FileHandleLike.out("ok")
    case "quit":
        exit(0)
    default:
        FileHandleLike.out("error: unknown command \(line)")
    }
}
