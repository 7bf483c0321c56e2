// The one kvctl type ValueParser.swift needs, as in Sources/KVCtl/Command.swift, so the fuzz
// binary builds the parser without the rest of kvctl (which needs KVClient).

/// Wrong use of kvctl.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
