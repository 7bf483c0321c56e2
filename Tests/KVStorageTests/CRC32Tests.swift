import KVTestSupport
import Testing

@testable import KVStorage

/// The log's checksum (slicing-by-8) against the standard check values and a bit-by-bit CRC-32.
@Suite struct CRC32Tests {
    @Test func standardCheckValues() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }

    /// Every length from 0 to 100 at every start offset 0...7 (unaligned loads, the tail loop).
    @Test func agreesWithTheBitwiseDefinition() {
        var generator = SeededGenerator.forTest()
        let bytes = (0..<108).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<8 {
            for count in 0...100 {
                let slice = bytes[start..<(start + count)]
                #expect(CRC32.checksum(slice) == Self.bitwise(slice), "start \(start), \(count) bytes")
            }
        }
    }

    private static func bitwise(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
