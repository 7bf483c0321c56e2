/// GSettings (and dconf) key paths as kvd domains and keys: the GSettings backend's rule
/// (`clib/gio/mapping.c`, docs/gsettings.md), in Swift for the system instance's dconf layer.
///
/// `/org/gnome/desktop/interface/clock-format` is the key `clock-format` of the domain
/// `org.gnome.desktop.interface`: each folder segment becomes a domain segment, bytes other than
/// ASCII letters, digits and `-` (and a `-` that starts the domain) written `_XX` (hex, capital
/// letters), while the domain stays within 255 bytes and no segment is empty; what is left is the
/// key. A path of no folder (or whose first segment does not fit) is in the domain `_`.
public enum GSettingsPath {
    static let domainLimit = 255

    /// The domain and key of `path`, or nil when it is no key path (not starting with `/`,
    /// ending with `/`).
    public static func map(_ path: String) -> (domain: String, key: String)? {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/"), let lastSlash = bytes.lastIndex(of: UInt8(ascii: "/")),
            lastSlash < bytes.count - 1
        else { return nil }
        var domain: [UInt8] = []
        var cursor = 1
        while let slash = bytes[cursor...].firstIndex(of: UInt8(ascii: "/")), slash <= lastSlash {
            let piece = escape(bytes[cursor..<slash], startsDomain: domain.isEmpty)
            let needed = piece.count + (domain.isEmpty ? 0 : 1)
            if slash == cursor || domain.count + needed > domainLimit { break }
            if !domain.isEmpty { domain.append(UInt8(ascii: ".")) }
            domain += piece
            cursor = slash + 1
        }
        if domain.isEmpty { return ("_", String(decoding: bytes[1...], as: UTF8.self)) }
        return (String(decoding: domain, as: UTF8.self), String(decoding: bytes[cursor...], as: UTF8.self))
    }

    private static func escape(_ segment: ArraySlice<UInt8>, startsDomain: Bool) -> [UInt8] {
        var out: [UInt8] = []
        for (offset, byte) in segment.enumerated() {
            let alnum =
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            if alnum || (byte == UInt8(ascii: "-") && !(startsDomain && offset == 0)) {
                out.append(byte)
            } else {
                out += Array(("_" + Hex.encode([byte]).uppercased()).utf8)
            }
        }
        return out
    }
}
