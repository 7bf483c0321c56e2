import KVProtocol
import KVSystem
import KVValues

/// How far a connection reaches, decided once, when it is accepted, from its peer
/// (``PeerProcess``): everything, or what a sandbox may (``SandboxAccess``).
enum PeerReach: Equatable {
    /// A program outside any sandbox: no app id, or an XDG app unit's (a label its own user
    /// chose). Everything, as before sandboxes were known.
    case everything
    /// A sandboxed app (Flatpak, snap), named by `app`; nil when its id is not a valid
    /// ``AppID`` or the process could not be identified at all (it exited before kvd read
    /// `/proc`, or no pidfd could name it): then it reaches only the public domains.
    case sandboxed(app: AppID?, label: String)

    /// The reach of a connection whose peer is `peer` (nil: its credentials could not be read).
    init(_ peer: PeerProcess?) {
        guard let peer, peer.isConfirmed else {
            self = .sandboxed(app: nil, label: "a process kvd could not identify")
            return
        }
        guard let app = peer.app, app.isSandboxed else {
            self = .everything
            return
        }
        // The label goes to the journal: only a valid id (no newline, no escape sequence) is named.
        let valid = try? AppID(validating: app.id)
        let name = valid?.name ?? "an app whose id is not valid"
        self = .sandboxed(app: valid, label: "\(name) (\(app.source.rawValue))")
    }
}

/// What a sandboxed connection may reach now: to read, its own domains (``AppID/owns(_:)``),
/// `NSGlobalDomain`, the public domains the admin lists (`--sandbox-readable`) and what a user
/// permitted its app; to write, its own and what a user permitted it to write. The methods that
/// reach no one domain are allowed, filtered or refused by ``verdict(_:)``. Pure.
struct SandboxAccess: Equatable {
    /// The app (nil: unidentified; it owns nothing).
    var app: AppID?
    /// The domains every sandboxed app may read (the admin's `--sandbox-readable` list).
    var readable: [DomainPattern]
    /// What users granted the app (`kvctl permit`).
    var permits: [Permit]

    /// Whether the connection may read `domain` (and its admins' defaults and locks).
    func mayRead(_ domain: Domain) -> Bool {
        guard !domain.isInternal else { return false }
        if domain == .global || app?.owns(domain) == true { return true }
        return readable.contains { $0.matches(domain) } || permits.contains { $0.pattern.matches(domain) }
    }

    /// Whether the connection may change `domain`, and read its history and writers.
    func mayWrite(_ domain: Domain) -> Bool {
        guard !domain.isInternal else { return false }
        return app?.owns(domain) == true || permits.contains { !$0.readOnly && $0.pattern.matches(domain) }
    }

    /// What a sandboxed connection's `request` gets.
    enum Verdict: Equatable {
        /// Served as for anyone.
        case allowed
        /// Served with only the domains ``mayRead(_:)`` (`Domains`, `WatchAll`).
        case filtered
        /// `org.varlink.service.PermissionDenied`, nothing read or changed.
        case denied
    }

    /// The method table (docs/reference/protocol.md, "Sandboxed apps").
    func verdict(_ request: DefaultsRequest) -> Verdict {
        switch request {
        case .get(let domain, _), .list(let domain), .listAll(let domain), .snapshot(let domain),
            .watch(let domain, _), .locks(let domain?), .systemSource(let domain, _):
            mayRead(domain) ? .allowed : .denied
        case .set(let domain, _, _, _), .delete(let domain, _), .apply(let domain, _, _),
            .forgetHistory(let domain, _), .keepHistory(let domain, _, _), .history(let domain, _, _, _, _),
            .blame(let domain, _):
            mayWrite(domain) ? .allowed : .denied
        case .domains, .watchAll:
            .filtered
        case .getInfo, .getInterfaceDescription:
            .allowed
        case .locks(nil), .backup, .mirror, .status, .reload, .lock, .unlock, .permit, .revoke, .permits:
            .denied
        }
    }

    /// The domain `request` names, for the log; nil when it names none.
    static func domain(of request: DefaultsRequest) -> Domain? {
        switch request {
        case .get(let domain, _), .list(let domain), .listAll(let domain), .snapshot(let domain),
            .watch(let domain, _), .locks(let domain?), .systemSource(let domain, _), .set(let domain, _, _, _),
            .delete(let domain, _), .apply(let domain, _, _), .forgetHistory(let domain, _),
            .keepHistory(let domain, _, _), .history(let domain, _, _, _, _), .blame(let domain, _),
            .lock(let domain, _), .unlock(let domain, _):
            domain
        default: nil
        }
    }
}

/// The public domains every sandboxed app may read when the admin lists none
/// (`--sandbox-readable`): the desktop's look, accessibility and window manager settings,
/// which GTK reads in every app.
enum SandboxDefaults {
    static let readable: [DomainPattern] = [
        "org.gnome.desktop.interface", "org.gnome.desktop.a11y*",
        "org.gnome.desktop.wm.preferences", "org.gnome.desktop.sound", "org.gnome.desktop.privacy",
    ].map { text in
        do { return try DomainPattern(validating: text) } catch { preconditionFailure("\(error)") }
    }
}
