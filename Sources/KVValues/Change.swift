/// One change to one key: a new value, or `nil` for a removal. What `Apply` carries, what a
/// commit reports, and what `Watch` streams.
public struct Change: Sendable, Equatable, Hashable {
    public var key: Key
    /// The new value; `nil` removes the key.
    public var value: Value?

    public init(key: Key, value: Value?) {
        self.key = key
        self.value = value
    }
}
