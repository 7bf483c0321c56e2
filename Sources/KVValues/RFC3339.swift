import FoundationEssentials

/// RFC 3339 date-times, written in UTC and read with any offset.
///
/// Formatting emits at least millisecond digits and as many more as the `Date` needs, so that
/// `parse(format(d)) == d` exactly for every date in years 0001–9999.
public enum RFC3339 {
    /// Earliest and latest instants representable (0001-01-01 to 9999-12-31, UTC).
    public static let range: ClosedRange<Double> = -62_135_596_800...253_402_300_799.999

    /// The UTC text of `date`, like `2026-11-29T17:00:00.250Z`. Total: a date outside
    /// ``range`` (which no valid ``Value`` holds; see ``Value/validate()``), NaN included, is
    /// written as the nearest end of the range instead of trapping.
    public static func format(_ date: Date) -> String {
        let since1970 = date.timeIntervalSince1970
        guard range.contains(since1970) else {
            return format(
                Date(timeIntervalSince1970: since1970 > range.upperBound ? range.upperBound : range.lowerBound))
        }
        // Date keeps seconds since 2001 as a Double; split that, not the 1970 interval, to stay exact.
        let interval = date.timeIntervalSinceReferenceDate
        let whole = interval.rounded(.down)
        let seconds = Int64(whole) + referenceOffset
        let fraction = interval - whole  // exact: no rounding in this subtraction
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = civil(fromDays: days)
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
        text += "T" + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        text += "." + fractionDigits(fraction, whole: whole) + "Z"
        return text
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `nil` if malformed or out of range.
    public static func parse(_ text: String) -> Date? {
        var scanner = Scanner(bytes: Array(text.utf8))
        guard let year = scanner.number(4), scanner.expect("-"), let month = scanner.number(2), scanner.expect("-"),
            let day = scanner.number(2), scanner.expect("Tt "), let hour = scanner.number(2), scanner.expect(":"),
            let minute = scanner.number(2), scanner.expect(":"), let second = scanner.number(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61, year >= 1
        else { return nil }
        guard let fraction = scanner.fraction(), let offset = scanner.offset(), scanner.atEnd else { return nil }
        let seconds = days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offset
        // An offset, or a fraction rounded up to the next second, can carry the instant out of
        // 0001-9999, where ``format(_:)`` could not write it back in four-digit years.
        let interval = Double(seconds - referenceOffset) + fraction
        guard range.contains(interval + Double(referenceOffset)) else { return nil }
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    /// Reads a time stamp's parts from the front; each method returns `nil` (or false) on a
    /// malformed part.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        /// `width` decimal digits.
        mutating func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + width] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            index += width
            return value
        }

        /// One of `characters`.
        mutating func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }

        /// `.` and at least one digit, as a fraction of a second; 0 when there is no `.`.
        mutating func fraction() -> Double? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: ".") else { return 0 }
            let start = index
            index += 1
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            guard index - start > 1 else { return nil }
            return Double("0" + String(decoding: bytes[start..<index], as: UTF8.self))
        }

        /// `Z` or `±HH:MM`, as seconds east of UTC.
        mutating func offset() -> Int64? {
            if expect("Zz") { return 0 }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") else {
                return nil
            }
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else {
                return nil
            }
            return sign * (hours * 3600 + minutes * 60)
        }
    }

    /// Seconds from 1970-01-01 to 2001-01-01, Foundation's reference date.
    private static let referenceOffset: Int64 = 978_307_200

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// The fewest decimal digits of `fraction` (at least three) that read back exactly:
    /// `whole + 0.DIGITS == whole + fraction`, as ``parse(_:)`` computes it. A date taken from
    /// the clock needs about seven, not the seventeen the fraction alone would.
    private static func fractionDigits(_ fraction: Double, whole: Double) -> String {
        var scale = 1000.0
        for count in 3...17 {
            defer { scale *= 10 }
            let scaled = (fraction * scale).rounded()
            guard scaled < scale else { continue }
            let digits = String(Int64(scaled))
            let padded = String(repeating: "0", count: count - digits.count) + digits
            if let back = Double("0." + padded), whole + back == whole + fraction { return trimmed(padded) }
        }
        return exactDigits(fraction)
    }

    /// Drops trailing zeros beyond the third digit.
    private static func trimmed(_ digits: String) -> String {
        var digits = digits
        while digits.count > 3, digits.hasSuffix("0") { digits.removeLast() }
        return digits
    }

    /// All the digits of `fraction` (shortest round-trip form of the fraction alone).
    private static func exactDigits(_ fraction: Double) -> String {
        var digits = ""
        if fraction > 0 {
            // `description` gives the shortest digits that round-trip: "0.25" or "1.5e-05".
            let text = fraction.description
            if let exponentIndex = text.firstIndex(where: { $0 == "e" || $0 == "E" }) {
                let mantissa = text[..<exponentIndex].filter { $0 != "." }
                let exponent = Int(text[text.index(after: exponentIndex)...])!
                digits = String(repeating: "0", count: -exponent - 1) + mantissa
            } else {
                digits = String(text.drop(while: { $0 != "." }).dropFirst())
            }
        }
        while digits.count > 3, digits.hasSuffix("0") { digits.removeLast() }
        return digits.count < 3 ? digits + String(repeating: "0", count: 3 - digits.count) : digits
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
    static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension RFC3339 {
    /// Appends the quoted UTC text of `milliseconds` since the Unix epoch, like
    /// `"2026-11-29T17:00:00.250Z"` (always three fraction digits, as ``format(_:)`` writes a
    /// whole millisecond), without building a `String`: for replies that carry many times.
    /// Clamped to ``range`` like ``format(_:)``.
    public static func writeMilliseconds(_ milliseconds: Int64, into out: inout [UInt8]) {
        let clamped = min(
            max(milliseconds, Int64(range.lowerBound) * 1000), Int64(range.upperBound.rounded(.down)) * 1000 + 999)
        let (seconds, millisecond) = (clamped.floorDivided(by: 1000), clamped.floorModulo(1000))
        let (days, secondOfDay) = (seconds.floorDivided(by: 86_400), seconds.floorModulo(86_400))
        let (year, month, day) = civil(fromDays: days)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        out.append(UInt8(ascii: "\""))
        digits(year, 4)
        out.append(UInt8(ascii: "-"))
        digits(month, 2)
        out.append(UInt8(ascii: "-"))
        digits(day, 2)
        out.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        out.append(UInt8(ascii: "."))
        digits(millisecond, 3)
        out.append(contentsOf: "Z\"".utf8)
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return self % divisor < 0 ? quotient - 1 : quotient
    }

    fileprivate func floorModulo(_ divisor: Int64) -> Int64 {
        let remainder = self % divisor
        return remainder < 0 ? remainder + divisor : remainder
    }
}
