import KVProtocol
import KVSystem
import KVValues
import Testing

@testable import KVDaemon

/// What a sandboxed app reaches (issue 39): its own domains at a dot boundary, the global and
/// public domains to read, what a user permitted; the method table; who counts as sandboxed.
@Suite struct SandboxAccessTests {
    static func domain(_ name: String) -> Domain { try! Domain(validating: name) }
    static func pattern(_ text: String) -> DomainPattern { try! DomainPattern(validating: text) }
    static let app = try! AppID(validating: "org.example.App")
    static let access = SandboxAccess(
        app: app, readable: [pattern("org.gnome.desktop.interface"), pattern("org.gnome.desktop.a11y*")],
        permits: [
            Permit(app: app, pattern: pattern("org.example.shared.*"), readOnly: false),
            Permit(app: app, pattern: pattern("org.other.App"), readOnly: true),
        ])

    @Test(arguments: [
        ("org.example.App", true, true), ("org.example.App.window", true, true),
        ("org.example.AppEvil", false, false), ("org.example.app", false, false), ("org.example", false, false),
        ("NSGlobalDomain", true, false), ("org.gnome.desktop.interface", true, false),
        ("org.gnome.desktop.interface.extra", false, false), ("org.gnome.desktop.a11y.keyboard", true, false),
        ("org.example.shared.x", true, true), ("org.example.shared", false, false), ("org.other.App", true, false),
        ("org.other.App.child", false, false), ("com.secret.tokens", false, false),
    ])
    func domainsAreReachedAtTheirBoundary(name: String, reads: Bool, writes: Bool) {
        #expect(Self.access.mayRead(Self.domain(name)) == reads)
        #expect(Self.access.mayWrite(Self.domain(name)) == writes)
    }

    @Test func anAppOwnsItsGSettingsSchemaPathsDomainToo() throws {
        let app = try AppID(validating: "org.example.My_App")
        #expect(app.owns(Self.domain("org.example.My_App")))
        #expect(app.owns(Self.domain("org.example.My_5FApp")))
        #expect(app.owns(Self.domain("org.example.My_5FApp.window")))
        #expect(!app.owns(Self.domain("org.example.My_5FAppEvil")))
    }

    @Test func everythingPermittedStillNeverReachesKvdsOwnDomainsNorThePermits() {
        let access = SandboxAccess(
            app: Self.app, readable: [], permits: [Permit(app: Self.app, pattern: Self.pattern("*"), readOnly: false)])
        #expect(access.mayWrite(Self.domain("com.secret.tokens")))
        #expect(!access.mayRead(.permits))
        #expect(!access.mayRead(Domain.locks(of: Self.domain("org.example.App"))))
        #expect(access.verdict(.permits(nil)) == .denied)
        #expect(access.verdict(.permit(Permit(app: Self.app, pattern: Self.pattern("*"), readOnly: false))) == .denied)
        #expect(access.verdict(.revoke(Self.app, Self.pattern("*"))) == .denied)
    }

    @Test func theMethodTable() {
        let access = Self.access
        let mine = Self.domain("org.example.App")
        let other = Self.domain("org.other.App")
        let key = try! Key(validating: "k")
        let allowed: [DefaultsRequest] = [
            .get(mine, key), .list(mine), .listAll(mine), .snapshot(mine), .watch(mine, nil),
            .set(mine, key, .integer(1), ifRevision: nil),
            .delete(mine, nil), .apply(mine, [], ifRevision: nil), .history(mine, nil, limit: nil, atRevision: nil),
            .blame(mine, nil), .forgetHistory(mine, nil), .keepHistory(mine, nil, keep: false), .get(other, key),
            .locks(other), .systemSource(other, key), .getInfo, .getInterfaceDescription("io.kvd.Defaults"),
        ]
        let denied: [DefaultsRequest] = [
            .set(other, key, .integer(1), ifRevision: nil), .delete(other, nil),
            .history(other, nil, limit: nil, atRevision: nil),
            .blame(other, nil), .forgetHistory(other, nil), .get(Self.domain("com.secret"), key), .backup,
            .mirror(dconfProfile: nil), .status, .reload, .lock(mine, key), .unlock(mine, key), .locks(nil),
        ]
        for request in allowed { #expect(access.verdict(request) == .allowed, "\(request)") }
        for request in denied { #expect(access.verdict(request) == .denied, "\(request)") }
        #expect(access.verdict(.domains) == .filtered)
        #expect(access.verdict(.watchAll(prefix: nil)) == .filtered)
    }

    @Test func aWatchAllFollowsOnlyWhatItMayRead() {
        let watch = ClientConnection.Watch(domain: nil, since: 0, prefix: "org.", access: Self.access)
        #expect(watch.follows(Self.domain("org.example.App")))
        #expect(!watch.follows(Self.domain("org.example.AppEvil")))
        let revoked = ClientConnection.Watch(
            domain: Self.domain("org.other.App"), since: 0,
            access: SandboxAccess(app: Self.app, readable: [], permits: []))
        #expect(!revoked.followsItsDomain)
        #expect(ClientConnection.Watch(domain: Self.domain("org.other.App"), since: 0).followsItsDomain)
    }

    @Test func whoIsSandboxed() {
        let credentials = PeerCredentials(pid: 42, uid: 1000, gid: 1000, groups: [])
        func peer(_ app: AppIdentity?, confirmed: Bool = true) -> PeerProcess {
            var peer = PeerProcess(credentials: credentials, app: app)
            peer.isConfirmed = confirmed
            return peer
        }
        #expect(PeerReach(peer(nil)) == .everything)
        #expect(PeerReach(peer(AppIdentity(id: "org.gnome.TextEditor", source: .appUnit))) == .everything)
        #expect(
            PeerReach(peer(AppIdentity(id: "org.example.App", source: .flatpak)))
                == .sandboxed(app: Self.app, label: "org.example.App (flatpak)"))
        #expect(
            PeerReach(peer(AppIdentity(id: "firefox", source: .snap)))
                == .sandboxed(app: try! AppID(validating: "firefox"), label: "firefox (snap)"))
        // Gone before kvd read it, or unreadable: no app, only the public domains.
        #expect(
            PeerReach(peer(nil, confirmed: false)) == .sandboxed(app: nil, label: "a process kvd could not identify"))
        #expect(PeerReach(nil) == .sandboxed(app: nil, label: "a process kvd could not identify"))
        // An id no app can have (cut at 256 bytes, an empty element, a newline) owns nothing,
        // and is never written to the journal.
        let invalid = PeerReach.sandboxed(app: nil, label: "an app whose id is not valid (flatpak)")
        let long = "org.example." + String(repeating: "a", count: 244)
        #expect(PeerReach(peer(AppIdentity(id: long, source: .flatpak))) == invalid)
        #expect(PeerReach(peer(AppIdentity(id: "org..App", source: .flatpak))) == invalid)
        #expect(PeerReach(peer(AppIdentity(id: "org.App\nkvd: error: forged", source: .flatpak))) == invalid)
    }

    @Test func namesAreValidatedAtTheEdge() {
        #expect(throws: NameError.self) { try AppID(validating: "org..App") }
        #expect(throws: NameError.self) { try AppID(validating: "org.App.") }
        #expect(throws: NameError.self) { try AppID(validating: "-org.App") }
        #expect(throws: NameError.self) { try AppID(validating: String(repeating: "a", count: 256)) }
        #expect(throws: NameError.self) { try DomainPattern(validating: "org.*.App") }
        #expect(throws: NameError.self) { try DomainPattern(validating: "**") }
        #expect(throws: NameError.self) { try DomainPattern(validating: "") }
        #expect(throws: NameError.self) { try DomainPattern(validating: "org/x") }
        #expect((try? DomainPattern(validating: "*")) != nil)
        #expect((try? AppID(validating: "firefox")) != nil)
    }

    @Test func permitsAreStoredAsOneKeyEach() throws {
        let permit = Permit(app: Self.app, pattern: Self.pattern("org.x*"), readOnly: true)
        let key = PermitRecord.key(permit.app, permit.pattern)
        #expect(key.name == "org.example.App org.x*")
        #expect(PermitRecord.permit(key, PermitRecord.value(readOnly: true)) == permit)
        #expect(PermitRecord.permit(key, .string("admin")) == nil)
        #expect(PermitRecord.permit(try Key(validating: "a b c"), .string("read")) == nil)
    }

    @Test func theOptionTakesPatternsAndNoneForEmpty() throws {
        let none = try DaemonOptions.parse(["--sandbox-readable", ""], environment: [:])
        guard case .run(let options) = none else {
            Issue.record("not run")
            return
        }
        #expect(options.sandboxReadable.isEmpty)
        #expect(throws: UsageError.self) { try DaemonOptions.parse(["--sandbox-readable", "a*b"], environment: [:]) }
        let two = try DaemonOptions.parse(
            ["--sandbox-readable", "a.b,c*", "--sandbox-readable", "d"], environment: [:])
        guard case .run(let given) = two else {
            Issue.record("not run")
            return
        }
        #expect(given.sandboxReadable.map(\.text) == ["a.b", "c*", "d"])
    }
}
