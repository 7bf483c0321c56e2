/// A value as plain text, the way `kvctl get` shows a scalar: a string as itself (`dark`, not
/// `string("dark")`), an integer as digits, a real with a `.` or an exponent, a bool as
/// `true`/`false`, a date as RFC 3339 UTC; data, arrays and dictionaries as one line of typed
/// JSON (`["a",1]`, `{"$data":"AQID"}`).
extension Value: CustomStringConvertible {
    public var description: String {
        switch self {
        case .string(let text): text
        case .integer(let number): String(number)
        case .real(let number): number.description
        case .bool(let flag): flag ? "true" : "false"
        case .date(let date): RFC3339.format(date)
        case .data, .array, .dictionary: JSONWriter(sortKeys: true).string(typedJSON)
        }
    }
}
