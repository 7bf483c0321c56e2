/// The contract's limits, defined once. Every framing that carries values (a varlink call or
/// reply, a log record, a domain file) derives its parser limits from these plus its own
/// nesting and overhead, and every writer checks what it is about to acknowledge against the
/// limits of the readers that must take it back.
public enum Limits {
    /// Deepest nesting of a value's typed JSON: the contract says deeper than 512 is invalid.
    /// A date, data or dictionary counts as the JSON levels it is written with (a `$dict`
    /// wrapper is two).
    public static let valueDepth = 512

    /// Largest varlink message either side accepts, in bytes without its NUL: 16 MiB.
    public static let messageBytes = 16 << 20

    /// Most levels a varlink message puts around a value: an `Apply` call
    /// (`{"parameters":{"changes":[{"value": V}]}}`) and a `Watch` reply (the same shape).
    public static let messageFramingDepth = 4

    /// Longest domain name in bytes (the contract: 1–255).
    public static let domainNameBytes = 255

    /// Longest key in bytes (the contract: 1–1024).
    public static let keyBytes = 1024

    /// What one key of a domain costs in a `Watch` reply besides its key and value as typed
    /// JSON: `{"key":` `,"value":` `}` and the `,` after it (a `List` reply costs less).
    public static let replyEntryOverhead = 18

    /// What a reply that carries a domain's entries costs besides them: its envelope, revisions and
    /// flags, the domain's name (a `Mirror` reply names it: up to 255 bytes) and a source per entry
    /// when one entry fills the reply (generous). 256 would leave no room for a name over about
    /// 160 bytes.
    public static let replyOverhead = 1024

    /// The bytes a domain's keys and values may take, counted as ``DomainBudget`` counts them, so
    /// that its `List` reply fits in one message, and so does each piece of its first `Watch`
    /// and `Mirror` replies (a piece holds one entry at least).
    public static let domainBytes = messageBytes - replyOverhead
}

/// How much of ``Limits/domainBytes`` a domain's entries take: for each key, its key and value
/// as compact typed JSON plus ``Limits/replyEntryOverhead``. What the store keeps per domain so
/// that a write costs a few comparisons, not a pass over the domain.
public enum DomainBudget {
    /// The cost of one entry whose key and value take `bytes` as compact typed JSON (the key
    /// with its quotes and escapes).
    @inline(__always)
    public static func cost(entryBytes bytes: Int) -> Int { bytes + Limits.replyEntryOverhead }
}

extension JSONLimits {
    /// The limits for a text that carries values `framingDepth` levels deep, of at most
    /// `maxBytes`: the value rule is checked on the values themselves, so the parser allows the
    /// framing's levels on top of it.
    public init(framingDepth: Int, maxBytes: Int) {
        self.init(maxDepth: Limits.valueDepth + framingDepth, maxBytes: maxBytes)
    }

    /// A varlink message, call or reply: values inside the deepest message framing.
    public static let message = JSONLimits(framingDepth: Limits.messageFramingDepth, maxBytes: Limits.messageBytes)
}
