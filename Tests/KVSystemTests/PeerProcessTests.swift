import Glibc
import KVTestSupport
import Testing

@testable import KVSystem

/// Who is on the other end: the kernel's credentials and pidfd, what `/proc` says, and the text
/// rules for cgroups, XDG app units, snaps and `/.flatpak-info`.
@Suite struct PeerProcessTests {
    let system = LinuxSystem()

    func listener() throws -> (fd: Int32, path: String) {
        let path = "/tmp/kvd-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        return (try system.listenUnix(path, nonBlocking: false), path)
    }

    @Test func aLivePeerIsNamedByItsProgramCommandAndUnit() throws {
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
        }
        let client = try system.connectUnix(path)
        defer { system.close(client) }
        let accepted = try system.accept(listening)
        defer { system.close(accepted) }
        let peer = try PeerProcess.identify(accepted, system: system)
        #expect(peer.credentials.pid == getpid() && peer.credentials.uid == getuid())
        #expect(peer.program == system.executablePath())
        #expect(peer.command?.isEmpty == false)
        #expect(peer.command.map { $0.utf8.count <= 15 } == true, "comm holds at most 15 bytes")
    }

    /// A peer that exited before it was looked at: its pid may already be another's, so nothing
    /// but the kernel's credentials is kept.
    @Test func aPeerThatExitedIsKnownOnlyByItsCredentials() throws {
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
        }
        let child = try system.spawn(
            "/usr/bin/python3",
            arguments: ["-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", path],
            input: 0, output: 1, error: 2)
        #expect(try system.waitForExit(child) == 0)
        let accepted = try system.accept(listening)
        defer { system.close(accepted) }
        let peer = try PeerProcess.identify(accepted, system: system)
        #expect(peer.credentials.pid == child)
        #expect(peer.program == nil && peer.command == nil && peer.unit == nil && peer.app == nil, "\(peer)")
    }

    /// The pid the kernel gave is looked up, but the connection's own process (its pidfd) exited
    /// meanwhile: what `/proc` says is of whoever has the pid now (here, this test), and is dropped.
    @Test func aPidTakenByAnotherProcessIsNotTakenForThePeer() throws {
        let faulty = FaultInjectingSystem()
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
        }
        let client = try system.connectUnix(path)
        defer { system.close(client) }
        let accepted = try system.accept(listening)
        defer { system.close(accepted) }
        #expect(try PeerProcess.identify(accepted, system: faulty).program == system.executablePath())
        faulty.pretendPeersExited()
        let peer = try PeerProcess.identify(accepted, system: faulty)
        #expect(peer.credentials.pid == getpid())
        #expect(peer.program == nil && peer.command == nil && peer.unit == nil && peer.app == nil, "\(peer)")
    }

    @Test(arguments: [
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.gnome.Terminal-1234.scope",
            "app-gnome-org.gnome.Terminal-1234.scope", "org.gnome.Terminal", AppIdentity.Source.appUnit
        ),
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Evince@0f3c.service",
            "app-org.gnome.Evince@0f3c.service", "org.gnome.Evince", .appUnit
        ),
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.gnome.TextEditor-5678.scope",
            "app-flatpak-org.gnome.TextEditor-5678.scope", "org.gnome.TextEditor", .appUnit
        ),
        (
            #"0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-org.example.My\x2dApp-99.scope"#,
            #"app-gnome-org.example.My\x2dApp-99.scope"#, "org.example.My-App", .appUnit
        ),
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-3a1f.scope",
            "snap.firefox.firefox-3a1f.scope", "firefox", .snap
        ),
        ("0::/system.slice/snap.lxd.daemon.service", "snap.lxd.daemon.service", "lxd", .snap),
    ])
    func cgroupsNameTheUnitAndTheApp(line: String, unit: String, app: String, source: AppIdentity.Source) {
        let text = "1:name=systemd:/old\n\(line)\n"
        #expect(PeerProcess.unit(inCgroup: text) == unit)
        #expect(PeerProcess.app(inCgroup: text) == AppIdentity(id: app, source: source))
    }

    @Test func aUnitThatIsNoAppNamesNone() {
        let text = "0::/user.slice/user-1000.slice/user@1000.service/session.slice/kvd.service\n"
        #expect(PeerProcess.unit(inCgroup: text) == "kvd.service")
        #expect(PeerProcess.app(inCgroup: text) == nil)
        #expect(PeerProcess.unit(inCgroup: "0::/\n") == nil)
        #expect(PeerProcess.app(inCgroup: "0::/user.slice/app-.scope\n") == nil)
    }

    @Test func flatpakInfoNamesTheApplication() {
        let info = """
            [Application]
            name=org.gnome.TextEditor
            runtime=runtime/org.gnome.Platform/x86_64/45

            [Instance]
            instance-id=1234
            name=not.this
            """
        #expect(PeerProcess.flatpakApp(Array(info.utf8)) == AppIdentity(id: "org.gnome.TextEditor", source: .flatpak))
        #expect(PeerProcess.flatpakApp(Array("[Runtime]\nname=org.gnome.Platform\n".utf8)) == nil)
        #expect(PeerProcess.flatpakApp(nil) == nil)
        #expect(
            AppIdentity(id: "a.b", source: .flatpak).isSandboxed
                && !AppIdentity(id: "a.b", source: .appUnit).isSandboxed)
    }

    @Test func everyTextIsBounded() {
        let long = String(repeating: "é", count: 400)
        let kept = PeerProcess.bounded(long)
        #expect(kept.utf8.count <= PeerProcess.maxTextBytes && kept.utf8.count >= PeerProcess.maxTextBytes - 1)
        #expect(kept.allSatisfy { $0 == "é" }, "cut between characters, never inside one")
        let info = "[Application]\nname=\(String(repeating: "a", count: 1000))\n"
        #expect(PeerProcess.flatpakApp(Array(info.utf8))?.id.utf8.count == PeerProcess.maxTextBytes)
    }
}
