#!/usr/bin/env python3
"""1,500 relocatable GSettings objects on one kvd connection (run by clib/gio/tests/run.sh).

test_many.py KVCTL   against a running kvd (KVD_SOCKET)

Issue 38: the backend once opened one kvd Watch (one socket) per domain, so an app with 1,500
relocatable objects (terminal profiles, mail accounts) under `ulimit -n 1024` ran out of
descriptors and read wrong values. Here: the values are set in kvd first (one varlink
connection, pipelined Sets), then, with RLIMIT_NOFILE at 1024, 1,500 objects on distinct paths
are made and read; every one must read its own value, the process must hold at most 8 sockets,
and a later kvctl change of the last one must arrive as `changed`.
"""
import os
import resource
import signal
import subprocess
import sys

from gi.repository import Gio, GLib

from pipelined import call_all

signal.alarm(120)  # a hang fails the test instead of stalling make test
COUNT = 1500
MAX_SOCKETS = 8


def fail(message):
    print(f"test_many.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def set_values():
    """name = "profile-N" in domain io.kvd.many.pN, for every N, over one connection."""
    call_all([{"method": "io.kvd.Defaults.Set", "parameters": {
        "domain": f"io.kvd.many.p{i}", "key": "name", "value": f"profile-{i}"}} for i in range(COUNT)], fail)


def sockets():
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


set_values()
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
backend = Gio.SettingsBackend.get_default()
if type(backend).__gtype__.name != "KvdSettingsBackend":
    fail(f"GLib chose {type(backend).__gtype__.name}, not kvd's backend")
objects = [Gio.Settings.new_with_path("io.kvd.test.profile", f"/io/kvd/many/p{i}/") for i in range(COUNT)]
wrong = [i for i, s in enumerate(objects) if s.get_string("name") != f"profile-{i}"]
if wrong:
    fail(f"{len(wrong)} of {COUNT} objects read wrong (the first: p{wrong[0]} = {objects[wrong[0]].get_string('name')!r})")
print(f"ok {COUNT} relocatable objects under ulimit -n 1024: each reads its own value")
held = sockets()
if held > MAX_SOCKETS:
    fail(f"the process holds {held} sockets for {COUNT} objects (at most {MAX_SOCKETS})")
print(f"ok and the process holds {held} sockets (at most {MAX_SOCKETS})")

loop = GLib.MainLoop()
last = objects[-1]
last.connect("changed", lambda _s, key: loop.quit())
subprocess.run([sys.argv[1], "set", f"io.kvd.many.p{COUNT - 1}", "name", "renamed"], check=True)
timeout = GLib.timeout_add_seconds(20, lambda: fail("timed out waiting for changed::name of the last object"))
loop.run()
GLib.source_remove(timeout)
if last.get_string("name") != "renamed":
    fail(f"after the change, the last object reads {last.get_string('name')!r}")
print("ok a kvctl change of the last object arrives as changed, on the one stream")
