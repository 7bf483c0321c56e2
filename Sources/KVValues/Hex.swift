/// Hexadecimal text: how kvctl takes and prints `-data`, how kvd's fleet decodes a gRPC
/// status message's `%XX` escapes and how the JSON parser reads a `\uXXXX` escape. One
/// place for the digits, so that every reader takes the same ones.
public enum Hex {
    /// The value of one hex digit (`0`-`9`, `a`-`f`, `A`-`F`), or nil for any other byte.
    @inlinable
    public static func digit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The bytes `text` spells, two digits a byte; nil if its length is odd or a character is
    /// not a hex digit.
    public static func decode(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = digit(digits[index]), let low = digit(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    /// `bytes` as lowercase hex digits, two a byte.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var text: [UInt8] = []
        for byte in bytes {
            text.append(lowercaseDigits[Int(byte >> 4)])
            text.append(lowercaseDigits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `0123456789abcdef`, as bytes.
    public static let lowercaseDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
