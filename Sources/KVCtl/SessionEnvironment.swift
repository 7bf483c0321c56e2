import Glibc
import KVSystem

/// The `GSETTINGS_BACKEND` a user's new session gets from environment.d, read as systemd's
/// environment generator reads it in a user's manager (not as root): the `*.conf` files of the
/// system folders a user can list, a name in an earlier folder hiding the same name in a later
/// one, in the order of their names, each one a user can read; the last assignment wins. A
/// user's own `~/.config/environment.d` is theirs, not the machine's, and is not read.
struct SessionEnvironment {
    /// The generator's system folders, earliest first.
    static let folders = [
        "/etc/environment.d", "/run/environment.d", "/usr/local/lib/environment.d", "/usr/lib/environment.d",
    ]
    static let variable = "GSETTINGS_BACKEND"

    let system: any SystemCalls

    /// The backend new sessions get and the file that sets it; `nil`: no file sets it (GLib's
    /// default, dconf).
    func backend() -> (value: String, file: String)? {
        var files: [String: String] = [:]
        for folder in Self.folders.reversed() where everyoneMay(folder, 0o005) {
            for name in (try? system.contentsOfDirectory(folder)) ?? [] where name.hasSuffix(".conf") {
                files[name] = folder + "/" + name
            }
        }
        var found: (value: String, file: String)?
        for name in files.keys.sorted() {
            if let path = files[name], let value = assignment(in: path) { found = (value, path) }
        }
        return found
    }

    /// Why the switch's file `path` does not give sessions what `enable` writes (`nil`: it does,
    /// or it is absent): each reason with what to do about it.
    func problem(of path: String, expected: String) -> String? {
        guard (try? system.status(path, followingLinks: false)) != nil else { return nil }
        let folder = String(path[..<path.lastIndex(of: "/")!])
        let again = "run `kvctl --system gnome enable` again"
        guard let file = try? system.status(path, followingLinks: true) else {
            return "\(path) is a symbolic link to nothing: remove it, then \(again)"
        }
        if file.kind == .directory {
            return "\(path) is a folder, not the file `enable` writes: remove it, then \(again)"
        }
        if file.kind != .regular { return "\(path) is not a regular file: remove it, then \(again)" }
        if !everyoneMay(folder, 0o005) {
            return "\(folder) is not readable by every user (mode \(mode(folder))): \(again)"
        }
        if file.permissions & 0o004 == 0 {
            return "\(path) is not readable by every user (mode \(mode(path))): \(again)"
        }
        guard let value = assignment(in: path) else {
            return "\(path) sets no \(Self.variable), not what `enable` writes: \(again)"
        }
        if value != expected {
            return "\(path) sets \(Self.variable)=\(value), not what `enable` writes: \(again), or `disable`"
        }
        return nil
    }

    /// The file's last `GSETTINGS_BACKEND=` value; `nil` when it sets none or a user cannot read it.
    private func assignment(in path: String) -> String? {
        guard let status = try? system.status(path, followingLinks: true), status.kind == .regular,
            status.permissions & 0o004 != 0, let bytes = try? Files.read(path)
        else { return nil }
        var value: String?
        for raw in String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.trimmingSpaces()
            guard !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            guard line[..<equals].trimmingSpaces() == Self.variable else { continue }
            value = unquoted(line[line.index(after: equals)...].trimmingSpaces())
        }
        return value
    }

    private func unquoted(_ text: String) -> String {
        for quote in ["\"", "'"] where text.count >= 2 && text.hasPrefix(quote) && text.hasSuffix(quote) {
            return String(text.dropFirst().dropLast())
        }
        return text
    }

    /// Whether every user has the permission bits `bits` (of `o`) on `path` (links followed).
    private func everyoneMay(_ path: String, _ bits: UInt32) -> Bool {
        guard let status = try? system.status(path, followingLinks: true) else { return false }
        return status.permissions & bits == bits
    }

    private func mode(_ path: String) -> String {
        guard let status = try? system.status(path, followingLinks: true) else { return "?" }
        return "0" + String(status.permissions & 0o7777, radix: 8)
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}
