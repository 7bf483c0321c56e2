import Glibc
import KVTestSupport
import Testing

@testable import KVSystem

/// A peer's root: where kvd looks for `/.flatpak-info` and where it does not, with real processes
/// that change their roots, their mounts and their threads (several need root).
@Suite struct PeerRootTests {
    let system = LinuxSystem()

    func listener() throws -> (fd: Int32, path: String) {
        let path = "/tmp/kvd-peer-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        return (try system.listenUnix(path, nonBlocking: false), path)
    }

    /// The look into the root of `accepted`'s peer, nil when kvd takes its root for its own (or
    /// cannot tell).
    func lookingInRoot(_ accepted: Int32) throws -> PeerProcess.RootLookup? {
        var cgroups = CgroupNames(hierarchy: nil)
        let begun = try PeerProcess.begin(
            accepted, system: system, ownRoot: try RootView.own(system), cgroups: &cgroups)
        guard case .lookingInRoot(let lookup) = begun else { return nil }
        return lookup
    }

    /// A new empty folder whose path starts with `prefix`.
    func temporaryFolder(_ prefix: String) throws -> String {
        var template = Array((prefix + "-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Errno.current
        }
        return String(cString: made)
    }

    func removeFolder(_ folder: String) {
        _ = try? system.spawn("/bin/rm", arguments: ["-rf", folder], input: 0, output: 1, error: 2)
    }

    /// A process with kvd's root but mounts of its own (`unshare --mount`, where a file can be
    /// bound on `/.flatpak-info`, as `bwrap --bind / /` does) is looked into (attack/39-sandbox.md,
    /// finding 27). Needs root (the child makes a mount namespace).
    @Test(.enabled(if: getuid() == 0, "needs root: the child makes a mount namespace"))
    func aProcessWithKvdsRootButMountsOfItsOwnIsLookedInto() throws {
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
        }
        let script = """
            import ctypes, os, socket, sys
            assert ctypes.CDLL(None).unshare(0x00020000) == 0
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("ready", flush=True); os.read(0, 1)
            """
        let child = try Child(script, listening: listening, path: path, system: system)
        defer { child.finish() }
        guard let lookup = try lookingInRoot(child.accepted) else {
            Issue.record("kvd's root through other mounts: looked into, not taken as kvd's own")
            return
        }
        let peer = try lookup.finish(system)
        #expect(peer.isConfirmed && peer.app == nil, "no /.flatpak-info there: \(peer)")
    }

    /// A process that changes its root after it connected is looked into where it was when kvd
    /// accepted it: a sandboxed app that leaves its sandbox's root right after connecting keeps
    /// its sandbox (the look runs later, off kvd's loop). Needs root (the child chroots).
    @Test(.enabled(if: getuid() == 0, "needs root: the child chroots"))
    func aRootLeftAfterConnectingIsLookedIntoAsItWasAtAccept() throws {
        let folder = try temporaryFolder("/tmp/kvd-peer-moves")
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
            removeFolder(folder)
        }
        let info = fopen(folder + "/.flatpak-info", "w")
        fputs("[Application]\nname=org.example.Moving\n", info)
        fclose(info)
        let script = """
            import os, socket, sys
            host = os.open("/", os.O_RDONLY)
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            os.chroot("\(folder)"); print("ready", flush=True)
            os.read(0, 1); os.fchdir(host); os.chroot("."); open("\(folder)/moved", "w").close(); os.read(0, 1)
            """
        let child = try Child(script, listening: listening, path: path, system: system)
        defer { child.finish() }
        guard let lookup = try lookingInRoot(child.accepted) else {
            Issue.record("a root of its own: looked into")
            return
        }
        #expect(write(child.input, "m", 1) == 1)
        let end = ContinuousClock.now + .seconds(10)
        while access(folder + "/moved", F_OK) != 0 && ContinuousClock.now < end { usleep(1000) }
        let peer = try lookup.finish(system)
        #expect(peer.app == AppIdentity(id: "org.example.Moving", source: .flatpak), "\(peer)")
    }

    /// A child (python) that connected to `listening` (at `path`) as `script` says (`sys.argv[1]`
    /// the socket's path), printed a line and waits for its input to end; its connection accepted.
    struct Child {
        let pid: pid_t
        let accepted: Int32
        let input: Int32
        let system: LinuxSystem

        init(_ script: String, listening: Int32, path: String, system: LinuxSystem) throws {
            let (input, output) = (try system.makePipe(), try system.makePipe())
            pid = try system.spawn(
                "/usr/bin/python3", arguments: ["-c", script, path], input: input.read, output: output.write, error: 2)
            system.close(input.read)
            system.close(output.write)
            defer { system.close(output.read) }
            var byte: UInt8 = 0
            while byte != UInt8(ascii: "\n") {
                guard read(output.read, &byte, 1) == 1 else {
                    system.close(input.write)
                    _ = try? system.waitForExit(pid)
                    throw Errno.noSuchFileOrDirectory  // it ended before it was ready
                }
            }
            (self.input, self.system) = (input.write, system)
            accepted = try system.accept(listening)
        }

        /// Closes its input and the connection, and waits for it to end.
        func finish() {
            system.close(accepted)
            system.close(input)
            _ = try? system.waitForExit(pid)
        }
    }

    /// A process whose thread group's leader exited on its own while another thread runs on (and
    /// connected): `/proc/PID/root` cannot be followed, so its `/.flatpak-info` cannot be looked
    /// for, and it is left unconfirmed (a Flatpak app could escape its sandbox so before).
    @Test func aProcessWhoseLeaderExitedIsUnconfirmed() throws {
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
        }
        let script = """
            import ctypes, os, socket, sys, threading, time
            def second():
                while "State:\\tZ" not in open("/proc/self/task/%d/status" % os.getpid()).read(): time.sleep(0.01)
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                print("ready", flush=True); os.read(0, 1); os._exit(0)
            threading.Thread(target=second).start()
            ctypes.CDLL(None).syscall(60, 0)
            """
        let child = try Child(script, listening: listening, path: path, system: system)
        defer { child.finish() }
        let peer = try PeerProcess.identify(child.accepted, system: system)
        #expect(peer.credentials.pid == child.pid && kill(child.pid, 0) == 0, "it still runs")
        #expect(!peer.isConfirmed && peer.app == nil, "\(peer)")
        let faulty = FaultInjectingSystem()
        let folder = "/proc/self"
        faulty.failPaths(endingWith: "/root", with: .noSuchFileOrDirectory)
        #expect(try PeerProcess.openRoot(folder, faulty) == nil)
        #expect(PeerProcess.rootOf(folder, peer.credentials, ownRoot: nil, faulty) == .unknown)
    }

    /// A `/.flatpak-info` in a process's root that is not a regular file is never opened: a FIFO
    /// (whose open would wait for a writer, stalling kvd's loop: every user's calls) and a
    /// symbolic link (which kvd would follow in its own root, to any file of the machine). Its
    /// process is left unconfirmed. Needs root (the child chroots).
    @Test(.enabled(if: getuid() == 0, "needs root: the child chroots"))
    func aFlatpakInfoThatIsNotARegularFileIsNeverOpened() throws {
        let folder = try temporaryFolder("/tmp/kvd-peer-roots")
        let (listening, path) = try listener()
        defer {
            system.close(listening)
            unlink(path)
            removeFolder(folder)
        }
        let outside = folder + "/outside-info"
        let text = "[Application]\nname=org.from.kvds.own.root\n"
        let file = fopen(outside, "w")
        fputs(text, file)
        fclose(file)
        for kind in ["fifo", "link"] {
            let root = folder + "/root-" + kind
            mkdir(root, 0o755)
            if kind == "fifo" {
                mkfifo(root + "/.flatpak-info", 0o644)
            } else {
                symlink(outside, root + "/.flatpak-info")
            }
            // Connected, then in its root: after 5 s it opens and closes the FIFO itself, which
            // lets a blocked reader go (so a regression fails the timing below, not hangs).
            let script = """
                import os, socket, sys, time
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                os.chroot("\(root)"); print("ready", flush=True)
                import select
                if not select.select([0], [], [], 5)[0] and os.path.lexists("/.flatpak-info"):
                    os.close(os.open("/.flatpak-info", os.O_RDWR | os.O_NONBLOCK))
                os.read(0, 1)
                """
            let child = try Child(script, listening: listening, path: path, system: system)
            defer { child.finish() }
            let ownRoot = try RootView.own(system)
            var cgroups = CgroupNames(hierarchy: nil)
            guard
                case .lookingInRoot(let lookup) = try PeerProcess.begin(
                    child.accepted, system: system, ownRoot: ownRoot, cgroups: &cgroups)
            else {
                Issue.record("\(kind): a root of its own is looked into off the loop")
                continue
            }
            lookup.abandon(system)
            let started = ContinuousClock.now
            let peer = try PeerProcess.identify(child.accepted, system: system, ownRoot: ownRoot)
            #expect(ContinuousClock.now - started < .seconds(3), "\(kind): identified without waiting")
            #expect(!peer.isConfirmed && peer.app == nil, "\(kind): \(peer)")
        }
    }
}
