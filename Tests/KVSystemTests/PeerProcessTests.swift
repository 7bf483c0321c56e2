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

    /// A connection of this process to itself, accepted; ``finish()`` closes it and its listener.
    struct Connected {
        let listening: Int32
        let path: String
        let client: Int32
        let accepted: Int32
        let system: LinuxSystem

        init(_ system: LinuxSystem) throws {
            path = "/tmp/kvd-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            listening = try system.listenUnix(path, nonBlocking: false)
            client = try system.connectUnix(path)
            accepted = try system.accept(listening)
            self.system = system
        }

        func finish() {
            for fd in [accepted, client, listening] { system.close(fd) }
            unlink(path)
        }
    }

    @Test func aLivePeerIsConfirmedAndNamedByItsProgramAtAccept() throws {
        let connected = try Connected(system)
        defer { connected.finish() }
        let accepted = connected.accepted
        let peer = try PeerProcess.identify(accepted, system: system)
        #expect(peer.credentials.pid == getpid() && peer.credentials.uid == getuid())
        #expect(peer.isConfirmed)
        #expect(peer.program == system.executablePath())
        #expect(peer.command == nil, "comm is read only where the executable's path is unknown")
    }

    /// kvd reads a peer's program, root and cgroup id in one C call (``SystemCalls/peerProcessFacts(pid:pidfd:)``):
    /// what the calls one by one read, and so the same peer as when they are made one by one
    /// (as ``FaultInjectingSystem`` makes them).
    @Test func theFactsReadInOneCallAreWhatTheCallsOneByOneRead() throws {
        let connected = try Connected(system)
        defer { connected.finish() }
        let pid = getpid()
        let pidfd = try system.peerProcessDescriptor(connected.accepted)
        defer { system.close(pidfd) }
        let facts = try #require(system.peerProcessFacts(pid: pid, pidfd: pidfd))
        #expect(facts.program == (try system.linkTarget("/proc/\(pid)/exe")))
        #expect(facts.root == (try system.fileIdentity("/proc/\(pid)/root", in: nil)))
        #expect(facts.cgroupID == (try system.processCgroupID(pidfd)))
        #expect(facts == FaultInjectingSystem().peerProcessFacts(pid: pid, pidfd: pidfd))
        let ownRoot = try RootView.own(system)
        #expect(
            try PeerProcess.identify(connected.accepted, system: system, ownRoot: ownRoot)
                == PeerProcess.identify(connected.accepted, system: FaultInjectingSystem(), ownRoot: ownRoot))
    }

    /// A process that exited has no facts to read (the caller learns why one call at a time).
    @Test func anExitedProcessHasNoFactsInOneCall() throws {
        let child = try system.spawn("/bin/true", arguments: [], environment: [:], standardError: nil)
        let pidfd = try system.processDescriptor(child)
        defer { system.close(pidfd) }
        func exited() -> Bool {  // a zombie: its `stat` says `Z` after its command
            (try? PeerProcess.readOnce("/proc/\(child)/stat", system)).map { $0.contains(UInt8(ascii: "Z")) } ?? false
        }
        for _ in 0..<5_000 where !exited() { usleep(1000) }
        #expect(exited())
        #expect(system.peerProcessFacts(pid: child, pidfd: pidfd) == nil, "not reaped yet: its pid is still its")
        _ = try system.waitForExit(child, blocking: true)
    }

    /// Where the executable's path cannot be read (a process not dumpable, another user's), the
    /// command name stands for it; `comm` is read only then.
    @Test func theCommandNamesAProgramWhoseExecutableIsUnreadable() throws {
        let faulty = FaultInjectingSystem()
        let folder = "/proc/\(getpid())"
        let named = PeerProcess.program(inFolder: folder, system)
        #expect(named.path == system.executablePath() && named.command == nil)
        faulty.failPaths(endingWith: "/exe", with: .permissionDenied)
        let command = PeerProcess.program(inFolder: folder, faulty)
        #expect(command.path == nil && command.command?.isEmpty == false, "\(command)")
        #expect(command.command.map { $0.utf8.count <= 15 } == true, "comm holds at most 15 bytes")
        faulty.failPaths(endingWith: "/comm", with: .permissionDenied)
        #expect(PeerProcess.program(inFolder: folder, faulty) == (nil, nil))
    }

    /// `.flatpak-info` that kvd may not open (`EACCES`) in a process of its own user (one that
    /// made itself not dumpable, as a sandboxed app could to pass for unsandboxed): its sandbox
    /// is unknown, so it is not confirmed (and so confined). Another user's process (the system
    /// instance's peers) is one kvd may not look into at all: read as before, no Flatpak.
    @Test func aFlatpakInfoKvdMayNotOpenLeavesItsOwnUsersPeerUnconfirmed() throws {
        let connected = try Connected(system)
        defer { connected.finish() }
        let accepted = connected.accepted
        let faulty = FaultInjectingSystem()
        faulty.failPaths(endingWith: "/root/.flatpak-info", with: .permissionDenied)
        let own = try PeerProcess.identify(accepted, system: faulty)
        #expect(own.credentials.uid == getuid() && !own.isConfirmed && own.app == nil, "\(own)")
        faulty.pretendPeers([PeerCredentials(pid: getpid(), uid: getuid() &+ 1, gid: getgid(), groups: [])])
        let another = try PeerProcess.identify(accepted, system: faulty)
        #expect(another.isConfirmed && another.app == nil, "\(another)")
        let absent = try PeerProcess.identify(accepted, system: system)
        #expect(absent.isConfirmed && absent.app == nil, "no .flatpak-info: no Flatpak")
    }

    /// A process in kvd's own root runs in no Flatpak: identified at accept, its root's
    /// `/.flatpak-info` never looked for (it would be kvd's own); only a root of its own is
    /// looked into, and that off the loop (``PeerProcess/Identification/lookingInRoot(_:)``).
    @Test func aPeerInKvdsOwnRootIsIdentifiedWithoutLookingIntoIt() throws {
        let connected = try Connected(system)
        defer { connected.finish() }
        let accepted = connected.accepted
        let faulty = FaultInjectingSystem()
        faulty.failPaths(endingWith: "/root/.flatpak-info", with: .permissionDenied)
        let ownRoot = try RootView.own(system)
        var cgroups = CgroupNames(hierarchy: nil)
        guard
            case .identified(let peer) = try PeerProcess.begin(
                accepted, system: faulty, ownRoot: ownRoot, cgroups: &cgroups)
        else {
            Issue.record("kvd's own root: identified at once")
            return
        }
        #expect(peer.isConfirmed && peer.program == system.executablePath(), "\(peer)")
        let elsewhere = RootView(
            root: FileIdentity(device: ownRoot.root.device, inode: ownRoot.root.inode, mount: ownRoot.root.mount &+ 1))
        guard
            case .lookingInRoot(let lookup) = try PeerProcess.begin(
                accepted, system: faulty, ownRoot: elsewhere, cgroups: &cgroups)
        else {
            Issue.record("a root that is not kvd's: looked into")
            return
        }
        #expect(lookup.credentials.pid == getpid())
        let looked = try lookup.finish(faulty)
        #expect(!looked.isConfirmed, "its .flatpak-info could not be opened: \(looked)")
        faulty.failPaths(endingWith: "/root", with: .noSuchFileOrDirectory)
        #expect(!(try PeerProcess.identify(accepted, system: faulty, ownRoot: ownRoot).isConfirmed), "leader gone")
    }

    /// Whose a process is, by its `status`: a process of another user (root's) whose connecting
    /// thread took kvd's user's uid is not kvd's user's own (the system tests' clients are such).
    @Test func statusNamesEveryUidOfTheProcess() throws {
        let status = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t0\t1000\nGid:\t1\t1\t1\t1\n"
        #expect(PeerProcess.uids(inStatus: Array(status.utf8)) == [1000, 1000, 0, 1000])
        #expect(PeerProcess.uids(inStatus: Array("Name:\tx\n".utf8)) == [])
        let own = try PeerProcess.readOnce("/proc/self/status", system)
        #expect(PeerProcess.uids(inStatus: own) == [getuid(), geteuid(), getuid(), geteuid()])
        let credentials = PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid(), groups: [])
        let faulty = FaultInjectingSystem()
        let folder = "/proc/self"
        #expect(PeerProcess.isOwnUsers(folder, credentials, system))
        faulty.failPaths(endingWith: "/status", with: .permissionDenied)
        #expect(PeerProcess.isOwnUsers(folder, credentials, faulty), "unreadable: confined, to be safe")
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
        #expect(peer.credentials.pid == child && !peer.isConfirmed)
        #expect(peer.program == nil && peer.command == nil && peer.unit == nil && peer.app == nil, "\(peer)")
    }

    /// `/proc`'s small files are read with one `read` each, whole.
    @Test func aProcFileIsReadWholeWithOneRead() throws {
        let cgroup = try PeerProcess.readOnce("/proc/self/cgroup", system)
        #expect(!cgroup.isEmpty && cgroup.last == UInt8(ascii: "\n"))
        let status = try PeerProcess.readOnce("/proc/self/status", system)
        #expect(String(decoding: status, as: UTF8.self).contains("\nPid:\t"), "the text starts whole")
        #expect(throws: Errno.noSuchFileOrDirectory) { try PeerProcess.readOnce("/proc/self/no-such-file", system) }
        #expect(try PeerProcess.readIfPresent("/proc/self/no-such-file", system) == nil)
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

    /// The cgroup text is read byte by byte: any line order, any path shape.
    @Test func cgroupPathsOfAnyShape() {
        #expect(
            PeerProcess.unit(inCgroup: "0::/a.slice/b.scope/inner\n") == "b.scope", "the last unit, not the last part")
        #expect(PeerProcess.unit(inCgroup: "0::/x.service/\n") == "x.service", "a trailing slash")
        #expect(PeerProcess.unit(inCgroup: "0::x.service") == "x.service", "no slash, no newline")
        #expect(PeerProcess.unit(inCgroup: "0::/.scope\n") == ".scope")
        #expect(PeerProcess.unit(inCgroup: "0::\n1:cpu:/y.service\n") == nil, "only the unified line counts")
        #expect(PeerProcess.unit(inCgroup: "10::/y.service\n0:") == nil)
        #expect(PeerProcess.unit(inCgroup: "") == nil && PeerProcess.unit(inCgroup: "\n\n") == nil)
        #expect(PeerProcess.cgroupPath(Array("1:a:/b\n0::/c\n".utf8)[...]).map(Array.init) == Array("/c".utf8))
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
