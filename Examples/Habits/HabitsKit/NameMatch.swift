/// Finding a habit by the name a user typed, and suggesting close names when none matches.
public enum NameMatch {
    /// Lowercased, without surrounding spaces: v0.1 data holds names like `"Eating "`.
    public static func normalized(_ name: String) -> String {
        trimmed(name).lowercased()
    }

    /// `text` without leading and trailing whitespace.
    public static func trimmed(_ text: String) -> String {
        String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }

    /// The index of the habit named `name`: an exact match, else the only one equal ignoring
    /// case and surrounding spaces.
    public static func index(of name: String, in names: [String]) -> Int? {
        if let exact = names.firstIndex(of: name) { return exact }
        let wanted = normalized(name)
        let loose = names.indices.filter { normalized(names[$0]) == wanted }
        return loose.count == 1 ? loose[0] : nil
    }

    /// Up to three names close to `name`, closest first: within an edit distance of a third of
    /// its length (at least 2), or starting with it.
    public static func suggestions(for name: String, in names: [String]) -> [String] {
        let wanted = normalized(name)
        guard !wanted.isEmpty else { return [] }
        let limit = max(2, wanted.count / 3)
        let scored = names.compactMap { candidate -> (String, Int)? in
            let other = normalized(candidate)
            let distance = editDistance(wanted, other)
            if distance <= limit { return (candidate, distance) }
            if other.hasPrefix(wanted) || wanted.hasPrefix(other) && !other.isEmpty { return (candidate, limit + 1) }
            return nil
        }
        return scored.sorted { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }.prefix(3).map(\.0)
    }

    /// Levenshtein distance between two strings, by characters.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
