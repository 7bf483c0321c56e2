#!/usr/bin/env python3
"""kvd checked by an independent varlink implementation: the `varlink` package from PyPI.

It fetches the served interface description, parses it, and checks every call's parameters and
every reply against it, so a description that does not match what the daemon does fails here.
Usage: test_varlink.py BIN_DIR   (the folder holding the built `kvd`)
"""
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

BIN_DIR = sys.argv.pop(1) if len(sys.argv) > 1 else ".build/debug"


def place_sleep_at(pid):
    """A `sleep 60` started at `pid` (free: its process was reaped) through
    /proc/sys/kernel/ns_last_pid, or None when other forks kept taking it (200 tries)."""
    for _ in range(200):  # others fork too on a busy machine: try again
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(pid - 1))
        taker = subprocess.Popen(["sleep", "60"])
        if taker.pid == pid:
            return taker
        taker.kill()
        taker.wait()
    return None


def wait_for_content(path, seconds=20):
    """Waits until the file at `path` holds something, at most `seconds`."""
    deadline = time.time() + seconds
    while not (os.path.exists(path) and os.path.getsize(path) > 0) and time.time() < deadline:
        time.sleep(0.02)

class KvdUnderPythonVarlink(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="kvd-py-")
        cls.sock = os.path.join(cls.root, "kvd.sock")
        cls.daemon = subprocess.Popen(
            [os.path.join(BIN_DIR, "kvd"), "--socket", cls.sock, "--state-dir",
             os.path.join(cls.root, "state"), "--idle-exit", "0"],
            stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.connect(cls.sock)
                break
            except OSError:
                time.sleep(0.02)
        cls.client = varlink.Client(address="unix:" + cls.sock)

    @classmethod
    def tearDownClass(cls):
        cls.client.cleanup()
        cls.daemon.send_signal(signal.SIGTERM)
        assert cls.daemon.wait(timeout=20) == 0
        shutil.rmtree(cls.root)

    def test_service_info_lists_the_interface(self):
        with self.client.open("org.varlink.service") as service:
            info = service.GetInfo()
            self.assertIn("io.kvd.Defaults", info["interfaces"])
            self.assertEqual(info["product"], "kvd")

    def test_set_get_list_delete_round_trip(self):
        with self.client.open("io.kvd.Defaults") as kv:
            revision = kv.Set("com.example.py", "greeting", "hello", None)["revision"]
            got = kv.Get("com.example.py", "greeting")
            self.assertEqual(got["value"], "hello")
            self.assertEqual(got["revision"], revision)
            kv.Set("com.example.py", "when", {"$date": "2026-11-29T17:00:00.250Z"}, None)
            listed = kv.List("com.example.py")
            self.assertEqual(listed["values"]["when"], {"$date": "2026-11-29T17:00:00.250Z"})
            self.assertEqual(kv.ListAll("com.example.py"), {**listed, "unreadable": {}})
            self.assertIn("com.example.py", kv.Domains()["domains"])
            self.assertGreater(kv.Delete("com.example.py", "greeting")["revision"], revision)

    def test_apply_is_atomic_and_checks_the_revision(self):
        with self.client.open("io.kvd.Defaults") as kv:
            first = kv.Apply("com.example.apply", [{"key": "a", "value": 1}, {"key": "b", "value": 2.5}], 0)["revision"]
            with self.assertRaises(varlink.VarlinkError) as caught:
                kv.Apply("com.example.apply", [{"key": "a", "value": 9}, {"key": "c", "value": 3}], first - 1)
            self.assertEqual(caught.exception.error(), "io.kvd.Defaults.RevisionMismatch")
            self.assertEqual(caught.exception.parameters()["revision"], first)
            self.assertEqual(kv.List("com.example.apply")["values"], {"a": 1, "b": 2.5})

    def test_errors_carry_their_declared_parameters(self):
        with self.client.open("io.kvd.Defaults") as kv:
            with self.assertRaises(varlink.VarlinkError) as caught:
                kv.Get("com.example.none", "missing")
            self.assertEqual(caught.exception.error(), "io.kvd.Defaults.NotFound")
            self.assertEqual(caught.exception.parameters()["key"], "missing")
            with self.assertRaises(varlink.VarlinkError) as caught:
                kv.Get("../etc", "k")
            self.assertEqual(caught.exception.error(), "io.kvd.Defaults.InvalidName")

    def test_watch_streams_changes(self):
        with self.client.open("io.kvd.Defaults") as kv, self.client.open("io.kvd.Defaults") as writer:
            writer.Set("com.example.watch", "a", 1, None)
            stream = kv.Watch("com.example.watch", None, _more=True)
            initial = next(stream)
            self.assertTrue(initial["initial"])
            self.assertEqual(initial["changes"], [{"key": "a", "value": 1}])
            revision = writer.Set("com.example.watch", "a", 2, None)["revision"]
            change = next(stream)
            self.assertFalse(change["initial"])
            self.assertEqual(change["revision"], revision)
            self.assertEqual(change["changes"], [{"key": "a", "value": 2}])


    def test_watch_all_streams_every_domain_under_the_prefix(self):
        with self.client.open("io.kvd.Defaults") as kv, self.client.open("io.kvd.Defaults") as writer:
            writer.Set("com.example.all.a", "k", 1, None)
            stream = kv.WatchAll("com.example.all.", _more=True)
            initial = next(stream)
            self.assertTrue(initial["initial"])
            self.assertEqual(initial["changes"], [])
            self.assertNotIn("domain", initial)
            writer.Set("com.example.other", "k", 1, None)  # not under the prefix: not sent
            first = writer.Set("com.example.all.a", "k", 2, None)["revision"]
            second = writer.Set("com.example.all.b", "k", 3, None)["revision"]
            self.assertGreater(first, initial["revision"])
            got = [next(stream), next(stream)]
            self.assertEqual([(r["domain"], r["revision"], r["changes"]) for r in got],
                             [("com.example.all.a", first, [{"key": "k", "value": 2}]),
                              ("com.example.all.b", second, [{"key": "k", "value": 3}])])
    def test_watch_all_with_current_starts_with_every_domains_values(self):
        with self.client.open("io.kvd.Defaults") as kv, self.client.open("io.kvd.Defaults") as writer:
            writer.Set("com.example.cur.a", "k", 1, None)
            writer.Set("com.example.cur.b", "k", "two", None)
            writer.Set("com.example.elsewhere", "k", 1, None)
            stream = kv.WatchAll("com.example.cur.", True, _more=True)
            start = [next(stream)]
            while start[-1].get("partial"):
                start.append(next(stream))
            self.assertEqual({r["revision"] for r in start}, {start[-1]["revision"]})
            self.assertTrue(all(r["initial"] for r in start))
            self.assertEqual([(r["domain"], r["changes"]) for r in start[:-1]],
                             [("com.example.cur.a", [{"key": "k", "value": 1}]),
                              ("com.example.cur.b", [{"key": "k", "value": "two"}])])
            self.assertNotIn("domain", start[-1])
            self.assertEqual(start[-1]["withheld"], [])
            revision = writer.Set("com.example.cur.c", "k", 3, None)["revision"]
            change = next(stream)
            self.assertEqual((change["domain"], change["revision"], change["changes"]),
                             ("com.example.cur.c", revision, [{"key": "k", "value": 3}]))

    def test_history_blame_and_watch_carry_the_writer(self):
        python = os.path.realpath(sys.executable)
        with self.client.open("io.kvd.Defaults") as kv, self.client.open("io.kvd.Defaults") as writer:
            writer.Set("com.example.blame", "a", 1, None)
            stream = kv.Watch("com.example.blame", None, _more=True)
            self.assertNotIn("writer", next(stream), "the current values have no writer")
            revision = writer.Set("com.example.blame", "a", 2, None)["revision"]
            change = next(stream)
            self.assertEqual(change["writer"]["program"], python)
            self.assertEqual(change["writer"]["pid"], os.getpid())
            self.assertEqual(change["writer"]["uid"], os.getuid())
        with self.client.open("io.kvd.Defaults") as kv:
            entries = kv.Blame("com.example.blame", None)["entries"]
            self.assertEqual([(e["key"], e["revision"], e["writer"]["program"]) for e in entries],
                             [("a", revision, python)])
            history = kv.History("com.example.blame", "a", None, None, None)["entries"]
            self.assertEqual([e["writer"]["program"] for e in history], [python, python])
    def test_a_process_that_execs_another_program_is_named_anew(self):
        """kvd reads who is asking for each connection, never from an earlier one of the same
        process: a python process writes, then `exec`s kvctl (same pid, same process to the
        kernel), which writes in turn and is named kvctl."""
        kvctl = os.path.realpath(os.path.join(BIN_DIR, "kvctl"))
        script = (
            "import os, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "s.sendall(b'{\"method\":\"io.kvd.Defaults.Set\",\"parameters\":"
            "{\"domain\":\"com.example.exec\",\"key\":\"k\",\"value\":1}}\\0')\n"
            "reply = b''\n"
            "while not reply.endswith(b'\\0'): reply += s.recv(4096)\n"
            "assert b'revision' in reply, reply\n"
            "s.close()\n"
            "os.execv(sys.argv[2], [sys.argv[2], '--socket', sys.argv[1], 'write', 'com.example.exec', 'k', '-int', '2'])\n")
        process = subprocess.Popen([sys.executable, "-c", script, self.sock, kvctl], stderr=subprocess.PIPE, text=True)
        _, errors = process.communicate(timeout=30)
        self.assertEqual(process.returncode, 0, errors)
        with self.client.open("io.kvd.Defaults") as kv:
            history = kv.History("com.example.exec", "k", None, None, None)["entries"]
        self.assertEqual([(e["value"], e["writer"]["pid"], e["writer"]["program"]) for e in history],
                         [(2, process.pid, kvctl), (1, process.pid, os.path.realpath(sys.executable))])

    def test_a_pid_taken_by_another_process_is_not_blamed(self):
        """A connects and forks C (who keeps the connection) and exits; its pid goes to B (a
        `sleep`, placed there through ns_last_pid); kvd, stopped meanwhile, goes on and accepts
        the connection; then C writes. kvd reads who is asking when it accepts: /proc/PID is B's
        by then, and must not be taken for A's. A process kvd cannot identify is confined as a
        sandboxed app with no id (docs/sandboxes.md): C's write is refused, and nobody blamed."""
        if os.getuid() != 0 or not os.path.exists("/proc/sys/kernel/ns_last_pid"):
            self.skipTest("needs root: places a process at a pid through /proc/sys/kernel/ns_last_pid")
        go_read, go_write = os.pipe()
        out = os.path.join(self.root, "reused.out")
        script = (
            "import os, socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "if os.fork() == 0:\n"
            "    os.read(int(sys.argv[2]), 1)\n"
            "    s.sendall(b'{\"method\":\"io.kvd.Defaults.Set\",\"parameters\":"
            "{\"domain\":\"com.example.reused\",\"key\":\"k\",\"value\":1}}\\0')\n"
            "    reply = b''\n"
            "    while not reply.endswith(b'\\0'): reply += s.recv(4096)\n"
            "    open(sys.argv[3], 'wb').write(reply)\n"
            "os._exit(0)\n")
        self.daemon.send_signal(signal.SIGSTOP)  # A's connection waits in the backlog until B has A's pid
        try:
            first = subprocess.Popen([sys.executable, "-c", script, self.sock, str(go_read), out], pass_fds=(go_read,))
            self.assertEqual(first.wait(timeout=20), 0)  # reaped: its pid is free
        except BaseException:
            self.daemon.send_signal(signal.SIGCONT)
            raise
        os.close(go_read)
        taker = place_sleep_at(first.pid)
        self.daemon.send_signal(signal.SIGCONT)
        if taker is None:
            os.close(go_write)
            self.skipTest(f"could not place a process at pid {first.pid}")
        try:
            os.write(go_write, b"x")
            wait_for_content(out)
            with open(out, "rb") as reply:
                self.assertIn(b'"error":"org.varlink.service.PermissionDenied"', reply.read())
            with self.client.open("io.kvd.Defaults") as kv:
                with self.assertRaises(varlink.VarlinkError):
                    kv.Blame("com.example.reused", "k")
        finally:
            os.close(go_write)
            taker.kill()
            taker.wait()

    def test_a_pid_taken_after_accept_is_not_blamed_at_the_first_write(self):
        """A connects and makes a read (kvd has accepted and identified it: an unsandboxed
        process running python), forks C (who keeps the connection) and exits; its pid goes to B
        (a `sleep`, placed there through ns_last_pid); then C writes. kvd read who is asking when
        it accepted the connection, through its own pidfd: the change is C's to serve (its reach
        was fixed at accept) and is recorded as A, with A's pid, uid and program: never B's."""
        if os.getuid() != 0 or not os.path.exists("/proc/sys/kernel/ns_last_pid"):
            self.skipTest("needs root: places a process at a pid through /proc/sys/kernel/ns_last_pid")
        go_read, go_write = os.pipe()
        out = os.path.join(self.root, "reused-later.out")
        script = (
            "import os, socket, sys\n"
            "def call(s, m):\n"
            "    s.sendall(m + b'\\0')\n"
            "    reply = b''\n"
            "    while not reply.endswith(b'\\0'): reply += s.recv(4096)\n"
            "    return reply\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "call(s, b'{\"method\":\"io.kvd.Defaults.Domains\"}')\n"
            "if os.fork() == 0:\n"
            "    os.read(int(sys.argv[2]), 1)\n"
            "    open(sys.argv[3], 'wb').write(call(s, b'{\"method\":\"io.kvd.Defaults.Set\",\"parameters\":"
            "{\"domain\":\"com.example.reused.later\",\"key\":\"k\",\"value\":1}}'))\n"
            "os._exit(0)\n")
        first = subprocess.Popen([sys.executable, "-c", script, self.sock, str(go_read), out], pass_fds=(go_read,))
        self.assertEqual(first.wait(timeout=20), 0)  # reaped: its pid is free
        os.close(go_read)
        taker = place_sleep_at(first.pid)
        if taker is None:
            os.close(go_write)
            self.skipTest(f"could not place a process at pid {first.pid}")
        try:
            os.write(go_write, b"x")
            wait_for_content(out)
            with open(out, "rb") as reply:
                self.assertIn(b'"revision"', reply.read())
            with self.client.open("io.kvd.Defaults") as kv:
                writer = kv.Blame("com.example.reused.later", "k")["entries"][0]["writer"]
            self.assertEqual((writer["pid"], writer["uid"]), (first.pid, os.getuid()))
            self.assertEqual(writer.get("program"), os.path.realpath(sys.executable), "A, as accepted")
        finally:
            os.close(go_write)
            taker.kill()
            taker.wait()

if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print(f"python varlink: {result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
