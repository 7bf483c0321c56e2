import KVProtocol
import KVValues

/// Fuzz target: the daemon's input path, bytes → ``MessageFramer`` → ``VarlinkCall`` →
/// ``DefaultsRequest``, fed in reads whose size (1-64) is the low six bits of the input's first
/// byte; its top two bits say how many messages are taken after each read (all, one, up to
/// three, none until the end), as the daemon takes fewer while a client's calls wait.
///
/// Invariants: the framer returns exactly the NUL-separated messages of the stream (never a
/// NUL inside one, never one over its limit) and, after every read, holds no more memory than
/// ``MessageFramer/keptCapacity`` or twice the bytes in flight; a request that validates is
/// encoded by ``DefaultsRequest/call`` into bytes that validate as the same request; calls and
/// replies round-trip; ``JSONParser/parseMembers(_:limits:inner:)`` (the daemon's fast path)
/// accepts and refuses exactly what ``JSONParser/parse(_:limits:)`` does, with the same error
/// and the same members; what ``DefaultsRequest/fastGet(_:)`` or ``DefaultsRequest/fastSet(_:)``
/// accepts, the general path reads as the same `Get` or `Set`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzVarlink(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let chunk = Int(data[0] & 0x3F) + 1
    let takenPerRead = [Int.max, 1, 3, 0][Int(data[0] >> 6)]
    let stream = UnsafeBufferPointer(start: data + 1, count: size - 1)
    var framer = MessageFramer(limit: 4096)
    var messages: [[UInt8]] = []
    var offset = 0
    var refused = false
    while !refused, offset < stream.count || framer.pendingByteCount > 0 {
        let end = min(offset + chunk, stream.count)
        framer.append(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: stream[offset..<end])))
        offset = end
        if framer.retainedByteCount > max(MessageFramer.keptCapacity, 2 * framer.pendingByteCount) {
            fail("the framer holds \(framer.retainedByteCount) bytes for \(framer.pendingByteCount) in flight")
        }
        let take = offset == stream.count ? Int.max : takenPerRead
        var taken = 0
        do {
            while taken < take, let message = try framer.next() {
                if message.contains(0) { fail("a framed message holds a NUL") }
                if message.count > framer.limit { fail("a framed message exceeds the limit") }
                messages.append(Array(message))
                taken += 1
            }
        } catch {
            refused = true
        }
        if offset == stream.count, taken == 0 { break }
    }
    if !refused {
        let expected = stream.split(separator: 0, omittingEmptySubsequences: false).dropLast().map(Array.init)
        if messages != expected { fail("the framer split the stream differently from its NULs") }
        let rest = stream.count - (expected.reduce(0) { $0 + $1.count + 1 })
        if framer.pendingByteCount != rest { fail("pendingByteCount \(framer.pendingByteCount), expected \(rest)") }
    }
    for message in messages { check(message) }
    if messages.isEmpty { check(Array(stream)) }
    return 0
}

private func check(_ message: [UInt8]) {
    checkMembersMatchParse(message)
    if let (domain, key) = DefaultsRequest.fastGet(message[...]) {
        guard let call = try? VarlinkCall(message: message), !call.oneway, !call.more,
            let request = try? DefaultsRequest(call: call), request == .get(domain, key)
        else {
            fail("fastGet accepted what the general path reads otherwise: \(String(decoding: message, as: UTF8.self))")
        }
    }
    if let request = DefaultsRequest.fastSet(message[...]) {
        guard let call = try? VarlinkCall(message: message), !call.oneway, !call.more,
            let general = try? DefaultsRequest(call: call), general == request
        else {
            fail("fastSet accepted what the general path reads otherwise: \(String(decoding: message, as: UTF8.self))")
        }
    }
    if let reply = try? VarlinkReply(message: message) {
        let bytes = reply.encoded()
        guard bytes.last == 0, let again = try? VarlinkReply(message: bytes.dropLast()), again == reply else {
            fail("a reply does not round-trip")
        }
    }
    guard let call = try? VarlinkCall(message: message) else { return }
    let encoded = call.encoded()
    guard encoded.last == 0, !encoded.dropLast().contains(0),
        let reread = try? VarlinkCall(message: encoded.dropLast()),
        reread == call
    else { fail("a call does not round-trip: \(String(decoding: encoded, as: UTF8.self))") }
    guard let request = try? DefaultsRequest(call: call) else { return }
    let carried = request.call.encoded()
    guard let recall = try? VarlinkCall(message: carried.dropLast()), let again = try? DefaultsRequest(call: recall)
    else {
        fail("the call of a valid request does not validate: \(String(decoding: carried, as: UTF8.self))")
    }
    if again != request { fail("a request changed in a round trip: \(String(decoding: carried, as: UTF8.self))") }
}

private func checkMembersMatchParse(_ message: [UInt8]) {
    let general = Result { () throws(JSONSyntaxError) in try JSONParser.parse(message) }
    let ordered = Result { () throws(JSONSyntaxError) in try JSONParser.parseMembers(message, inner: "parameters") }
    switch (general, ordered) {
    case (.failure(let expected), .failure(let got)):
        if expected != got { fail("parseMembers refused with \(got), parse with \(expected)") }
    case (.success(.object(var members)), .success(let split?)):
        if let inner = split.inner {
            guard case .object(let parameters)? = members.removeValue(forKey: "parameters"),
                parameters == inner.dictionary
            else {
                fail("parseMembers split off other parameters")
            }
        }
        if members != split.members.dictionary || split.members.pairs.count != members.count {
            fail("parseMembers read other members")
        }
    case (.success(let json), .success(nil)):
        if case .object = json { fail("parseMembers missed an object") }
    default:
        fail("parse and parseMembers disagree: \(general) / \(ordered)")
    }
}
