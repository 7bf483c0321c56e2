import Glibc

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

    /// The generator of a randomized test: seeded from `KVD_TEST_SEED` when it is set (to repeat
    /// a run), else from the system's generator. Prints the seed with the test's name, so every
    /// run, failed or not, can be repeated exactly.
    public static func forTest(_ test: String = #function, file: String = #fileID) -> SeededGenerator {
        let given = getenv("KVD_TEST_SEED").flatMap { UInt64(String(cString: $0)) }
        let seed = given ?? UInt64.random(in: 0...UInt64.max)
        print("\(file) \(test): seed \(seed) (KVD_TEST_SEED=\(seed) repeats it)")
        return SeededGenerator(seed: seed)
    }

    /// A number in `0..<bound`.
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
