import Glibc
import KVValues

extension DefaultsRequest {
    private static let getPrefix = Array(#"{"method":"io.kvd.Defaults.Get","parameters":{"#.utf8)
    private static let setPrefix = Array(#"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"#.utf8)
    private static let valueMember = Array(#","value":"#.utf8)
    /// The value of a `Set` sits two levels inside the call (the call, its parameters).
    private static let setValueLimits = JSONLimits(
        maxDepth: JSONLimits.message.maxDepth - 2, maxBytes: JSONLimits.message.maxBytes)

    /// Whether `message` begins as a compact `Get` does (the one check ``fastGet(_:)`` makes
    /// first): cheap, so other calls skip the fast path's work at once.
    public static func beginsAsGet(_ message: ArraySlice<UInt8>) -> Bool {
        begins(message, with: getPrefix)
    }

    /// Whether `message` starts with `prefix` and holds at least two bytes more (the `}}`
    /// every compact call ends with).
    private static func begins(_ message: ArraySlice<UInt8>, with prefix: [UInt8]) -> Bool {
        message.count > prefix.count + 2
            && message.withUnsafeBytes { bytes in
                prefix.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress!, $0.count) == 0 }
            }
    }

    /// The daemon's fast path for its commonest call: a `Get` written compactly, as kvd's own
    /// clients write it: `{"method":"io.kvd.Defaults.Get","parameters":{"domain":"D","key":"K"}}`
    /// (`domain` and `key` in either order; no whitespace, no escapes, ASCII names). Returns
    /// nil for anything else, which then takes the general path (``VarlinkCall`` and
    /// ``init(call:)``); what it returns is what the general path would make of the message,
    /// a `Get` that is neither `oneway` nor `more` (the varlink fuzz target checks this).
    public static func fastGet(_ message: ArraySlice<UInt8>) -> (Domain, Key)? {
        guard beginsAsGet(message), message.last == UInt8(ascii: "}"),
            message[message.endIndex - 2] == UInt8(ascii: "}")
        else { return nil }
        return message.withUnsafeBufferPointer { bytes -> (Domain, Key)? in
            var position = getPrefix.count
            var domain: String?
            var key: String?
            for index in 0..<2 {
                if index == 1 {
                    guard position < bytes.count, bytes[position] == UInt8(ascii: ",") else { return nil }
                    position += 1
                }
                guard let name = plainString(bytes, &position), position < bytes.count,
                    bytes[position] == UInt8(ascii: ":")
                else {
                    return nil
                }
                position += 1
                guard let text = plainString(bytes, &position) else { return nil }
                switch name {
                case "domain" where domain == nil: domain = text
                case "key" where key == nil: key = text
                default: return nil
                }
            }
            guard position == bytes.count - 2, let domain, let key,
                let validDomain = try? Domain(validating: domain), let validKey = try? Key(validating: key)
            else { return nil }
            return (validDomain, validKey)
        }
    }

    /// The daemon's fast path for `Set` as kvd's own clients write it:
    /// `{"method":"io.kvd.Defaults.Set","parameters":{"domain":"D","key":"K","value":V}}` (members
    /// in this order, no whitespace around them, plain ASCII names, no `ifRevision`). Only the
    /// value is parsed as JSON, with the depth it has inside the call. Returns nil for anything
    /// else, and for a call whose names or value the general path would refuse, so that the
    /// general path makes the error reply; what it returns is the request the general path would
    /// make, neither `oneway` nor `more` (the varlink fuzz target checks this).
    public static func fastSet(_ message: ArraySlice<UInt8>) -> DefaultsRequest? {
        guard begins(message, with: setPrefix), message.last == UInt8(ascii: "}"),
            message[message.endIndex - 2] == UInt8(ascii: "}")
        else { return nil }
        let parsed = message.withUnsafeBufferPointer { bytes -> (String, String, Range<Int>)? in
            var position = setPrefix.count  // the domain's opening quote
            guard let domain = plainString(bytes, &position), position < bytes.count,
                bytes[position] == UInt8(ascii: ","),
                bytes[position...].starts(with: #","key":"#.utf8)
            else { return nil }
            position += 7
            guard let key = plainString(bytes, &position), bytes[position...].starts(with: valueMember) else {
                return nil
            }
            return (domain, key, (position + valueMember.count)..<(bytes.count - 2))
        }
        guard let (domain, key, valueRange) = parsed,
            let validDomain = try? Domain(validating: domain), let validKey = try? Key(validating: key),
            let json = try? JSONParser.parse(
                message[(message.startIndex + valueRange.lowerBound)..<(message.startIndex + valueRange.upperBound)],
                limits: setValueLimits),
            json != .null, let value = try? Parameters.value(json)
        else { return nil }
        return .set(validDomain, validKey, value, ifRevision: nil)
    }

    /// A string at `position` with no escape, control or non-ASCII byte; moves past it.
    private static func plainString(_ bytes: UnsafeBufferPointer<UInt8>, _ position: inout Int) -> String? {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
        let start = position + 1
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        position = end + 1
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
    }
}
