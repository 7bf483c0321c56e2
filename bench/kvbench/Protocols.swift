// The calls each peer understands, prepared once as bytes, and how to tell a reply is complete:
// varlink (kvd): a JSON object and a NUL; RESP (Redis): a minimal encoder and a decoder of the
// reply kinds GET, SET, PING and MSET give; echo: as many bytes as were sent.

/// The string a `set` writes: `--value-bytes` bytes (100 unless told).
func valueText(_ options: Options) -> String { String(repeating: "x", count: options.valueBytes) }

/// A RESP command: an array of bulk strings.
func resp(_ parts: [String]) -> [UInt8] {
    var text = "*\(parts.count)\r\n"
    for part in parts { text += "$\(part.utf8.count)\r\n\(part)\r\n" }
    return Array(text.utf8)
}

func varlink(_ method: String, _ parameters: String? = nil) -> [UInt8] {
    let text =
        parameters.map { #"{"method":"io.kvd.Defaults.\#(method)","parameters":\#($0)}"# }
        ?? #"{"method":"io.kvd.Defaults.\#(method)"}"#
    return Array(text.utf8) + [0]
}

/// One call's bytes for client `index`: each client reads and writes its own key.
func request(_ options: Options, client index: Int) -> [UInt8] {
    let key = "k\(index)"
    let payload = valueText(options)
    switch (options.proto, options.operation) {
    case ("echo", _): return [UInt8](repeating: 0x61, count: 96)
    case ("resp", "set"): return resp(["SET", "\(options.domain):\(key)", payload])
    case ("resp", "ping"): return resp(["PING"])
    case ("resp", _): return resp(["GET", "\(options.domain):\(key)"])
    case (_, "set"):
        return varlink("Set", #"{"domain":"\#(options.domain)","key":"\#(key)","value":"\#(payload)"}"#)
    case (_, "ping"): return varlink("Domains")
    case (_, "list"): return varlink("List", #"{"domain":"\#(options.domain)"}"#)
    case (_, "history"): return varlink("History", #"{"domain":"\#(options.domain)","key":"\#(key)"}"#)
    default: return varlink("Get", #"{"domain":"\#(options.domain)","key":"\#(key)"}"#)
    }
}

/// Whether `buffer[0..<count]` holds one whole reply (no pipelining: at most one is pending).
func replyComplete(_ proto: String, _ buffer: UnsafeRawBufferPointer, _ count: Int, sent: Int) -> Bool {
    switch proto {
    case "echo": return count >= sent
    case "resp": return respReplyLength(buffer, count).map { $0 <= count } ?? false
    default: return count > 0 && buffer[count - 1] == 0
    }
}

/// The length of the RESP reply at the start of `buffer`, once its header is in; `nil` before.
/// Handles simple strings, errors, integers and bulk strings (null too).
func respReplyLength(_ buffer: UnsafeRawBufferPointer, _ count: Int) -> Int? {
    guard count >= 3 else { return nil }
    var end = 1
    while end + 1 < count, !(buffer[end] == 13 && buffer[end + 1] == 10) { end += 1 }
    guard end + 1 < count else { return nil }
    let header = end + 2
    guard buffer[0] == UInt8(ascii: "$") else { return header }
    var length = 0
    var negative = false
    for index in 1..<end {
        if buffer[index] == UInt8(ascii: "-") {
            negative = true
        } else {
            length = length * 10 + Int(buffer[index] - 48)
        }
    }
    return negative ? header : header + length + 2
}

/// Whether a complete reply reports success (checked on each client's first reply).
func replyIsSuccess(_ proto: String, _ reply: [UInt8]) -> Bool {
    switch proto {
    case "echo": return true
    case "resp": return reply.first != UInt8(ascii: "-") && !reply.starts(with: Array("$-1".utf8))
    default: return !String(decoding: reply, as: UTF8.self).contains(#""error""#)
    }
}
