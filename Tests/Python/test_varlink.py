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

if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print(f"python varlink: {result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
