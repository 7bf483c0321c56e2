import KVSystem

/// The folders that decide what a drop-in path names, so that ``DropInReader`` can refuse a path
/// any of them lets someone untrusted change (`docs/drop-in-rules.md`): whoever may write a
/// folder may rename, remove or replace what is in it, a symbolic link included.
///
/// Walks `path` one component at a time as the kernel does: each folder it passes through is
/// one that decides, and a symbolic link met on the way is followed (its target's components
/// are walked in its place), so the folders on the way to what every link leads to decide too.
/// At most ``maxLinks`` links are followed (the kernel's own limit). A component that does not
/// exist ends the walk (there is nothing to read past it). Reads through ``SystemCalls``
/// (`readlink`); stateless.
struct DropInPath {
    /// Links followed before the walk gives up, as the kernel's `ELOOP` (40 since Linux 4.2).
    static let maxLinks = 40

    /// What a walk found: every folder that decides, in the order met (no repeats), every
    /// symbolic link followed (its owner may point it elsewhere, in a sticky folder too), and the
    /// path `path` resolves to, links resolved.
    struct Walk: Equatable {
        var folders: [String] = []
        var links: [String] = []
        var resolved: String
    }

    enum Failure: Error, Equatable {
        /// More than ``maxLinks`` links.
        case tooManyLinks
    }

    let system: any SystemCalls

    /// The walk of `path`: absolute, or relative to the working folder (whose own ancestors are
    /// then not walked, and `.` decides).
    func walk(_ path: String) throws(Failure) -> Walk {
        var pending = Self.components(of: path)
        var current = path.hasPrefix("/") ? "/" : "."
        var walk = Walk(resolved: current)
        var links = 0
        while !pending.isEmpty {
            let part = pending.removeFirst()
            if part == "." { continue }
            if part == ".." {
                current = Self.parent(of: current)
                continue
            }
            if !walk.folders.contains(current) { walk.folders.append(current) }
            let next = current == "/" ? "/" + part : current + "/" + part
            guard let target = (try? system.linkTarget(next)) ?? nil else {
                current = next
                continue
            }
            links += 1
            guard links <= Self.maxLinks else { throw .tooManyLinks }
            if !walk.links.contains(next) { walk.links.append(next) }
            pending = Self.components(of: target) + pending
            if target.hasPrefix("/") { current = "/" }
        }
        walk.resolved = current
        return walk
    }

    static func components(of path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    /// `/a` for `/a/b`, `/` for `/a` and `/`; `.` for `./a`; `./..` for `.` (a relative
    /// `--config-dir` that climbs).
    static func parent(of path: String) -> String {
        if path == "/" { return "/" }
        if path == "." || path.hasSuffix("/..") { return path + "/.." }
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let head = String(path[..<slash])
        return head.isEmpty ? "/" : head
    }
}
