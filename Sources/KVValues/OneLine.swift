extension String {
    /// The text with a backslash and each control character escaped (`\\`, `\n`, `\t`, `\r`,
    /// `\xHH` for the others, DEL included), so that it fits on one line and cannot forge
    /// another: how kvctl prints names (`keys`, `locks`, `status`) and how kvd logs names that
    /// came from outside (etcd keys left out of the fleet mirror). Text without those
    /// characters is returned as it is.
    public var escapedForOneLine: String {
        guard unicodeScalars.contains(where: { $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F }) else { return self }
        var line = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\\": line += "\\\\"
            case "\n": line += "\\n"
            case "\t": line += "\\t"
            case "\r": line += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                line += "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: line.unicodeScalars.append(scalar)
            }
        }
        return line
    }
}
