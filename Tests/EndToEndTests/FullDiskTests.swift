import Foundation
import Glibc
import Testing

/// A small tmpfs mounted for one test (root only), unmounted by ``unmount()``.
enum Tmpfs {
    /// Mounts a tmpfs of `size` as `sandbox`'s state folder; records an issue and returns false
    /// if that fails. The caller unmounts it.
    static func mountState(of sandbox: Sandbox, size: String) throws -> Bool {
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        guard mount(sandbox.state, size: size) else {
            Issue.record("mounting a tmpfs on \(sandbox.state) failed")
            return false
        }
        return true
    }

    /// Whether this process may mount a tmpfs: it is root and a trial mount works.
    static let available: Bool = {
        guard getuid() == 0 else { return false }
        var template = Array("/tmp/kvd-tmpfs-probe-XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        defer { rmdir(path) }
        guard mount(path, size: "64k") else { return false }
        unmount(path)
        return true
    }()

    /// `mount -t tmpfs -o size=SIZE tmpfs PATH`; whether it worked.
    static func mount(_ path: String, size: String) -> Bool {
        (try? run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path]).status) == 0
    }

    /// Unmounts `path`, lazily if something still holds it.
    static func unmount(_ path: String) {
        if (try? run("/usr/bin/umount", [path]).status) != 0 { _ = try? run("/usr/bin/umount", ["-l", path]) }
    }
}

/// kvd with its state folder on a 2 MiB tmpfs that fills up: writes fail with `StorageFailure`,
/// nothing stored is damaged, reads keep working, and writes work again once space is freed.
@Suite(.serialized) struct FullDiskTests {
    static let domain = "com.example.full"
    /// 64 KiB of text, so the disk fills within a few dozen writes.
    static func value(_ index: Int) -> String { "v\(index)-" + String(repeating: "x", count: 64 << 10) }

    /// One call and its reply, read in large chunks (replies here are up to 2 MiB; the daemon
    /// sends nothing after the reply's NUL, as no other call is pending).
    private func call(_ client: RawClient, _ text: String) throws -> [String: Any] {
        client.send(text)
        var message: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while message.last != 0 {
            let count = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw TestFailure("connection closed instead of a reply to \(text.prefix(100))") }
            message += chunk[..<count]
        }
        return try JSONSerialization.jsonObject(with: Data(message.dropLast())) as! [String: Any]
    }

    private func set(_ client: RawClient, _ key: String, _ value: String) throws -> [String: Any] {
        try call(
            client,
            #"{"method":"io.kvd.Defaults.Set","parameters":{"domain":"\#(Self.domain)","key":"\#(key)","value":"\#(value)"}}"#
        )
    }

    private func delete(_ client: RawClient, _ key: String) throws -> [String: Any] {
        try call(
            client, #"{"method":"io.kvd.Defaults.Delete","parameters":{"domain":"\#(Self.domain)","key":"\#(key)"}}"#)
    }

    /// Every stored value reads back exactly; the domain lists exactly the stored keys.
    private func verify(_ client: RawClient, _ stored: [String: String], _ when: String) throws {
        for (key, value) in stored.sorted(by: { $0.key < $1.key }) {
            let reply = try call(
                client, #"{"method":"io.kvd.Defaults.Get","parameters":{"domain":"\#(Self.domain)","key":"\#(key)"}}"#)
            let found = (reply["parameters"] as? [String: Any])?["value"] as? String
            let same = found == value
            #expect(
                same,
                "\(when): key \(key) reads back \(found.map { "\($0.prefix(20))... (\($0.count) bytes)" } ?? "\(reply)")"
            )
        }
        let list = try call(client, #"{"method":"io.kvd.Defaults.List","parameters":{"domain":"\#(Self.domain)"}}"#)
        let keys = ((list["parameters"] as? [String: Any])?["values"] as? [String: Any])?.keys.sorted()
        #expect(keys == stored.keys.sorted(), "\(when): List")
    }

    @Test(
        .enabled(if: Tmpfs.available, "needs root to mount a 2 MiB tmpfs as the state folder; skipped"),
        .timeLimit(.minutes(20)))
    func fullDiskFailsWritesCleanlyAndWritesWorkAgainOnceSpaceIsFreed() throws {
        let sandbox = Sandbox()
        guard try Tmpfs.mountState(of: sandbox, size: "2m") else { return }
        var daemon: Daemon?
        defer {
            daemon?.stop(SIGKILL)
            daemon = nil
            Tmpfs.unmount(sandbox.state)
        }
        // Space to free later: deletes need log space too, so a filler file is emptied instead
        // (emptied, not removed: a child another test spawns meanwhile may hold it open).
        let filler = sandbox.state + "/filler.bin"
        try Data(count: 512 << 10).write(to: URL(fileURLWithPath: filler))

        daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        var stored: [String: String] = [:]
        var failures = 0
        for index in 0..<200 where failures < 5 {
            let reply = try set(client, "k\(index)", Self.value(index))
            if let error = reply["error"] as? String {
                #expect(error == "io.kvd.Defaults.StorageFailure", "\(reply)")
                failures += 1
            } else {
                stored["k\(index)"] = Self.value(index)
            }
        }
        print(
            "full disk: \(stored.count) writes of 64 KiB acknowledged on a 2 MiB tmpfs, then \(failures) refused with StorageFailure"
        )
        #expect(failures == 5, "the disk never filled up")
        #expect(stored.count >= 10, "only \(stored.count) writes fit before the disk was full")
        try verify(client, stored, "while full")

        // A small change may still fit or fail, but must never half-happen.
        let deletion = try delete(client, "k0")
        if let error = deletion["error"] as? String {
            #expect(error == "io.kvd.Defaults.StorageFailure", "\(deletion)")
        } else {
            stored["k0"] = nil
        }
        try verify(client, stored, "after a delete while full")

        // A restart while the disk is full (its compaction at exit fails) loses and damages nothing.
        client.close()
        #expect(daemon!.stop(SIGTERM) == 0, "kvd exit while the disk is full: \(daemon!.errorOutput())")
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        try verify(client, stored, "after a restart while full")
        let still = try set(client, "big", Self.value(999))
        #expect(still["error"] as? String == "io.kvd.Defaults.StorageFailure", "still full: \(still)")

        #expect(truncate(filler, 0) == 0, "emptying the filler: \(String(cString: strerror(errno)))")
        let again = try set(client, "after", Self.value(1000))
        #expect(again["error"] == nil, "a write after freeing space: \(again)")
        if again["error"] == nil { stored["after"] = Self.value(1000) }
        try verify(client, stored, "after freeing space")

        client.close()
        #expect(daemon!.stop(SIGTERM) == 0)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        try verify(client, stored, "after freeing space and a restart")
        let names = sandbox.stateFiles()
        #expect(!names.contains { $0.contains(".unreadable-") }, "no file was found damaged: \(names)")
        #expect(!names.contains { $0.hasSuffix(".tmp") }, "no temporary file is left: \(names)")
    }

    /// On a 6 MiB tmpfs, 3 keys of 200 KiB rewritten over and over with history on. The history
    /// files fill the disk; kvd drops them before it refuses a write, so every write is taken.
    @Test(
        .enabled(if: Tmpfs.available, "needs root to mount a 6 MiB tmpfs as the state folder; skipped"),
        .timeLimit(.minutes(5)))
    func historyIsDroppedBeforeAWriteIsRefused() throws {
        let sandbox = Sandbox()
        guard try Tmpfs.mountState(of: sandbox, size: "6m") else { return }
        var daemon: Daemon?
        defer {
            daemon?.stop(SIGKILL)
            daemon = nil
            Tmpfs.unmount(sandbox.state)
        }
        daemon = try Daemon(sandbox)
        var client = try RawClient(sandbox.socket)
        let value = { (index: Int) in "v\(index)-" + String(repeating: "x", count: 200 << 10) }
        var stored: [String: String] = [:]
        for index in 0..<90 {
            let key = "k\(index % 3)"
            let reply = try set(client, key, value(index))
            #expect(reply["error"] == nil, "write \(index) of 200 KiB: \(reply)")
            guard reply["error"] == nil else { break }
            stored[key] = value(index)
        }
        try verify(client, stored, "after 90 writes")
        #expect(daemon!.errorOutput().contains("is full: dropped the history"), "kvd says it dropped history")
        client.close()
        #expect(daemon!.stop(SIGTERM) == 0)
        daemon = try Daemon(sandbox)
        client = try RawClient(sandbox.socket)
        defer { client.close() }
        try verify(client, stored, "after a restart")
        let more = try set(client, "k0", value(1000))
        #expect(more["error"] == nil, "a write after the restart: \(more)")
    }
}
