import Glibc
import KVTestSupport
import Testing

@testable import KVSystem

/// The names of cgroups kept by id: a process is named by the cgroup it is in when it connects,
/// also once moved, and a name is kept only for the id its path has.
@Suite struct CgroupNamesTests {
    let system = LinuxSystem()

    static func mountinfo() -> [UInt8] {
        let fd = open("/proc/self/mountinfo", O_RDONLY)
        defer { close(fd) }
        return (try? LinuxSystem().readToEnd(fd)) ?? []
    }

    static let hierarchy = CgroupNames.unifiedHierarchy(mountinfo())

    @Test func theUnifiedHierarchyIsFoundInMountinfo() {
        let hybrid = """
            31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
            32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
            """
        #expect(CgroupNames.unifiedHierarchy(Array(hybrid.utf8)) == "/sys/fs/cgroup/unified")
        let unified = "27 22 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
        #expect(CgroupNames.unifiedHierarchy(Array(unified.utf8)) == "/sys/fs/cgroup")
        let namespaced = "27 22 0:24 /user.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
        #expect(CgroupNames.unifiedHierarchy(Array(namespaced.utf8)) == nil, "its root is not the hierarchy's")
        let escaped = #"27 22 0:24 / /mnt/a\040b rw - cgroup2 cgroup2 rw"# + "\n"
        #expect(CgroupNames.unifiedHierarchy(Array(escaped.utf8)) == nil)
        #expect(CgroupNames.unifiedHierarchy(Array(hybrid.utf8.prefix(120))) == nil)
    }

    @Test func aNameIsKeptOnlyForTheIdItsPathHas() throws {
        let hierarchy = try #require(Self.hierarchy, "no cgroup2 hierarchy mounted")
        var names = CgroupNames(hierarchy: hierarchy)
        let root = try system.fileIdentity(hierarchy, in: nil).inode
        let named = CgroupNames.Named(unit: "x.scope", app: nil)
        names.keep(named, path: Array("/".utf8)[...], id: root &+ 1, system)
        #expect(names.named(root &+ 1) == nil, "the path is not that id's")
        names.keep(named, path: Array("/".utf8)[...], id: root, system)
        #expect(names.named(root) == named)
        var unchecked = CgroupNames(hierarchy: nil)
        unchecked.keep(named, path: Array("/".utf8)[...], id: root, system)
        #expect(unchecked.named(root) == nil, "no hierarchy to check against: nothing kept")
    }

    /// A process in an XDG app scope is named by it; its cgroup's name is kept (later connections
    /// read no `cgroup`); moved to another app's scope, it is named by that one.
    @Test(.enabled(if: getuid() == 0 && hierarchy != nil, "needs root and a cgroup2 hierarchy"))
    func aProcessIsNamedByTheCgroupItIsInAtEachConnection() throws {
        let hierarchy = try #require(Self.hierarchy)
        let scopes = [
            "app-kvdtest-org.example.First-\(getpid()).scope", "app-kvdtest-org.example.Second-\(getpid()).scope",
        ]
        for scope in scopes { mkdir(hierarchy + "/" + scope, 0o755) }
        let path = "/tmp/kvd-cgroups-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let listening = try system.listenUnix(path, nonBlocking: false)
        let (input, output) = (try system.makePipe(), try system.makePipe())
        let script = """
            import socket, sys
            print("ready", flush=True)
            kept = []
            for line in sys.stdin:
                kept.append(socket.socket(socket.AF_UNIX)); kept[-1].connect(sys.argv[1]); print("connected", flush=True)
            """
        let child = try system.spawn(
            "/usr/bin/python3", arguments: ["-c", script, path], input: input.read, output: output.write, error: 2)
        system.close(input.read)
        system.close(output.write)
        var accepted: [Int32] = []
        defer {
            system.close(input.write)
            _ = try? system.waitForExit(child)
            system.close(output.read)
            for fd in accepted + [listening] { system.close(fd) }
            unlink(path)
            for scope in scopes { rmdir(hierarchy + "/" + scope) }
        }
        func line() -> String {
            var text: [UInt8] = []
            var byte: UInt8 = 0
            while read(output.read, &byte, 1) == 1, byte != UInt8(ascii: "\n") { text.append(byte) }
            return String(decoding: text, as: UTF8.self)
        }
        func move(into scope: String) {
            let fd = open(hierarchy + "/" + scope + "/cgroup.procs", O_WRONLY)
            defer { close(fd) }
            let text = "\(child)\n"
            #expect(write(fd, text, text.utf8.count) == text.utf8.count, "moved into \(scope)")
        }
        func connect() throws -> Int32 {
            #expect(write(input.write, "\n", 1) == 1)
            #expect(line() == "connected")
            accepted.append(try system.accept(listening))
            return accepted.last!
        }
        #expect(line() == "ready")
        var names = CgroupNames(hierarchy: hierarchy)
        let faulty = FaultInjectingSystem()
        move(into: scopes[0])
        let first = try PeerProcess.identify(connect(), system: faulty, cgroups: &names)
        #expect(first.app == AppIdentity(id: "org.example.First", source: .appUnit) && first.unit == scopes[0])
        faulty.failPaths(endingWith: "/cgroup", with: .permissionDenied)
        let again = try PeerProcess.identify(connect(), system: faulty, cgroups: &names)
        #expect(again.app?.id == "org.example.First" && again.isConfirmed, "its cgroup's name was kept: \(again)")
        move(into: scopes[1])
        let moved = try PeerProcess.identify(connect(), system: system, cgroups: &names)
        #expect(moved.app?.id == "org.example.Second" && moved.unit == scopes[1], "\(moved)")
        move(into: scopes[0])
        let back = try PeerProcess.identify(connect(), system: system, cgroups: &names)
        #expect(back.app?.id == "org.example.First")
        let root = open(hierarchy + "/cgroup.procs", O_WRONLY)
        _ = write(root, "\(child)\n", "\(child)\n".utf8.count)
        close(root)
    }
}
