#!/usr/bin/env python3
"""Sandboxed apps reach only their own settings: the real kvd, with clients run by bubblewrap in a
sandbox laid out as Flatpak lays it (/.flatpak-info at the sandbox's root, kvd's socket bound in):
the Python varlink client (the `varlink` package), the real kvctl and, when built, the real
gsettings with kvd's GIO module. Skipped with the reason when bwrap is missing or cannot run.
Usage: test_sandbox.py BIN_DIR [GIO_MODULE_DIR]
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import varlink

BIN_DIR = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else ".build/debug")
# The GIO module's folder (make giokvd), for the gsettings test; skipped without it.
GIO_MODULE_DIR = os.environ.get("KVD_GIO_MODULE_DIR", "")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = os.path.join(REPO, "clib", "gio", "tests", "io.kvd.test.gschema.xml")
HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "sandbox_client.py")
APP = "org.example.App"
FLATPAK_INFO = f"""[Application]
name={APP}
runtime=runtime/org.freedesktop.Platform/x86_64/23.08

[Instance]
instance-id=1234567890
app-path=/var/lib/flatpak/app/{APP}/x86_64/master/active/files
flatpak-version=1.14.4

[Context]
shared=ipc;
sockets=wayland;
filesystems=xdg-run/kvd;
"""


def bwrap_works():
    if shutil.which("bwrap") is None:
        return "needs bwrap (Debian's bubblewrap; scripts/install-deps.sh installs it)"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True)
    return None if probe.returncode == 0 else "bwrap cannot make a sandbox here: " + probe.stderr.decode()


SKIP = bwrap_works()


def wait_for_file(path, deadline=20):
    end = time.time() + deadline
    while not os.path.exists(path):
        if time.time() > end:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.01)


def start_kvd(root, sock):
    """The real kvd on `sock`, its state in `root`, once it answers."""
    daemon = subprocess.Popen(
        [os.path.join(BIN_DIR, "kvd"), "--socket", sock, "--state-dir", os.path.join(root, "state"),
         "--idle-exit", "0", "--no-system-layer", "--sandbox-readable", "org.gnome.desktop.interface,org.gnome.desktop.a11y*"],
        stderr=subprocess.PIPE)
    end = time.time() + 10
    while True:
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(sock)
            return daemon
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.02)


@unittest.skipIf(SKIP is not None, SKIP or "")
class SandboxedClients(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="kvd-sandbox-")
        self.sock = os.path.join(self.root, "kvd.sock")
        self.info = os.path.join(self.root, "flatpak-info")
        with open(self.info, "w") as file:
            file.write(FLATPAK_INFO)
        self.daemon = start_kvd(self.root, self.sock)
        self.client = varlink.Client(address="unix:" + self.sock)
        with self.client.open("io.kvd.Defaults") as kv:
            for domain in ["org.example.App", "org.example.App.window", "org.other.App", "org.example.AppEvil",
                           "org.gnome.desktop.interface", "org.gnome.desktop.a11y.keyboard", "NSGlobalDomain",
                           "org.example.shared", "com.secret.tokens"]:
                kv.Set(domain, "k", "v-" + domain, None)

    def tearDown(self):
        self.client.cleanup()
        self.daemon.send_signal(signal.SIGCONT)
        self.daemon.send_signal(signal.SIGTERM)
        _, self.log = self.daemon.communicate(timeout=20)
        shutil.rmtree(self.root)

    def bwrap(self, argv, app=APP):
        """argv run in a sandbox as Flatpak makes one: / a fresh tmpfs holding the system's folders
        read-only, /.flatpak-info naming `app`, kvd's folder bound in."""
        info = self.info
        if app != APP:
            info = os.path.join(self.root, "info-" + app)
            with open(info, "w") as file:
                file.write(FLATPAK_INFO.replace(APP, app))
        command = ["bwrap", "--die-with-parent", "--unshare-pid", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for name in sorted(os.listdir("/")):
            path = "/" + name
            if name in ("proc", "dev", "tmp", "sys", "run") or not os.path.exists(path):
                continue
            command += ["--symlink", os.readlink(path), path] if os.path.islink(path) else ["--ro-bind", path, path]
        # The sandbox's /tmp is its own: what the commands run from (the repository, the binaries,
        # the GIO module) is bound back read-only, as a checkout under /tmp (CI's clean clone) needs.
        for path in sorted({REPO, BIN_DIR, GIO_MODULE_DIR} - {""}):
            if os.path.exists(path) and path.startswith("/tmp/"):
                command += ["--ro-bind", path, path]
        return command + ["--bind", self.root, self.root, "--ro-bind", info, "/.flatpak-info"] + argv

    def calls(self, calls, sandboxed=True, app=APP):
        argv = [sys.executable, CLIENT, self.sock, json.dumps(calls)]
        result = subprocess.run(self.bwrap(argv, app) if sandboxed else argv, capture_output=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        return [json.loads(line) for line in result.stdout.decode().splitlines()]

    def kvctl(self, *arguments, sandboxed=False):
        argv = [os.path.join(BIN_DIR, "kvctl"), "--socket", self.sock, "--no-autostart", *arguments]
        return subprocess.run(self.bwrap(argv) if sandboxed else argv, capture_output=True, timeout=60)

    DENIED = {"error": "org.varlink.service.PermissionDenied"}

    def test_a_sandboxed_app_reaches_its_own_domains_and_is_refused_another_apps(self):
        results = self.calls([
            ["Get", {"domain": "org.example.App", "key": "k"}],
            ["Set", {"domain": "org.example.App.window", "key": "k", "value": 1}],
            ["Set", {"domain": "org.example.App.new", "key": "k", "value": 2}],
            ["Get", {"domain": "org.other.App", "key": "k"}],
            ["Set", {"domain": "org.other.App", "key": "k", "value": 3}],
            ["Get", {"domain": "org.example.AppEvil", "key": "k"}],
            ["Get", {"domain": "org.example.app", "key": "k"}],
            ["List", {"domain": "com.secret.tokens"}],
            ["Delete", {"domain": "org.other.App"}],
            ["History", {"domain": "org.other.App"}],
            ["Blame", {"domain": "org.other.App"}],
            ["Snapshot", {"domain": "org.other.App"}],
            ["Backup", {}],
        ])
        self.assertEqual(results[0]["reply"]["value"], "v-org.example.App")
        self.assertIn("reply", results[1])
        self.assertIn("reply", results[2])
        self.assertEqual(results[3:12], [self.DENIED] * 9)
        self.assertIn("error", results[12])  # Backup without more: ExpectedMore, never data
        with self.client.open("io.kvd.Defaults") as kv:
            self.assertEqual(kv.Get("org.other.App", "k")["value"], "v-org.other.App")  # nothing changed
        self.assertIn(f"{APP} (flatpak)", self.stop_and_read_log())

    def stop_and_read_log(self):
        self.daemon.send_signal(signal.SIGTERM)
        _, log = self.daemon.communicate(timeout=20)
        self.daemon = subprocess.Popen(["true"], stderr=subprocess.PIPE)
        return log.decode()

    def test_a_sandboxed_app_reads_the_global_and_public_domains_only_to_read(self):
        results = self.calls([
            ["Get", {"domain": "NSGlobalDomain", "key": "k"}],
            ["Get", {"domain": "org.gnome.desktop.interface", "key": "k"}],
            ["List", {"domain": "org.gnome.desktop.a11y.keyboard"}],
            ["Set", {"domain": "org.gnome.desktop.interface", "key": "k", "value": "mine"}],
            ["Set", {"domain": "NSGlobalDomain", "key": "k", "value": "mine"}],
        ])
        self.assertEqual(results[0]["reply"]["value"], "v-NSGlobalDomain")
        self.assertEqual(results[1]["reply"]["value"], "v-org.gnome.desktop.interface")
        self.assertIn("reply", results[2])
        self.assertEqual(results[3:], [self.DENIED] * 2)

    def test_domains_and_watch_all_name_only_what_it_may_read(self):
        [reply] = self.calls([["Domains", {}]])
        self.assertEqual(reply["reply"]["domains"], [
            "NSGlobalDomain", "org.example.App", "org.example.App.window", "org.gnome.desktop.a11y.keyboard",
            "org.gnome.desktop.interface"])
        watcher = subprocess.Popen(
            self.bwrap([sys.executable, CLIENT, self.sock, "--watch-all", APP]), stdout=subprocess.PIPE)
        seen = []
        for line in watcher.stdout:
            seen.append(json.loads(line))
            if seen[-1] == "watching":
                break
        with self.client.open("io.kvd.Defaults") as kv:
            kv.Set("org.other.App", "k", "secret", None)
            kv.Set("com.secret.tokens", "k", "secret", None)
            kv.Set(APP, "k", "last", None)
        seen += [json.loads(line) for line in watcher.stdout]
        self.assertEqual(watcher.wait(timeout=30), 0)
        watcher.stdout.close()
        named = {entry.get("initial") or entry.get("event") for entry in seen if isinstance(entry, dict)}
        named |= {name for entry in seen if isinstance(entry, dict) for name in entry.get("withheld") or []}
        self.assertNotIn("org.other.App", named)
        self.assertNotIn("com.secret.tokens", named)
        self.assertNotIn("org.example.AppEvil", named)
        self.assertIn({"event": APP}, seen)

    def test_what_a_user_permits_is_reached_and_a_read_only_permit_refuses_writes(self):
        self.assertEqual(self.kvctl("permit", APP, "org.example.shared*").returncode, 0)
        self.assertEqual(self.kvctl("permit", APP, "org.other.App", "--read-only").returncode, 0)
        listed = self.kvctl("permits").stdout.decode()
        self.assertEqual(listed, f"{APP} org.example.shared* read-write\n{APP} org.other.App read-only\n")
        results = self.calls([
            ["Set", {"domain": "org.example.shared", "key": "k", "value": "from the app"}],
            ["Get", {"domain": "org.other.App", "key": "k"}],
            ["Set", {"domain": "org.other.App", "key": "k", "value": "no"}],
            ["Permit", {"app": APP, "pattern": "*"}],
            ["Permits", {}],
            ["Revoke", {"app": APP, "pattern": "org.other.App"}],
        ])
        self.assertIn("reply", results[0])
        self.assertEqual(results[1]["reply"]["value"], "v-org.other.App")
        self.assertEqual(results[2:], [self.DENIED] * 4)
        # Another app gets none of it.
        self.assertEqual(self.calls([["Get", {"domain": "org.other.App", "key": "k"}]], app="org.example.Other"),
                         [self.DENIED])
        self.assertEqual(self.kvctl("permit", "--revoke", APP, "org.other.App").returncode, 0)
        self.assertEqual(self.calls([["Get", {"domain": "org.other.App", "key": "k"}]]), [self.DENIED])
        refused = self.kvctl("permit", "--revoke", APP, "org.other.App")
        self.assertEqual(refused.returncode, 1)

    def test_kvctl_inside_the_sandbox(self):
        mine = self.kvctl("set", APP, "color", "blue", sandboxed=True)
        self.assertEqual(mine.returncode, 0, mine.stderr.decode())
        self.assertEqual(self.kvctl("get", APP, "color", sandboxed=True).stdout, b"blue\n")
        other = self.kvctl("get", "org.other.App", "k", sandboxed=True)
        self.assertEqual(other.returncode, 1)
        self.assertIn(b"permission denied: kvd lets a sandboxed app", other.stderr)
        permit = self.kvctl("permit", APP, "*", sandboxed=True)
        self.assertEqual(permit.returncode, 1)
        self.assertEqual(self.kvctl("permits").stdout, b"")

    @unittest.skipUnless(os.path.exists(os.path.join(GIO_MODULE_DIR, "libgiokvd.so")) and shutil.which("gsettings"),
                         "needs gsettings and the GIO module (make giokvd; KVD_GIO_MODULE_DIR)")
    def test_gsettings_inside_the_sandbox_reaches_its_own_schema_only(self):
        schemas = os.path.join(self.root, "schemas")
        os.mkdir(schemas)
        subprocess.run(["glib-compile-schemas", "--targetdir=" + schemas, os.path.dirname(SCHEMA)], check=True)
        environment = dict(os.environ, GSETTINGS_SCHEMA_DIR=schemas, GIO_EXTRA_MODULES=GIO_MODULE_DIR,
                           GSETTINGS_BACKEND="kvd", KVD_SOCKET=self.sock, KVD_NO_AUTOSTART="1", GIO_USE_VFS="local",
                           XDG_CONFIG_HOME=os.path.join(self.root, "config"))

        def gsettings(app, *arguments):
            return subprocess.run(self.bwrap(["gsettings", *arguments], app), env=environment, capture_output=True,
                                  timeout=60)

        # The app io.kvd.test owns its schema's path /io/kvd/test/: domain io.kvd.test.
        mine = gsettings("io.kvd.test", "set", "io.kvd.test", "text", "'from the sandbox'")
        self.assertEqual(mine.returncode, 0, mine.stderr.decode())
        self.assertEqual(self.kvctl("get", "io.kvd.test", "text").stdout, b"from the sandbox\n")
        blame = self.kvctl("--json", "blame", "io.kvd.test", "text").stdout.decode()
        self.assertIn('"app":"io.kvd.test"', blame)
        self.assertEqual(gsettings("io.kvd.test", "get", "io.kvd.test", "text").stdout, b"'from the sandbox'\n")
        # Another app reads the schema's default, and its write is refused and reverted.
        self.assertNotEqual(gsettings(APP, "get", "io.kvd.test", "text").stdout, b"'from the sandbox'\n")
        gsettings(APP, "set", "io.kvd.test", "text", "'overwritten'")
        self.assertEqual(self.kvctl("get", "io.kvd.test", "text").stdout, b"from the sandbox\n")

    @unittest.skipUnless(os.path.exists(os.path.join(BIN_DIR, "kvclient-probe")), "needs kvclient-probe (swift build)")
    def test_a_kvclient_program_inside_the_sandbox(self):
        def probe(domain, commands):
            argv = [os.path.join(BIN_DIR, "kvclient-probe"), "--socket", self.sock, "--domain", domain]
            result = subprocess.run(self.bwrap(argv), input="".join(line + "\n" for line in commands + ["quit"]).encode(),
                                    capture_output=True, timeout=60)
            return result.stdout.decode().splitlines()

        self.assertEqual(probe(APP, ["set volume 0.5", "get volume"]), ["ok", "0.5"])
        self.assertEqual(self.kvctl("get", APP, "volume").stdout, b"0.5\n")
        other = probe("org.other.App", ["set k \"mine\"", "get k"])
        self.assertTrue(other[0].startswith("error"), other)
        self.assertEqual(self.kvctl("get", "org.other.App", "k").stdout, b"v-org.other.App\n")

    def test_an_unsandboxed_client_is_unchanged(self):
        results = self.calls([
            ["Get", {"domain": "org.other.App", "key": "k"}],
            ["Set", {"domain": "com.secret.tokens", "key": "k", "value": "mine"}],
            ["Domains", {}],
            ["Permits", {}],
        ], sandboxed=False)
        self.assertEqual(results[0]["reply"]["value"], "v-org.other.App")
        self.assertIn("reply", results[1])
        self.assertIn("org.other.App", results[2]["reply"]["domains"])
        self.assertEqual(results[3]["reply"]["permits"], [])

    def test_a_connection_whose_process_exited_before_kvd_knew_it_reaches_only_public_domains(self):
        """The escape a fork would be: connect, hand the socket to a child, exit before kvd reads /proc."""
        folder = tempfile.mkdtemp(dir=self.root)
        calls = [["Get", {"domain": APP, "key": "k"}], ["Get", {"domain": "org.gnome.desktop.interface", "key": "k"}]]
        child = subprocess.Popen(
            self.bwrap([sys.executable, CLIENT, self.sock, "--fork-exit", folder, json.dumps(calls)]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for_file(os.path.join(folder, "described"))
        self.daemon.send_signal(signal.SIGSTOP)
        open(os.path.join(folder, "stopped"), "w").close()
        wait_for_file(os.path.join(folder, "ready"))
        self.daemon.send_signal(signal.SIGCONT)
        open(os.path.join(folder, "go"), "w").close()
        output, errors = child.communicate(timeout=60)
        self.assertEqual(child.returncode, 0, errors.decode())
        results = [json.loads(line) for line in output.decode().splitlines()]
        self.assertEqual(results[0], self.DENIED)
        self.assertEqual(results[1]["reply"]["value"], "v-org.gnome.desktop.interface")

    def test_an_app_whose_main_thread_exited_reaches_only_public_domains(self):
        """The escape an exited leader would be: its /proc/PID/root can no longer be followed, so a
        /.flatpak-info looked up through it reads as absent while the process still runs."""
        calls = [["Get", {"domain": "org.other.App", "key": "k"}],
                 ["Set", {"domain": "org.other.App", "key": "k", "value": 3}],
                 ["Get", {"domain": "org.gnome.desktop.interface", "key": "k"}]]
        result = subprocess.run(self.bwrap([sys.executable, CLIENT, self.sock, "--leader-exits", json.dumps(calls)]),
                                capture_output=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr.decode())
        results = [json.loads(line) for line in result.stdout.decode().splitlines()]
        self.assertEqual(results[:2], [self.DENIED] * 2)
        self.assertEqual(results[2]["reply"]["value"], "v-org.gnome.desktop.interface")


def fuse_works():
    if os.geteuid() != 0:
        return "needs root (mounts a FUSE file system and chroots into it)"
    if not os.path.exists("/dev/fuse"):
        return "needs /dev/fuse"
    return None


@unittest.skipIf(fuse_works() is not None, fuse_works() or "")
class HungRoots(unittest.TestCase):
    """A process whose root is a FUSE file system that never answers a lookup (attack/39-sandbox.md,
    findings 25 and 27): kvd never asks FUSE (the process is unidentified at once, confined); and
    where a lookup does reach it (an overlay over FUSE), kvd looks off its loop, serves every other
    client meanwhile, and takes the process as unidentified once its patience (3 s) runs out."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="kvd-hung-")
        self.sock = os.path.join(self.root, "kvd.sock")
        self.mountpoint = os.path.join(self.root, "mnt")
        os.mkdir(self.mountpoint)
        self.daemon = start_kvd(self.root, self.sock)
        self.client = varlink.Client(address="unix:" + self.sock)
        self.hung = None
        with self.client.open("io.kvd.Defaults") as kv:
            kv.Set("org.example.private", "k", "secret", None)
            kv.Set("NSGlobalDomain", "k", "public", None)

    def tearDown(self):
        self.client.cleanup()
        if self.hung is not None and self.hung.poll() is None:
            self.hung.kill()
            self.hung.wait()
        for mount in (self.mountpoint + ".merged", self.mountpoint):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.communicate(timeout=20)
        shutil.rmtree(self.root, ignore_errors=True)

    CALLS = [["Get", {"domain": "org.example.private", "key": "k"}], ["Get", {"domain": "NSGlobalDomain", "key": "k"}]]

    def start_hung(self, *options):
        self.hung = subprocess.Popen([sys.executable, os.path.join(HERE, "hung_fuse_root.py"), *options, self.sock,
                                      self.mountpoint, json.dumps(self.CALLS)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(json.loads(self.hung.stdout.readline() or b'"no line"'), "connected",
                         self.hung.stderr.read().decode() if self.hung.poll() is not None else "")

    def served_meanwhile(self, count=20):
        """Other connections are served (with a lookup on the loop, the first waited forever: a
        socket timeout turns that into a failure, not a hang)."""
        for n in range(count):
            with socket.socket(socket.AF_UNIX) as other:
                other.settimeout(30)
                other.connect(self.sock)
                other.sendall(b'{"method":"io.kvd.Defaults.Get","parameters":{"domain":"org.example.private","key":"k"}}\0')
                self.assertIn(b'"secret"', other.recv(65536), f"call {n}")

    def hung_results(self):
        out, err = self.hung.communicate(timeout=60)
        self.assertEqual(self.hung.returncode, 0, err.decode())
        return [json.loads(line) for line in out.decode().splitlines()]

    def stop_and_read_log(self):
        self.daemon.send_signal(signal.SIGTERM)
        _, log = self.daemon.communicate(timeout=20)
        return log.decode()

    def test_a_root_on_fuse_is_never_looked_into_and_reaches_only_public_domains(self):
        self.start_hung()
        self.served_meanwhile()
        results = self.hung_results()
        self.assertEqual(results[0], {"error": "org.varlink.service.PermissionDenied"})
        self.assertEqual(results[1]["reply"]["value"], "public")
        self.assertFalse(os.path.exists(self.mountpoint + ".lookups"), "kvd asked the FUSE daemon for a lookup")
        self.assertNotIn("did not answer", self.stop_and_read_log())

    def test_a_root_whose_lookup_hangs_stalls_nobody_and_is_confined_after_its_patience(self):
        self.start_hung("--overlay")  # a local file system whose lower layer is the FUSE one
        self.served_meanwhile()
        self.assertIsNone(self.hung.poll(), "the hung root's calls were answered before its patience ran out")
        results = self.hung_results()  # it kills its FUSE daemon at the end: kvd's look ends
        self.assertEqual(results[0], {"error": "org.varlink.service.PermissionDenied"})
        self.assertEqual(results[1]["reply"]["value"], "public")
        self.assertTrue(os.path.exists(self.mountpoint + ".lookups"), "the lookup reached FUSE")
        self.assertIn("its root did not answer within 3.0 seconds", self.stop_and_read_log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
