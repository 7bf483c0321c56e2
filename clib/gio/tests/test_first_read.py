#!/usr/bin/env python3
"""A fresh process's first read of 1,500 domains, without a round trip each (run by run.sh).

test_first_read.py KVCTL            against a running user kvd (KVD_SOCKET) following a system
                                    instance (KVD_SYSTEM_SOCKET)

Issue 38: the backend once read each domain with a request of its own the first time a GSettings
object touched it (1,500 Snapshots for 1,500 relocatable objects). Now the process's one stream
starts with every domain's current values. Here: 1,500 domains with values, one over kvd's
per-domain budget (256 KiB: only named, read apart), one with only a system default (its user and
default values read apart), one with an admin default and a lock, one whose user value a lock
without a value hides; then a fresh process (under `strace -f -e connect,sendto`, which counts
what it really sends to kvd) makes 1,500 relocatable objects and a few more, and every one must
read its own value while the process makes at most 3 requests and 3 connections to kvd: one
WatchAll, and one Snapshot, of the domain over the budget only. A domain kvctl makes afterwards
(seen on the stream before a change of a touched one) is then read with no request either.

The module keeps the start's domains in one index sorted by name (clib/gio/start.c): the store
also has domains first and last in that order, whose names are prefixes of one another (EDGES);
the middle ones are read at once, the first and the last only after an event of them came (the
event's domain is found in the index, and the key it did not change is kept).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from pipelined import call_all

signal.alarm(180)  # a hang fails the test instead of stalling make test
COUNT = 1500
MAX_REQUESTS = 3
MAX_CONNECTIONS = 3
SCHEMA = "io.kvd.test.profile"
# Domains first and last in name order (byte order: '-' < '.' < '0' < 'z'), by GSettings path.
EDGES = {"0": "/0/", "0-": "/0-/", "0.0": "/0/0/", "0.00": "/0/00/", "zz": "/zz/", "zz.z": "/zz/z/", "zz.zz": "/zz/zz/"}


def fail(message):
    print(f"test_first_read.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def set_values(kvctl):
    def set_call(domain, key, value):
        return {"method": "io.kvd.Defaults.Set", "parameters": {"domain": domain, "key": key, "value": value}}
    call_all([set_call(f"io.kvd.first.p{i}", "name", f"first-{i}") for i in range(COUNT)], fail)
    # in the stream's current state, untouched until after events of them came
    call_all([set_call("io.kvd.first.raw", "name", "raw-before"), set_call("io.kvd.first.raw", "other", 7),
              set_call("io.kvd.first.gone", "name", "gone-before")], fail)
    call_all([set_call(domain, key, f"{key}-{domain}") for domain in EDGES for key in ("name", "note")], fail)
    # over kvd's per-domain budget for the stream's start: 300 keys of 1 KiB
    call_all([set_call("io.kvd.first.big", f"a{i:03d}", "b" * 1024) for i in range(300)]
             + [set_call("io.kvd.first.big", "name", "big-name")], fail)
    # p5: its user value hidden by a lock without a value (the schema default shows, not writable)
    for args in (["set", "io.kvd.first.sys", "name", "from-system"], ["set", "io.kvd.first.p3", "name", "admin-3"],
                 ["lock", "io.kvd.first.p3", "name"], ["lock", "io.kvd.first.p5", "name"]):
        subprocess.run([kvctl, "--system", *args], check=True)
    deadline = time.monotonic() + 20
    while True:  # the user's kvd follows the system instance: wait until it has the lock
        out = subprocess.run([kvctl, "--json", "get", "io.kvd.first.p3", "name"], capture_output=True, text=True)
        system = subprocess.run([kvctl, "get", "io.kvd.first.sys", "name"], capture_output=True, text=True)
        hidden = subprocess.run([kvctl, "get", "io.kvd.first.p5", "name"], capture_output=True, text=True)
        if out.stdout.strip() == '"admin-3"' and system.stdout.strip() == "from-system" and hidden.returncode != 0:
            break
        if time.monotonic() > deadline:
            fail(f"the user's kvd did not get the system layer: {out.stdout!r} {system.stdout!r}")
        time.sleep(0.05)


def read(kvctl):
    """The fresh process: every object reads its own value."""
    from gi.repository import Gio, GLib
    backend = Gio.SettingsBackend.get_default()
    if type(backend).__gtype__.name != "KvdSettingsBackend":
        fail(f"GLib chose {type(backend).__gtype__.name}, not kvd's backend")
    objects = [Gio.Settings.new_with_path(SCHEMA, f"/io/kvd/first/p{i}/") for i in range(COUNT)]
    expected = [f"first-{i}" for i in range(COUNT)]
    expected[3], expected[5] = "admin-3", "unnamed"
    wrong = [i for i, s in enumerate(objects) if s.get_string("name") != expected[i]]
    if wrong:
        fail(f"{len(wrong)} of {COUNT} objects read wrong (the first: p{wrong[0]} = "
             f"{objects[wrong[0]].get_string('name')!r})")
    if objects[3].is_writable("name") or not objects[4].is_writable("name") or objects[5].is_writable("name"):
        fail("the admin's locks of p3 and p5 name are not seen (or p4 is not writable)")
    big = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/big/").get_string("name")
    sys_settings = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/sys/")
    system = sys_settings.get_string("name")
    layers = (sys_settings.get_user_value("name"), sys_settings.get_default_value("name").get_string(),
              objects[4].get_user_value("name").get_string(), objects[4].get_default_value("name").get_string())
    if layers != (None, "from-system", "first-4", "unnamed"):
        fail(f"the system-only domain's user and default values, and p4's, read {layers!r}")
    empty = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/nothing/").get_string("name")
    if (big, system, empty) != ("big-name", "from-system", "unnamed"):
        fail(f"the withheld domain, the system-only one, an empty one read {(big, system, empty)!r}")
    print(f"ok {COUNT} relocatable objects, a domain over the budget, a system-only one and locked keys read right")
    middle = {domain: Gio.Settings.new_with_path(SCHEMA, path).get_string("name")
              for domain, path in EDGES.items() if domain not in ("0", "zz.zz")}  # the first and last: below
    between = Gio.Settings.new_with_path(SCHEMA, "/0/000/").get_string("name")  # "0.000": after "0.00", not in the store
    if middle != {domain: f"name-{domain}" for domain in middle} or between != "unnamed":
        fail(f"domains whose names are prefixes of one another read {middle!r}, and one not in the store {between!r}")
    # A domain made afterwards, and two of the current state, untouched: their events are kept
    # (the stream's events come in commit order, so they have come once p0's change has), and a
    # domain's values decoded only when it is touched never undo them.
    loop = GLib.MainLoop()
    objects[0].connect("changed::name", lambda _s, _k: loop.quit())
    subprocess.run([kvctl, "set", "io.kvd.first.later", "name", "made-later"], check=True)
    subprocess.run([kvctl, "set", "io.kvd.first.raw", "name", "raw-after"], check=True)
    subprocess.run([kvctl, "delete", "io.kvd.first.gone", "name"], check=True)
    subprocess.run([kvctl, "set", "0", "name", "first-after"], check=True)
    subprocess.run([kvctl, "set", "zz.zz", "name", "last-after"], check=True)
    subprocess.run([kvctl, "set", "io.kvd.first.p0", "name", "sentinel"], check=True)
    timeout = GLib.timeout_add_seconds(20, lambda: fail("timed out waiting for changed::name of p0"))
    loop.run()
    GLib.source_remove(timeout)
    later = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/later/").get_string("name")
    if later != "made-later":
        fail(f"a domain made after the stream began reads {later!r}")
    raw = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/raw/").get_string("name")
    gone = Gio.Settings.new_with_path(SCHEMA, "/io/kvd/first/gone/").get_string("name")
    if (raw, gone) != ("raw-after", "unnamed"):
        fail(f"untouched domains of the current state, changed after the start, read {(raw, gone)!r}, not ('raw-after', 'unnamed')")
    ends = [(settings.get_string("name"), settings.get_string("note"))
            for settings in (Gio.Settings.new_with_path(SCHEMA, EDGES[domain]) for domain in ("0", "zz.zz"))]
    if ends != [("first-after", "note-0"), ("last-after", "note-zz.zz")]:
        fail(f"the first and last domains of the start, changed before they were touched, read {ends!r}")
    print("ok a domain made after the stream began, and changes of untouched ones after it (the first and last in name order "
          "too), read right")


def count(trace, socket_path):
    """The connections to kvd's socket and the varlink calls sent (by method), from strace's log,
    but kvctl's (the test's own sets)."""
    connections, methods = 0, {}
    with open(trace) as lines:
        for line in lines:
            if line.split(" ", 1)[0].endswith("<kvctl>"):
                continue
            if re.search(r"connect\(\d+, \{sa_family=AF_UNIX, sun_path=\"" + re.escape(socket_path) + '"', line):
                connections += 1
            call = re.search(r'sendto\(\d+, "\{\\"method\\":\\"io\.kvd\.Defaults\.(\w+)', line)
            if call:
                methods[call.group(1)] = methods.get(call.group(1), 0) + 1
    return connections, methods


if len(sys.argv) > 2 and sys.argv[1] == "--read":
    read(sys.argv[2])
    sys.exit(0)
kvctl = sys.argv[1]
set_values(kvctl)
if shutil.which("strace") is None:
    print("test_first_read.py: strace missing: the values are checked, the requests not counted")
    read(kvctl)
    sys.exit(0)
with tempfile.TemporaryDirectory() as folder:
    trace = os.path.join(folder, "strace.log")
    subprocess.run(["strace", "-f", "-qq", "--decode-pids=comm", "-e", "trace=connect,sendto", "-s", "64", "-o", trace,
                    sys.executable, __file__, "--read", kvctl], check=True)
    connections, methods = count(trace, os.environ["KVD_SOCKET"])
requests = sum(methods.values())
if requests > MAX_REQUESTS or connections > MAX_CONNECTIONS or methods != {"WatchAll": 1, "Snapshot": 1}:
    fail(f"the first read of {COUNT} domains made {requests} requests ({methods}) and {connections} connections to kvd "
         f"(at most {MAX_REQUESTS} and {MAX_CONNECTIONS}: one WatchAll, one Snapshot of the domain over the budget)")
print(f"ok and the process made {requests} requests ({methods}) and {connections} connections to kvd "
      f"(at most {MAX_REQUESTS} and {MAX_CONNECTIONS})")
