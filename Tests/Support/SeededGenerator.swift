/// SplitMix64: a small seeded generator, so a failing property run repeats exactly.
public struct SeededGenerator: RandomNumberGenerator {
    public var state: UInt64

    /// Starts from `state` as it is.
    public init(state: UInt64) { self.state = state }

    /// Starts from a state derived from `seed` (so seeds 0, 1, 2 give unrelated streams).
    public init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`.
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
