import Glibc
import KVProtocol
import KVSystem
import KVValues

/// kvctl-plist: converts between property lists and the contract's typed JSON for
/// `kvctl import` and `kvctl export --format xml|binary`.
///
/// A separate program so that kvctl, which runs for every setting a script reads, stays small
/// and starts fast; kvctl runs it only for property lists. It reads and writes property lists
/// with its own strict code (``BinaryPlistReader``, ``XMLPlistReader``, ``PlistWriter``), not
/// Foundation's: Foundation changes values on the way in (128-bit integers cut to 64 bits,
/// out-of-range dates clamped, invalid dates rolled over, lone surrogates replaced), expands a
/// binary list's shared references without bound, and, linked statically in the release build,
/// could not write arrays at all.
///
///     kvctl-plist read            plist (XML or binary) on stdin -> typed JSON object on stdout
///     kvctl-plist write xml|binary  typed JSON object on stdin -> plist on stdout
///     kvctl-plist --version       the version of kvd it belongs to
///
/// Exit status 0, or 1 with one line on stderr naming the key that cannot be converted (nothing
/// is written to stdout then). Blocks until stdin ends.
enum PlistTool {
    static func main(_ arguments: [String]) -> Int32 {
        if arguments == ["--version"] {
            try? write(Array("kvctl-plist \(KVDVersion.current)\n".utf8), to: 1)
            return 0
        }
        do throws(PlistRefusal) {
            let input = try readStandardInput()
            let output: [UInt8]
            switch arguments {
            case ["read"]: output = Array(try typedJSON(fromPlist: input).utf8)
            case ["write", "xml"]: output = try PlistWriter.xml(try members(fromTypedJSON: input))
            case ["write", "binary"]: output = PlistWriter.binary(try members(fromTypedJSON: input))
            default:
                throw PlistRefusal(
                    "usage: kvctl-plist read | kvctl-plist write xml|binary (kvctl runs it for plist import and export)"
                )
            }
            try write(output, to: 1)
            return 0
        } catch {
            try? write(Array((error.message + "\n").utf8), to: 2)
            return 1
        }
    }

    /// The dictionary at the top of a property list (binary or XML) as one typed JSON object.
    static func typedJSON(fromPlist bytes: [UInt8]) throws(PlistRefusal) -> String {
        let members: [(key: String, value: Value)]
        if BinaryPlistReader.recognizes(bytes) {
            members = try BinaryPlistReader(bytes).topDictionary()
        } else {
            var reader = XMLPlistReader(bytes)
            members = try reader.topDictionary()
        }
        var dictionary: [String: Value] = [:]
        for member in members { dictionary[member.key] = member.value }
        let value = Value.dictionary(dictionary)
        do { try value.validate() } catch {
            throw PlistRefusal("the property list holds a value kvd cannot hold: \(error); nothing imported")
        }
        return JSONWriter(sortKeys: true).string(value.typedJSON)
    }

    /// A typed JSON object (what `kvctl export` writes) as its members.
    static func members(fromTypedJSON bytes: [UInt8]) throws(PlistRefusal) -> [String: Value] {
        let value: Value
        do {
            value = try Value(typedJSONText: bytes, limits: JSONLimits(framingDepth: 2, maxBytes: Int.max))
        } catch {
            throw PlistRefusal("kvctl-plist: the input is not typed JSON: \(error)")
        }
        guard case .dictionary(let members) = value else {
            throw PlistRefusal("kvctl-plist: the input is not a typed JSON object")
        }
        return members
    }

    /// All of stdin. The corresponding C call is `read` (through KVSystem).
    static func readStandardInput() throws(PlistRefusal) -> [UInt8] {
        do { return try LinuxSystem().readToEnd(0) } catch {
            throw PlistRefusal("kvctl-plist: cannot read stdin: \(error.errno)")
        }
    }

    /// Writes all of `bytes` to `descriptor`. The corresponding C call is `write` (through KVSystem).
    static func write(_ bytes: [UInt8], to descriptor: Int32) throws(PlistRefusal) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try LinuxSystem().writeAll(descriptor, raw) }
        }
        if case .failure(let error) = result { throw PlistRefusal("kvctl-plist: cannot write: \(error.errno)") }
    }
}

exit(PlistTool.main(Array(CommandLine.arguments.dropFirst())))
