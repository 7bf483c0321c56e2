import Glibc
import KVValues

/// One varlink call: `{"method": ..., "parameters": {...}, "more": true, "oneway": true}`.
public struct VarlinkCall: Sendable, Equatable {
    public var method: String
    /// The parameters in the order received (a call's few members need no dictionary).
    public var parameterMembers: JSONMembers
    /// The caller accepts several replies (`continues: true` on all but the last).
    public var more: Bool
    /// The caller wants no reply at all.
    public var oneway: Bool

    public init(method: String, parameters: [String: JSON] = [:], more: Bool = false, oneway: Bool = false) {
        self.init(method: method, parameterMembers: JSONMembers(parameters), more: more, oneway: oneway)
    }

    public init(method: String, parameterMembers: JSONMembers, more: Bool = false, oneway: Bool = false) {
        self.method = method
        self.parameterMembers = parameterMembers
        self.more = more
        self.oneway = oneway
    }

    /// The parameters as a dictionary.
    public var parameters: [String: JSON] {
        get { parameterMembers.dictionary }
        set { parameterMembers = JSONMembers(newValue) }
    }

    /// The message's bytes, NUL terminator included: `method` first, then the parameters in
    /// order, then the flags that are set.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #"{"method":"#.utf8)
        JSONWriter.writeString(method, into: &out)
        if !parameterMembers.isEmpty {
            out.append(contentsOf: #","parameters":"#.utf8)
            Varlink.write(parameterMembers, into: &out)
        }
        if more { out.append(contentsOf: #","more":true"#.utf8) }
        if oneway { out.append(contentsOf: #","oneway":true"#.utf8) }
        out.append(contentsOf: [UInt8(ascii: "}"), 0])
        return out
    }

    /// Reads a call from one message (without its NUL); refuses anything that is not one.
    /// Reads the members in order, without building dictionaries (this runs for every call).
    /// The default limits allow a value as deep as the contract does inside the deepest call
    /// (`Apply`); the value rule itself is checked when the parameters become values.
    public init(message: some Collection<UInt8>, limits: JSONLimits = .message) throws(VarlinkError) {
        let (members, parameters) = try Varlink.envelope(message, limits: limits, of: "a call")
        guard case .string(let method)? = members["method"] else {
            throw .malformed("a call needs a \"method\" string")
        }
        switch members["parameters"] {  // an object came back as `parameters`
        case nil, .null?: break
        case let other?: throw .malformed("\"parameters\" must be an object, not \(other.typeName)")
        }
        func flag(_ name: String) throws(VarlinkError) -> Bool {
            switch members[name] {
            case nil, .null?: return false
            case .bool(let value)?: return value
            case let other?: throw .malformed("\"\(name)\" must be a bool, not \(other.typeName)")
            }
        }
        self.init(method: method, parameterMembers: parameters, more: try flag("more"), oneway: try flag("oneway"))
        guard try !flag("upgrade") else { throw .malformed("connection upgrades are not supported") }
    }
}

/// One varlink reply: parameters, or an error name with parameters.
public struct VarlinkReply: Sendable, Equatable {
    /// The parameters in order (written in this order; a reply's few members need no dictionary).
    public var parameterMembers: JSONMembers
    /// More replies to the same call follow.
    public var continues: Bool
    /// A fully qualified error name (`io.kvd.Defaults.NotFound`), or `nil` for success.
    public var error: String?
    /// The parameters object already encoded (a reply written as it is measured, like
    /// `History`'s), written instead of ``parameterMembers`` (then empty).
    public var encodedParameters: [UInt8]?

    public init(parameters: [String: JSON] = [:], continues: Bool = false, error: String? = nil) {
        self.init(members: JSONMembers(parameters), continues: continues, error: error)
    }

    /// A reply whose parameters object is `encodedParameters`, as it goes on the wire.
    public init(encodedParameters: [UInt8]) {
        self.init(members: JSONMembers())
        self.encodedParameters = encodedParameters
    }

    public init(members: JSONMembers, continues: Bool = false, error: String? = nil) {
        self.parameterMembers = members
        self.continues = continues
        self.error = error
    }

    /// The parameters as a dictionary.
    public var parameters: [String: JSON] {
        get { parameterMembers.dictionary }
        set { parameterMembers = JSONMembers(newValue) }
    }

    public static func failure(_ name: String, _ parameters: [String: JSON] = [:]) -> VarlinkReply {
        VarlinkReply(parameters: parameters, error: name)
    }

    /// The message's bytes, NUL terminator included.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }

    /// Appends the message's bytes, NUL terminator included, to `out` (a connection's output
    /// buffer: no intermediate array, no dictionary).
    public func encode(into out: inout [UInt8]) {
        out.append(contentsOf: #"{"parameters":"#.utf8)
        if let encodedParameters {
            out.append(contentsOf: encodedParameters)
        } else {
            Varlink.write(parameterMembers, into: &out)
        }
        if continues { out.append(contentsOf: #","continues":true"#.utf8) }
        if let error {
            out.append(contentsOf: #","error":"#.utf8)
            JSONWriter.writeString(error, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        out.append(0)
    }

    /// Appends the bytes of `VarlinkReply(members: ["value": value, "revision": revision,
    /// "source": source])` without building it: the reply to every `Get` that finds its key.
    public static func encodeValue(_ value: JSON, revision: Int64, source: ValueSource, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"parameters":{"value":"#.utf8)
        JSONWriter().write(value, into: &out)
        encodeValueEnd(revision: revision, source: source, into: &out)
    }

    /// ``encodeValue(_:revision:source:into:)`` with the value already as compact typed JSON
    /// (`typedJSON`, copied as it is: the caller vouches that it is one valid value).
    public static func encodeValue(
        typedJSON: UnsafeBufferPointer<UInt8>, revision: Int64, source: ValueSource, into out: inout [UInt8]
    ) {
        out.append(contentsOf: #"{"parameters":{"value":"#.utf8)
        out.append(contentsOf: typedJSON)
        encodeValueEnd(revision: revision, source: source, into: &out)
    }

    private static func encodeValueEnd(revision: Int64, source: ValueSource, into out: inout [UInt8]) {
        out.append(contentsOf: #","revision":"#.utf8)
        JSONWriter.writeInteger(revision, into: &out)
        switch source {
        case .user: out.append(contentsOf: #","source":"user"}}"#.utf8)
        case .system: out.append(contentsOf: #","source":"system"}}"#.utf8)
        case .locked: out.append(contentsOf: #","source":"locked"}}"#.utf8)
        }
        out.append(0)
    }

    /// The reply to a `Get` that finds its key (see ``encodeValue(_:revision:source:into:)``).
    public static func value(_ value: JSON, revision: Int64, source: ValueSource) -> VarlinkReply {
        VarlinkReply(members: ["value": value, "revision": .integer(revision), "source": .string(source.rawValue)])
    }

    /// Reads a reply from one message (without its NUL). The default limits take every reply
    /// kvd sends: a value as deep as the contract allows inside a `Watch` or `List` reply.
    public init(message: some Collection<UInt8>, limits: JSONLimits = .message) throws(VarlinkError) {
        let (members, parameters) = try Varlink.envelope(message, limits: limits, of: "a reply")
        var error: String?
        if case .string(let name)? = members["error"] { error = name }
        var continues = false
        if case .bool(let flag)? = members["continues"] { continues = flag }
        self.init(members: parameters, continues: continues, error: error)
    }
}

/// Failures of the varlink layer itself.
public enum VarlinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a varlink message.
    case malformed(String)
    /// A message grew past the limit (bytes) without its NUL terminator.
    case tooLarge(limit: Int)

    public var description: String {
        switch self {
        case .malformed(let reason): "malformed varlink message: \(reason)"
        case .tooLarge(let limit): "varlink message larger than the limit of \(limit) bytes"
        }
    }
}

/// Framing shared by both sides: every message is a JSON object followed by one NUL byte.
public enum Varlink {
    /// Largest message either side accepts, in bytes (NUL excluded): 16 MiB (``Limits``).
    public static let maxMessageBytes = Limits.messageBytes

    /// Writes `members` as a compact JSON object, in their order.
    static func write(_ members: JSONMembers, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        let writer = JSONWriter()
        for (index, member) in members.pairs.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(member.name, into: &out)
            out.append(UInt8(ascii: ":"))
            writer.write(member.value, into: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The members of a message (`what`: "a call", "a reply") and its `parameters` object, read
    /// in order without dictionaries; `.malformed` for anything that is not a JSON object.
    static func envelope(
        _ message: some Collection<UInt8>, limits: JSONLimits, of what: String
    ) throws(VarlinkError) -> (members: JSONMembers, parameters: JSONMembers) {
        let parsed: (members: JSONMembers, inner: JSONMembers?)?
        do { parsed = try JSONParser.parseMembers(message, limits: limits, inner: "parameters") } catch {
            throw .malformed(error.description)
        }
        guard let (members, inner) = parsed else { throw .malformed("\(what) must be a JSON object") }
        return (members, inner ?? JSONMembers())
    }
}

/// Splits a byte stream into NUL-terminated messages, refusing any message over a size limit.
///
/// Memory follows what is in flight: ``append(_:)`` first drops the bytes already returned as
/// messages and lets go of spare capacity, so right after it the framer holds at most
/// ``keptCapacity`` or twice ``pendingByteCount`` bytes (the messages not yet taken and the
/// unfinished one), whatever the caller takes in between; ``compact()`` does the same at any
/// other time (the daemon calls it after each turn, so an idle connection keeps no large buffer).
///
/// Not thread-safe: one per connection, used by the thread that reads it. A message returned by
/// ``next()`` shares the buffer: drop it before the next ``append(_:)`` or ``compact()``, or
/// they copy the buffer.
public struct MessageFramer: Sendable {
    /// Largest message accepted, in bytes without its NUL.
    public let limit: Int
    /// Capacity kept for the next read once the buffer's messages are consumed.
    public static let keptCapacity = 64 << 10
    private var buffer: [UInt8] = []
    /// Bytes before `start` were returned as messages.
    private var start = 0
    /// Bytes before `scanned` hold no NUL after `start`.
    private var scanned = 0

    public init(limit: Int = Varlink.maxMessageBytes) {
        self.limit = limit
    }

    /// Bytes received but not yet returned as messages.
    public var pendingByteCount: Int { buffer.count - start }

    /// Bytes of memory the framer holds now (its buffer's capacity).
    public var retainedByteCount: Int { buffer.capacity }

    /// Adds received bytes. Moves the pending bytes to the front first when messages were taken
    /// since the last compaction (see ``compact(reserving:)``).
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact(reserving: bytes.count)
        let needed = buffer.count + bytes.count
        if needed > buffer.capacity {
            // Double, as arrays do, but not past what one message and this read can need.
            let ceiling = limit + 1 + bytes.count
            let doubled = 2 * buffer.capacity
            buffer.reserveCapacity(needed > ceiling ? max(needed, doubled) : max(needed, min(doubled, ceiling)))
        }
        buffer.append(contentsOf: bytes)
    }

    /// Drops the bytes already returned as messages, and reallocates when the capacity exceeds
    /// both ``keptCapacity`` and twice what the pending bytes and `room` more need. Costs nothing
    /// when no message was taken since the last call; otherwise moves the pending bytes.
    public mutating func compact(reserving room: Int = 0) {
        let pending = buffer.count - start
        let needed = pending + room
        if buffer.capacity > max(Self.keptCapacity, 2 * needed) {
            var smaller: [UInt8] = []
            smaller.reserveCapacity(needed)
            smaller.append(contentsOf: buffer[start...])
            buffer = smaller
        } else if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
        } else if start > 0 {
            buffer.removeSubrange(..<start)
        } else {
            return
        }
        scanned -= start
        start = 0
    }

    /// The next complete message without its NUL, or `nil` until more bytes arrive.
    /// Throws ``VarlinkError/tooLarge(limit:)`` once a message is known to exceed the limit
    /// (its NUL comes later than `limit` bytes after its start, or has not come by then); the
    /// stream cannot be trusted after that and the connection should be closed.
    public mutating func next() throws(VarlinkError) -> ArraySlice<UInt8>? {
        let from = max(start, scanned)
        let terminator: Int? = buffer.withUnsafeBufferPointer { bytes in
            guard from < bytes.count, let base = bytes.baseAddress,
                let found = memchr(base + from, 0, bytes.count - from)
            else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        guard let index = terminator else {
            scanned = buffer.count
            if buffer.count - start > limit { throw .tooLarge(limit: limit) }
            return nil
        }
        if index - start > limit { throw .tooLarge(limit: limit) }
        let message = buffer[start..<index]
        start = index + 1
        scanned = start
        return message
    }
}
