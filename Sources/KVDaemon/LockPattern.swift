import KVValues

/// Locks by pattern: a locked key holding `*` locks every key it matches, `*` standing for any
/// run of characters (none too); `*` alone locks the whole domain. Any key matches itself.
enum LockPattern {
    /// Whether the lock `pattern` covers `key`.
    static func matches(_ pattern: Key, _ key: Key) -> Bool {
        if pattern == key { return true }
        let parts = pattern.name.split(separator: "*", omittingEmptySubsequences: false)
        guard parts.count > 1 else { return false }
        var rest = Substring(key.name)
        guard rest.hasPrefix(parts[0]) else { return false }
        rest = rest.dropFirst(parts[0].count)
        for part in parts.dropFirst().dropLast() {
            guard let range = rest.firstRange(of: part) else { return false }
            rest = rest[range.upperBound...]
        }
        let last = parts[parts.count - 1]
        return rest.count >= last.count && rest.hasSuffix(last)
    }

    static func isPattern(_ key: Key) -> Bool { key.name.contains("*") }
}
