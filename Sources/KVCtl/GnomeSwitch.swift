import Glibc
import KVSystem

/// What `kvctl --system gnome ACTION` does.
public enum GnomeAction: String, Sendable, Equatable, CaseIterable {
    case enable, disable, status
}

/// `kvctl --system gnome enable|disable|status`: the machine's one switch between dconf and kvd
/// for GSettings apps (docs/gsettings.md, "One switch for the machine"). It needs no kvd running: it writes two
/// files of systemd's, root's, mode 0644, each replaced atomically.
///
/// - ``environmentFile`` (`enable` writes it, `disable` removes it): `GSETTINGS_BACKEND=kvd` for
///   every new session, which systemd's user manager reads and GNOME's session and its apps
///   inherit. Sessions already running keep their backend until their user logs in again.
/// - ``loginDropIn`` (`enable` writes it, `disable` keeps it): makes every user's
///   `default.target` want `kvd-gnome-login.service`, which runs `kvd-dconf-import --login` at
///   each login: it moves the user's dconf values into kvd once after `enable`, and kvd's back
///   into dconf once after `disable`, so nothing is lost either way; otherwise it does nothing.
struct GnomeSwitch {
    static let environmentFile = "/etc/environment.d/50-kvd-gnome.conf"
    static let loginDropIn = "/etc/systemd/user/default.target.d/50-kvd-gnome.conf"
    static let environmentText = """
        # Written by `kvctl --system gnome enable`; `kvctl --system gnome disable` removes it.
        # GSettings apps of every new session read and write their settings in kvd.
        GSETTINGS_BACKEND=kvd

        """
    static let loginText = """
        # Written by `kvctl --system gnome enable`, kept by `disable`: at each login,
        # kvd-gnome-login.service moves the user's GSettings values to the side the switch names
        # (once per switch; nothing to do otherwise).
        [Unit]
        Wants=kvd-gnome-login.service

        """

    let system: any SystemCalls
    let console: any Console

    func run(_ action: GnomeAction) throws(Failure) {
        switch action {
        case .enable:
            try write(Self.loginDropIn, Self.loginText)
            try write(Self.environmentFile, Self.environmentText)
            console.out(
                "GSettings apps of new sessions use kvd; each user's dconf values move into kvd at their next login\n")
        case .disable:
            try remove(Self.environmentFile)
            console.out(
                "GSettings apps of new sessions use dconf; each user's values move back into dconf at their next login\n"
            )
        case .status:
            status()
        }
    }

    /// What new sessions get, read as a user's session reads it (``SessionEnvironment``), then
    /// why, when the switch's file is there but not what `enable` writes, or a later file
    /// overrides it; then whether the move at login is on.
    private func status() {
        let environment = SessionEnvironment(system: system)
        let backend = environment.backend()
        let source = backend.map { "\(SessionEnvironment.variable)=\($0.value) from \($0.file)" }
        var text =
            "GSettings: \(backend?.value ?? "dconf") for new sessions (\(source ?? "no file sets \(SessionEnvironment.variable)"))\n"
        if let problem = environment.problem(of: Self.environmentFile, expected: "kvd") {
            text += "warning: \(problem)\n"
        } else if let backend, backend.file != Self.environmentFile, exists(Self.environmentFile) {
            text += "warning: \(backend.file) overrides \(Self.environmentFile): it comes later\n"
        }
        let login = exists(Self.loginDropIn)
        text += "move at login: \(login ? "on" : "off") (\(Self.loginDropIn) \(login ? "present" : "absent"))\n"
        console.out(text)
    }

    private func exists(_ path: String) -> Bool {
        (try? system.status(path, followingLinks: false)) != nil
    }

    /// Replaces `path` with `text` (0644, synced, renamed over it, the folder synced), making
    /// its folder and the folder above it if missing.
    private func write(_ path: String, _ text: String) throws(Failure) {
        let folder = String(path[..<path.lastIndex(of: "/")!])
        try makeFolder(String(folder[..<folder.lastIndex(of: "/")!]))
        try makeFolder(folder)
        let temporary = path + ".kvctl-\(system.processID).tmp"
        do {
            let descriptor = try system.open(temporary, [.write, .create, .exclusive, .noFollow], permissions: 0o644)
            defer { system.close(descriptor) }
            try system.changePermissions(descriptor, 0o644)
            try system.write(descriptor, Array(text.utf8))
            try system.fsync(descriptor)
        } catch let error as SystemError {
            try? system.unlink(temporary)
            throw Failure("cannot write \(path): \(error.errno)\(hint(error.errno))")
        } catch let error as Errno {
            try? system.unlink(temporary)
            throw Failure("cannot write \(path): \(error)\(hint(error))")
        } catch {
            throw Failure("cannot write \(path): \(error)")
        }
        do {
            try system.moveTemporary(temporary, to: path)
            try system.syncDirectory(folder)
        } catch {
            throw Failure("cannot write \(path): \(error.errno)\(hint(error.errno))")
        }
    }

    /// Makes the folder `path`, mode 0755 whatever the umask (every user's manager reads it).
    private func makeFolder(_ path: String) throws(Failure) {
        do { try system.makeDirectory(path, permissions: 0o755) } catch {
            guard error.errno != .fileExists else { return }
            throw Failure("cannot make \(path): \(error.errno)\(hint(error.errno))")
        }
        do {
            let descriptor = try system.open(path, [.directory], permissions: 0)
            defer { system.close(descriptor) }
            try system.changePermissions(descriptor, 0o755)
        } catch let error as SystemError {
            throw Failure("cannot make \(path) readable by every user: \(error.errno)")
        } catch let error as Errno {
            throw Failure("cannot make \(path) readable by every user: \(error)")
        } catch {
            throw Failure("cannot make \(path) readable by every user: \(error)")
        }
    }

    private func remove(_ path: String) throws(Failure) {
        do {
            try system.unlink(path)
            try system.syncDirectory(String(path[..<path.lastIndex(of: "/")!]))
        } catch {
            guard error.errno != .noSuchFileOrDirectory else { return }
            throw Failure("cannot remove \(path): \(error.errno)\(hint(error.errno))")
        }
    }

    private func hint(_ errno: Errno) -> String {
        switch errno.rawValue {
        case EACCES, EPERM: " (the switch is root's: run it as root)"
        case EISDIR: " (a folder is in the file's place: remove it, then run `kvctl --system gnome enable` again)"
        default: ""
        }
    }
}
