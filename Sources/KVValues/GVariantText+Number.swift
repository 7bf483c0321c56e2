/// Numbers in ``GVariantText``: an integer token (`5`, `-5`, `0x1F`, `017` octal) as any integer
/// type it fits, a floating one (`5.0`, `1e3`, `inf`, `nan`) as a double, as GLib reads them.
extension GVariantNode {
    func numberValue(_ token: String, as type: String) throws(Failure) -> GVariant {
        if type == "d" { return .double(try doubleValue(token)) }
        var digits = Substring(token)
        let negative = digits.hasPrefix("-")
        if negative { digits = digits.dropFirst() }
        let magnitude = try integerMagnitude(digits)
        let isNegative = negative && magnitude != 0
        func signed(_ limit: UInt64) throws(Failure) -> Int64 {
            guard magnitude <= limit + (isNegative ? 1 : 0) else { throw overflow(type) }
            return isNegative ? Int64(bitPattern: 0 &- magnitude) : Int64(magnitude)
        }
        func unsigned(_ limit: UInt64) throws(Failure) -> UInt64 {
            guard !isNegative, magnitude <= limit else { throw overflow(type) }
            return magnitude
        }
        switch type {
        case "y": return .byte(UInt8(try unsigned(UInt64(UInt8.max))))
        case "n": return .int16(Int16(try signed(UInt64(Int16.max))))
        case "q": return .uint16(UInt16(try unsigned(UInt64(UInt16.max))))
        case "i": return .int32(Int32(try signed(UInt64(Int32.max))))
        case "u": return .uint32(UInt32(try unsigned(UInt64(UInt32.max))))
        case "x": return .int64(try signed(UInt64(Int64.max)))
        case "t": return .uint64(try unsigned(UInt64.max))
        case "h": return .handle(Int32(try signed(UInt64(Int32.max))))
        default: throw typeError(type)
        }
    }

    private func overflow(_ type: String) -> Failure {
        .init(offset: offset, reason: "number out of range for type '\(type.prefix(1))'")
    }

    /// The digits as C's `strtoull` with base 0 reads them (an optional `+`, then `0x` hex, `0`
    /// octal or decimal), all of them consumed.
    private func integerMagnitude(_ text: Substring) throws(Failure) -> UInt64 {
        var digits = text
        if digits.hasPrefix("+") { digits = digits.dropFirst() }
        var radix: UInt64 = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X"), digits.count > 2 {
            radix = 16
            digits = digits.dropFirst(2)
        } else if digits.hasPrefix("0"), digits.count > 1 {
            radix = 8
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty else { throw .init(offset: offset, reason: "invalid character in number") }
        var value: UInt64 = 0
        var tooBig = false
        for byte in digits.utf8 {
            guard let digit = Hex.digit(byte), UInt64(digit) < radix else {
                throw .init(offset: offset, reason: "invalid character in number")
            }
            let (times, overflowA) = value.multipliedReportingOverflow(by: radix)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(digit))
            if overflowA || overflowB { tooBig = true }
            value = sum
        }
        if tooBig { throw .init(offset: offset, reason: "integer too big for any type") }
        return value
    }

    /// The double C's `strtod` reads from all of `token`; one too large (or too small to be a
    /// normal double, which `strtod` reports as a range error) is refused, as GLib refuses it.
    private func doubleValue(_ token: String) throws(Failure) -> Double {
        guard let value = Double(token) else { throw .init(offset: offset, reason: "invalid character in number") }
        let spelledInfinity = token.lowercased().contains("inf")
        if (value.isInfinite && !spelledInfinity) || value.isSubnormal {
            throw .init(offset: offset, reason: "number too big for any type")
        }
        return value
    }
}
