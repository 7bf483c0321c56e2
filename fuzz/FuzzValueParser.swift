// Compiled into the module KVCtl with ValueParser.swift (see fuzz/build.sh).
import KVValues

/// Fuzz target: kvctl's VALUE parser (``ValueParser/parse(_:)``). The input is split at NUL
/// bytes into arguments (invalid UTF-8 repaired, as the shell's arguments would be).
///
/// Invariants: it returns a spec or a ``UsageError``, never crashes; every value it makes is
/// valid (finite reals, dates in range) and survives typed JSON: `--json` of its typed JSON
/// parses back to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzValueParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let input = UnsafeBufferPointer(start: data, count: size)
    let arguments = input.split(separator: 0, omittingEmptySubsequences: false).map {
        String(decoding: $0, as: UTF8.self)
    }
    guard let spec = try? ValueParser.parse(arguments) else { return 0 }
    let values: [Value]
    switch spec {
    case .replace(let value): values = [value]
    case .arrayAdd(let elements): values = elements
    case .dictionaryAdd(let members): values = Array(members.values)
    }
    for value in values {
        if (try? value.validate()) == nil { fail("the parser made an invalid value: \(value)") }
        let text = JSONWriter().string(value.typedJSON)
        guard case .replace(let again)? = try? ValueParser.parse(["--json", text]), again == value else {
            fail("--json of a parsed value's typed JSON does not give it back: \(text)")
        }
    }
    return 0
}
