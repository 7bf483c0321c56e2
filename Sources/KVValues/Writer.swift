/// Who made a change: the process on the other end of the connection that asked for it, as kvd
/// learnt it from the kernel and `/proc` when the connection first wrote. What history keeps of
/// each change, what `Blame` answers and what watchers are told.
///
/// Every part may be unknown (nil): a change older than kvd's writer records, one made by kvd
/// itself (a drop-in reload, the fleet), or a process that exited before it could be read. Each
/// text is bounded to ``maxTextBytes`` bytes (cut at a character boundary), so a record grows by
/// at most ``maxEncodedBytes``. Values only; thread-safe.
public struct Writer: Sendable, Hashable {
    /// The user (uid) the process ran as.
    public var uid: UInt32?
    /// Its process id when it connected.
    public var pid: Int32?
    /// Its program: the executable's path (`/proc/PID/exe`), else its command name (`comm`).
    public var program: String?
    /// Its application id, where its sandbox or launcher names one (`org.gnome.TextEditor`).
    public var app: String?

    /// The most bytes kept of `program` and of `app`.
    public static let maxTextBytes = 255

    /// The most bytes the members of a writer add to a log record or history line:
    /// `,"uid":U,"pid":P,"program":"…","app":"…"` with both texts at their longest and every
    /// byte escaped as `\u00XX` (6 bytes).
    public static let maxEncodedBytes = 2 * (6 * maxTextBytes + 2) + 60

    /// A writer; `program` and `app` are cut to ``maxTextBytes`` and empty texts count as none.
    public init(uid: UInt32? = nil, pid: Int32? = nil, program: String? = nil, app: String? = nil) {
        self.uid = uid
        self.pid = pid.flatMap { $0 > 0 ? $0 : nil }
        self.program = program.flatMap(Self.bounded)
        self.app = app.flatMap(Self.bounded)
    }

    /// Nothing is known.
    public var isUnknown: Bool { uid == nil && pid == nil && program == nil && app == nil }

    /// The same writer with only what a viewer of uid `viewer` may see: all of it when the viewer
    /// made the change (same uid); nothing otherwise.
    public func visible(to viewer: UInt32?) -> Writer? {
        guard let viewer, let uid, viewer == uid else { return nil }
        return self
    }

    /// `text` cut to ``maxTextBytes`` at a character boundary; nil when empty.
    static func bounded(_ text: String) -> String? {
        guard !text.isEmpty else { return nil }
        guard text.utf8.count > maxTextBytes else { return text }
        var bytes = Array(text.utf8.prefix(maxTextBytes))
        while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

extension Writer {
    /// Appends the writer's known parts as object members, each preceded by a comma:
    /// `,"uid":U,"pid":P,"program":"…","app":"…"` (what the log, history and replies carry).
    public func appendMembers(to out: inout [UInt8]) {
        if let uid {
            out.appendLiteral(#","uid":"#)
            JSONWriter.writeInteger(Int64(uid), into: &out)
        }
        if let pid {
            out.appendLiteral(#","pid":"#)
            JSONWriter.writeInteger(Int64(pid), into: &out)
        }
        if let program {
            out.appendLiteral(#","program":"#)
            JSONWriter.writeString(program, into: &out)
        }
        if let app {
            out.appendLiteral(#","app":"#)
            JSONWriter.writeString(app, into: &out)
        }
    }

    /// The writer an object's `uid`, `pid`, `program` and `app` members name; nil when it has
    /// none. Throws what `refuse` makes of the reason when one is there but not of its type (a
    /// uid or pid out of range, a text not a string).
    public static func decode<Failure: Error>(members json: JSON, _ refuse: (String) -> Failure) throws(Failure)
        -> Writer?
    {
        var writer = Writer()
        switch json["uid"] {
        case nil: break
        case .integer(let found)? where found >= 0 && found <= Int64(UInt32.max): writer.uid = UInt32(found)
        default: throw refuse("has a \"uid\" that is not a user id")
        }
        switch json["pid"] {
        case nil: break
        case .integer(let found)? where found > 0 && found <= Int64(Int32.max): writer.pid = Int32(found)
        default: throw refuse("has a \"pid\" that is not a process id")
        }
        for (name, path) in [("program", \Writer.program), ("app", \Writer.app)] {
            switch json[name] {
            case nil: break
            case .string(let text)?: writer[keyPath: path] = Self.bounded(text)
            default: throw refuse("has a \"\(name)\" that is not a string")
            }
        }
        return writer.isUnknown ? nil : writer
    }

    /// What a person reads: `PROGRAM (app APP, pid P, uid U)`, the parts known; `unknown` when
    /// nothing is. Texts escaped for one line.
    public var summary: String {
        var details: [String] = []
        if let app { details.append("app \(app.escapedForOneLine)") }
        if let pid { details.append("pid \(pid)") }
        if let uid { details.append("uid \(uid)") }
        let name = program?.escapedForOneLine ?? (details.isEmpty ? "unknown" : "?")
        return details.isEmpty ? name : "\(name) (\(details.joined(separator: ", ")))"
    }
}

extension Writer {
    /// The writer as a JSON object of its known parts (the protocol's `Writer` type).
    public var json: JSON {
        var members: [(String, JSON)] = []
        if let uid { members.append(("uid", .integer(Int64(uid)))) }
        if let pid { members.append(("pid", .integer(Int64(pid)))) }
        if let program { members.append(("program", .string(program))) }
        if let app { members.append(("app", .string(app))) }
        return .object(Dictionary(uniqueKeysWithValues: members))
    }

    /// The writer a JSON object names (as ``json`` writes it); nil when it names none or is not
    /// one (a reader that must not fail over who made a change reads it as unknown).
    public init?(json: JSON) {
        struct Unreadable: Error {}
        guard case .object = json, let writer = try? Self.decode(members: json, { _ in Unreadable() }) else {
            return nil
        }
        self = writer
    }

    /// Appends the writer as a JSON object (``json``), written straight to bytes.
    public func appendObject(to out: inout [UInt8]) {
        let start = out.count
        appendMembers(to: &out)
        if out.count > start {
            out[start] = UInt8(ascii: "{")
        } else {
            out.append(UInt8(ascii: "{"))
        }
        out.append(UInt8(ascii: "}"))
    }
}
