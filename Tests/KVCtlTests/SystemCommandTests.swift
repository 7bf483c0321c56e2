import KVProtocol
import KVValues
import Synchronization
import Testing

@testable import KVCtl

/// kvctl's side of the system layer (`--system`, lock, unlock, locks, source, and the messages for
/// a locked key and a denied change), against the in-memory daemon.
@Suite struct SystemCommandTests {
    static let lockedMessage =
        "kvctl: com.a k is locked by the system administrator; root or a member of the system instance's admin group can lift it (kvctl --system source com.a k says where the lock comes from)\n"

    @Test func lockCommandsNeedSystemAndSaySo() {
        let daemon = FakeDaemon()
        for arguments in [["lock", "com.a", "k"], ["unlock", "com.a", "k"], ["locks"]] {
            let result = daemon.kvctl(arguments)
            #expect(result.status == 2)
            #expect(
                result.err.hasPrefix(
                    "kvctl: \(arguments[0]) works on the system instance only: kvctl --system \(arguments[0])"))
            #expect(result.err.contains("usage: kvctl [OPTIONS] \(arguments[0])"))
        }
        #expect(daemon.shared.store.withLock { $0.locks.isEmpty && $0.revision == 0 }, "a refused command reached kvd")
    }

    @Test func lockListAndUnlock() {
        let daemon = FakeDaemon()
        #expect(daemon.kvctl("--system", "set", "com.a", "k", "v").status == 0)
        #expect(daemon.kvctl("--system", "lock", "com.a", "k") == (0, "", ""))
        #expect(daemon.kvctl("--system", "--json", "lock", "com.b", "line\nbreak") == (0, "{\"revision\":3}\n", ""))
        #expect(daemon.kvctl("--system", "locks").out == "com.a k\ncom.b line\\nbreak\n")
        #expect(daemon.kvctl("--system", "locks", "com.a").out == "k\n")
        #expect(
            daemon.kvctl("--system", "--json", "locks", "com.b").out
                == "[{\"domain\":\"com.b\",\"key\":\"line\\nbreak\"}]\n")
        #expect(daemon.kvctl("--system", "unlock", "com.a", "k") == (0, "", ""))
        #expect(
            daemon.kvctl("--system", "unlock", "com.a", "k") == (
                1, "", "kvctl: com.a k is not locked (list the locks with: kvctl --system locks com.a)\n"
            ))
        #expect(daemon.kvctl("--system", "locks", "com.a") == (0, "", ""))
    }

    /// Every write path to a locked key exits 1 with one line naming the lock and who can lift it,
    /// and changes nothing; `import` of a file holding the locked key imports the rest and names it
    /// (a lock blocks only its key).
    @Test func everyWriteToALockedKeyExitsOneNamingTheLock() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "k", "-array", "v")
        _ = daemon.kvctl("--system", "lock", "com.a", "k")
        let writes: [[String]] = [
            ["set", "com.a", "k", "x"], ["set", "com.a", "k", "-array-add", "x"], ["delete", "com.a", "k"],
            ["delete", "com.a"],
            ["rename", "com.a", "k", "other"],
        ]
        for arguments in writes {
            #expect(daemon.kvctl(arguments, stdin: "{}") == (1, "", Self.lockedMessage), "\(arguments)")
        }
        let imported = daemon.kvctl(["import", "com.a", "-"], stdin: #"{"k": "x", "other": "y"}"#)
        #expect(
            imported.status == 1 && imported.err.contains(#""k" of com.a is locked by the system administrator"#),
            "\(imported)")
        #expect(daemon.kvctl("--json", "get", "com.a", "k").out == "[\"v\"]\n")
        #expect(daemon.kvctl("get", "com.a", "other").out == "y\n")
    }

    @Test func aChangeDeniedByTheSystemInstanceSaysWhoMayMakeIt() {
        let daemon = FakeDaemon()
        daemon.shared.store.withLock { $0.writesDenied = true }
        let denied =
            "kvctl: permission denied: only root and members of group kvd-admin may change the system instance\n"
        #expect(daemon.kvctl("--system", "set", "com.a", "k", "v") == (1, "", denied))
        #expect(daemon.kvctl("--system", "lock", "com.a", "k") == (1, "", denied))
        #expect(daemon.kvctl("--system", "locks") == (0, "", ""), "reading must stay allowed")
    }

    @Test func getTakesEffectiveAfterAKeyOnly() {
        let daemon = FakeDaemon()
        let result = daemon.kvctl("--system", "get", "com.a", "--effective")
        #expect(result.status == 2 && result.err.contains("needs a KEY") && result.err.contains("export"), "\(result)")
    }

    @Test func sourceSaysWhereTheValueComesFromAndWhatToDo() {
        let daemon = FakeDaemon()
        for key in ["mine", "machine", "k"] { _ = daemon.kvctl("set", "com.a", key, "v") }
        daemon.shared.store.withLock {
            $0.sources[try! Domain(validating: "com.a")] = [try! Key(validating: "machine"): .system]
        }
        _ = daemon.kvctl("--system", "lock", "com.a", "k")
        #expect(daemon.kvctl("source", "com.a", "mine") == (0, "user: your own value\n", ""))
        #expect(
            daemon.kvctl("source", "com.a", "machine").out
                == "system: the machine's default (your own value would override it: kvctl set com.a machine ...)\n")
        #expect(
            daemon.kvctl("source", "com.a", "k").out
                == "locked: set by the system administrator and locked (root or a member of the system instance's admin group can lift it; kvctl --system source com.a k says where it comes from)\n"
        )
        #expect(
            daemon.kvctl("--json", "source", "com.a", "k").out
                == "{\"domain\":\"com.a\",\"key\":\"k\",\"source\":\"locked\",\"value\":\"v\"}\n")
        #expect(daemon.kvctl("source", "com.a", "none").status == 1)
    }

    /// `--system` finds the socket in $KVD_SYSTEM_SOCKET and never starts a daemon.
    @Test func systemUsesItsOwnSocketAndNeverAutostarts() {
        let daemon = FakeDaemon()
        _ = daemon.kvctl("set", "com.a", "k", "v")
        let console = RecordingConsole()
        let environment = ["KVD_SYSTEM_SOCKET": daemon.path, "KVD_SOCKET": "/nonexistent/user.sock"]
        #expect(
            KVCtl.run(arguments: ["--system", "get", "com.a", "k"], environment: environment, console: console) == 0)
        #expect(console.output == "v\n")

        let missing = RecordingConsole()
        let absent = ["KVD_SYSTEM_SOCKET": "/tmp/kvctl-test-no-system.sock"]
        let status = KVCtl.run(
            arguments: ["--system", "get", "com.a", "k"], environment: absent, console: missing, daemonPath: "/bin/true"
        )
        #expect(status == 1)
        #expect(
            missing.errors.hasPrefix("kvctl: cannot connect to the system instance at /tmp/kvctl-test-no-system.sock: ")
        )
        #expect(missing.errors.contains("systemctl start kvd-system.socket"))
    }
}
