import Foundation
import Glibc
import KVConnection
import KVProtocol
import KVValues
import Testing

/// The fleet end to end, with the real programs: a 3-member etcd, two hosts (`kvd --system
/// --etcd`, each with its own state and socket), and a user's kvd and kvctl on each host.
/// What etcd holds reaches every host and its users; a host killed with SIGKILL resumes from
/// the etcd revision its store holds.
@Suite(.enabled(if: EtcdCluster.isInstalled, EtcdCluster.notInstalled), .serialized)
struct FleetHostTests {
    typealias Host = FleetHost

    @Test func whatEtcdHoldsReachesEveryHostsUsersAndAKilledHostResumes() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let root = cluster.folder + "/hosts"
        try FileManager.default.createDirectory(
            atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        _ = try cluster.mustEtcdctl(["put", "kvd/values/com.corp.browser/homepage", #""https://intranet.example""#])
        _ = try cluster.mustEtcdctl(["put", "kvd/values/org.other/ignored", "1"])
        let a = try Host("a", in: root, cluster: cluster)
        let b = try Host("b", in: root, cluster: cluster)
        for host in [a, b] {
            #expect(
                try host.eventually("https://intranet.example", "get", "com.corp.browser", "homepage"), "\(host.logs())"
            )
            #expect(try host.kvctl("source", "com.corp.browser", "homepage").output.hasPrefix("system:"))
            #expect(
                try host.kvctl("get", "org.other", "ignored").status == 1, "a domain outside the fleet is not mirrored")
        }

        // A lock key in etcd locks the key for every host's users; a user's write is refused.
        #expect(try a.kvctl("set", "com.corp.browser", "homepage", "https://mine.example").status == 0)
        _ = try cluster.mustEtcdctl(["put", "kvd/locks/com.corp.browser/homepage", "locked"])
        for host in [a, b] {
            #expect(try host.eventually("https://intranet.example", "get", "com.corp.browser", "homepage"))
            #expect(
                try host.kvctl("source", "com.corp.browser", "homepage").output.hasPrefix("locked:"), "\(host.logs())")
        }
        #expect(try b.kvctl("set", "com.corp.browser", "homepage", "https://other.example").status == 1)

        // Host a is killed; meanwhile etcd changes; it comes back at the revision it holds.
        a.system?.signal(SIGKILL)
        a.system?.reap()
        _ = try cluster.mustEtcdctl(["del", "kvd/locks/com.corp.browser/homepage"])
        _ = try cluster.mustEtcdctl(["put", "kvd/values/com.corp.browser/start", #"{"$date":"2026-11-30T12:00:00Z"}"#])
        try a.startSystem()
        #expect(
            try a.eventually("https://mine.example", "get", "com.corp.browser", "homepage"),
            "the unlock reached a after its restart: \(a.logs())")
        #expect(try a.eventually("2026-11-30T12:00:00.000Z", "get", "com.corp.browser", "start"))
        #expect(
            try b.eventually("https://intranet.example", "get", "com.corp.browser", "homepage"),
            "b has no value of its own: the default")
        let systemLog = (try? String(contentsOfFile: a.folder + "/system.log", encoding: .utf8)) ?? ""
        #expect(systemLog.components(separatedBy: "fleet: mirroring").count == 3, "two starts: \(systemLog)")
        #expect(
            systemLog.range(of: #"from etcd revision [1-9]"#, options: .regularExpression) != nil,
            "the restarted host resumed from its stored revision: \(systemLog)")

        // An etcdctl del removes the value everywhere.
        _ = try cluster.mustEtcdctl(["del", "kvd/values/com.corp.browser/start"])
        for host in [a, b] {
            #expect(
                try host.eventuallyGone("com.corp.browser", "start"), "the deleted value is gone from \(host.folder)")
        }
    }

    /// An admin's change on host a is seen on b by Get and by a user's Watch; with no etcd, writes
    /// fail and reads go on; two hosts writing one key end alike; over etcd's limits, a write fails
    /// with TooLarge and puts nothing in etcd.
    @Test func anAdminsChangeOnOneHostIsMadeInEtcdAndReachesTheOthers() throws {
        let cluster = try EtcdCluster()
        defer { cluster.stop() }
        let root = cluster.folder + "/hosts"
        try FileManager.default.createDirectory(
            atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let a = try Host("a", in: root, cluster: cluster)
        let b = try Host("b", in: root, cluster: cluster)
        // A user's Watch on host b, through b's user kvd, open before the change is made on a.
        let watched = Outcomes()
        let opened = Outcomes()
        let watcher = try Connection(socketPath: b.userSocket)
        defer { watcher.close() }
        Thread {
            try? watcher.watch(try! Domain(validating: "com.corp.mail"), try! Key(validating: "server")) { event in
                if event.initial { opened.add(0, "the watch's first reply") }
                guard let change = event.changes.first, case .string(let text)? = change.value else { return true }
                watched.add(0, "\(text) (\(event.sources[change.key]?.rawValue ?? "no source"))")
                return false
            }
        }.start()
        #expect(opened.wait(for: 1).count == 1, "b's Watch got no first reply: \(b.logs())")

        let set = try a.kvctl("set", "com.corp.mail", "server", "imap.corp.example", system: true)
        #expect(set.status == 0, "\(set.output) \(a.logs())")
        #expect(
            watched.wait(for: 1)[0] == "imap.corp.example (system)", "b's user saw a's change by a Watch: \(b.logs())")
        #expect(
            try a.kvctl("get", "com.corp.mail", "server", system: true).output == "imap.corp.example\n",
            "the writing host reads its own write")
        #expect(
            try cluster.mustEtcdctl(["get", "--print-value-only", "kvd/values/com.corp.mail/server"]).contains(
                #""imap.corp.example""#))
        #expect(try b.eventually("imap.corp.example", "get", "com.corp.mail", "server"), "\(b.logs())")
        #expect(try a.kvctl("lock", "com.corp.mail", "server", system: true).status == 0)
        #expect(
            try cluster.mustEtcdctl(["get", "--keys-only", "kvd/locks/com.corp.mail/server"]).contains(
                "kvd/locks/com.corp.mail/server"))
        #expect(try b.kvctl("set", "com.corp.mail", "server", "mine").status == 1, "the lock reached b's users")

        // Both hosts write one key at once: they end alike.
        let writers = [a, b].enumerated().map { index, host in
            Thread { _ = try? host.kvctl("set", "com.corp.mail", "port", "-int", String(993 + index), system: true) }
        }
        for writer in writers { writer.start() }
        for _ in 0..<200 where writers.contains(where: { !$0.isFinished }) { usleep(20_000) }
        let settled = try cluster.mustEtcdctl(["get", "--print-value-only", "kvd/values/com.corp.mail/port"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        for host in [a, b] {
            #expect(
                try host.eventually(settled, "get", "com.corp.mail", "port"),
                "\(host.folder) ends with etcd's \(settled)")
        }

        // Over etcd's limits (128 operations in one transaction): TooLarge, nothing written.
        let many = "{" + (0..<129).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        let file = root + "/many.json"
        try many.write(toFile: file, atomically: true, encoding: .utf8)
        let tooLarge = try a.kvctl("import", "com.corp.many", file, system: true)
        #expect(tooLarge.status == 1 && tooLarge.output.contains("larger than"), "\(tooLarge.output)")
        #expect(
            try cluster.mustEtcdctl(["get", "--prefix", "--keys-only", "kvd/values/com.corp.many/"]).trimmingCharacters(
                in: .whitespacesAndNewlines
            ).isEmpty)

        // Deleting a fleet domain deletes its values in etcd, one range, and on every host.
        for key in ["a", "b"] { #expect(try b.kvctl("set", "com.corp.tmp", key, "x", system: true).status == 0) }
        #expect(try b.kvctl("set", "com.corp.tmpx", "a", "kept", system: true).status == 0)
        #expect(try a.eventually("x", "get", "com.corp.tmp", "b"))
        #expect(try a.kvctl("delete", "com.corp.tmp", system: true).status == 0)
        #expect(
            try cluster.mustEtcdctl(["get", "--prefix", "--keys-only", "kvd/values/com.corp.tmp"]).split(
                separator: "\n") == ["kvd/values/com.corp.tmpx/a"])
        #expect(try b.eventually("kept", "get", "com.corp.tmpx", "a"))
        #expect(try b.eventuallyGone("com.corp.tmp", "a"), "the deleted domain is gone from b")

        // No etcd at all: a change fails and changes nothing; reads go on from the mirror.
        for member in 0..<3 { cluster.signal(SIGSTOP, member: member) }
        defer { for member in 0..<3 { cluster.signal(SIGCONT, member: member) } }
        let down = try a.kvctl("set", "com.corp.mail", "server", "other", system: true)
        #expect(down.status == 1, "\(down.output)")
        #expect(try a.kvctl("get", "com.corp.mail", "server", system: true).output == "imap.corp.example\n")
        #expect(try b.kvctl("get", "com.corp.mail", "server").output == "imap.corp.example\n")
    }
}
