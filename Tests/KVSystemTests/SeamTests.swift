import Glibc
import KVSystem
import KVTestSupport
import Testing

/// The one OS seam of every target: the one `EINTR` retry, the one error and status types, the one
/// ownership rule, and the calls kvctl and the etcd password file make through it.
@Suite struct SeamTests {
    @Test func retryingInterruptsRetriesEINTRAndNothingElse() throws {
        var calls = 0
        let value = try retryingInterrupts { () throws(Errno) -> Int in
            calls += 1
            if calls < 3 { throw .interrupted }
            return 7
        }
        #expect(value == 7 && calls == 3)
        calls = 0
        #expect(throws: Errno.ioError) {
            try retryingInterrupts { () throws(Errno) in
                calls += 1
                throw Errno.ioError
            }
        }
        #expect(calls == 1)
    }

    @Test func aSystemErrorNamesTheCallThePathAndWhatToDoAboutALink() {
        #expect(
            SystemError("fsync", path: "/s/kvd.wal", .ioError).description == "fsync of /s/kvd.wal: Input/output error")
        #expect(SystemError("connect", .connectionRefused).description == "connect: Connection refused")
        #expect(SystemError("open", path: "/s/x", code: ELOOP).description.hasSuffix("remove the link"))
        #expect(SystemError("open", path: nil, code: ENOENT).errno == .noSuchFileOrDirectory)
    }

    @Test func theOwnershipRuleChecksKindThenOwnerThenPermissions() {
        let rule = OwnershipRule(kind: .directory, owners: [0, 1000], forbiddenPermissions: 0o077)
        let good = FileStatus(kind: .directory, owner: 1000, permissions: 0o700)
        #expect(rule.violation(of: good) == nil)
        #expect(rule.violation(of: FileStatus(kind: .directory, owner: 0, permissions: 0o1700)) == nil)
        #expect(
            rule.violation(of: FileStatus(kind: .symbolicLink, owner: 7, permissions: 0o777)) == .kind(.symbolicLink))
        #expect(rule.violation(of: FileStatus(kind: .directory, owner: 7, permissions: 0o777)) == .owner(7))
        #expect(
            rule.violation(of: FileStatus(kind: .directory, owner: 1000, permissions: 0o750)) == .permissions(0o750))
        let anyKind = OwnershipRule(kind: nil, owners: [1000], forbiddenPermissions: 0o022)
        #expect(anyKind.violation(of: FileStatus(kind: .regular, owner: 1000, permissions: 0o755)) == nil)
        #expect(
            anyKind.violation(of: FileStatus(kind: .regular, owner: 1000, permissions: 0o775)) == .permissions(0o775))
    }

    @Test func aPathAndItsDescriptorReportTheSameStatus() throws {
        let system = LinuxSystem()
        let path = "/tmp/kvd-seam-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = try system.open(path, [.write, .create, .exclusive], permissions: 0o600)
        defer {
            system.close(fd)
            try? system.unlink(path)
        }
        try system.write(fd, Array("four".utf8))
        let byPath = try system.status(path, followingLinks: false)
        let byDescriptor = try system.status(fd)
        #expect(byPath == byDescriptor)
        #expect(byPath.kind == .regular && byPath.size == 4 && byPath.permissions == 0o600)
        #expect(byPath.owner == geteuid() && byPath.group == getegid() && byPath.inode != 0)
        #expect(try system.resolvedPath(path) == path)
    }

    @Test func aHelperRunsOnPipesThatItAloneInherits() throws {
        let system = LinuxSystem()
        let pipes = try (0..<3).map { _ in try system.makePipe() }
        for end in pipes.flatMap({ [$0.read, $0.write] }) {
            #expect(fcntl(end, F_GETFD) & FD_CLOEXEC != 0, "a pipe end another child would inherit")
        }
        let child = try system.spawn(
            "/bin/sh", arguments: ["-c", "cat; echo done >&2; exit 3"], input: pipes[0].read, output: pipes[1].write,
            error: pipes[2].write)
        for end in [pipes[0].read, pipes[1].write, pipes[2].write] { system.close(end) }
        try Array("piped".utf8).withUnsafeBytes { try system.writeAll(pipes[0].write, $0) }
        system.close(pipes[0].write)
        #expect(try system.readToEnd(pipes[1].read) == Array("piped".utf8))
        #expect(try system.readToEnd(pipes[2].read) == Array("done\n".utf8))
        for end in [pipes[1].read, pipes[2].read] { system.close(end) }
        #expect(try system.waitForExit(child) >> 8 == 3)
    }

    @Test func readToEndStopsOnceItHoldsMoreThanTheLimit() throws {
        let system = LinuxSystem()
        let pipe = try system.makePipe()
        defer { system.close(pipe.read) }
        try [UInt8](repeating: 1, count: 10).withUnsafeBytes { try system.writeAll(pipe.write, $0) }
        system.close(pipe.write)
        #expect(try system.readToEnd(pipe.read, limit: 4).count > 4)
    }

    @Test func theFaultInjectingSystemMakesTheRealFileCalls() throws {
        let system: any SystemCalls = FaultInjectingSystem()
        let folder = "/tmp/kvd-seam-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try system.makeDirectory(folder, permissions: 0o700)
        defer { rmdir(folder) }
        #expect(try system.contentsOfDirectory(folder).isEmpty)
        #expect(throws: SystemError("mkdir", path: folder, .fileExists)) {
            try system.makeDirectory(folder, permissions: 0o700)
        }
        #expect(system.userID == getuid() && system.processID == getpid())
    }
}
