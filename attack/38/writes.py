#!/usr/bin/env python3
"""attack/38/writes.py SCENARIO KVCTL KVD_PID — one attack on the GSettings backend's asynchronous
writes, against a running kvd (KVD_SOCKET). Prints DEFECT/OK; exit 1 on a defect. Run by
writes.sh, which starts kvd and passes the backend in GSETTINGS_BACKEND."""
import os
import signal
import subprocess
import sys
import time

from gi.repository import Gio, GLib

signal.alarm(150)
scenario, kvctl, kvd_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
loop = GLib.MainLoop()


def kvd(*arguments):
    done = subprocess.run([kvctl, *arguments], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def spin(seconds):
    GLib.timeout_add(int(seconds * 1000), loop.quit)
    loop.run()


def verdict(good, message):
    print(("OK (no defect): " if good else "DEFECT: ") + message, flush=True)
    sys.exit(0 if good else 1)


def changed_once():
    """Each set of a new value: exactly one `changed` on the object, one on a second object."""
    a, b = Gio.Settings.new("io.kvd.test"), Gio.Settings.new("io.kvd.test")
    a.set_int("int32", 1)
    Gio.Settings.sync()
    spin(0.5)
    counts = {"a": 0, "b": 0}
    a.connect("changed::int32", lambda *_: counts.__setitem__("a", counts["a"] + 1))
    b.connect("changed::int32", lambda *_: counts.__setitem__("b", counts["b"] + 1))
    for value in range(2, 12):
        a.set_int("int32", value)
        spin(0.05)
    Gio.Settings.sync()
    spin(1.0)
    verdict(counts == {"a": 10, "b": 10}, f"10 sets of new values gave `changed` {counts} (expected 10 each)")


def other_object_reads():
    a, b = Gio.Settings.new("io.kvd.test"), Gio.Settings.new("io.kvd.test")
    b.get_int("int32")
    os.kill(kvd_pid, signal.SIGSTOP)
    try:
        a.set_int("int32", 1234)
        got = b.get_int("int32")
    finally:
        os.kill(kvd_pid, signal.SIGCONT)
    Gio.Settings.sync()
    verdict(got == 1234, f"a write read at once from another object of the process: {got}")


def exit_without_sync():
    """Writes, then exits at once (no sync, no GApplication): is the write in kvd?"""
    child = os.fork()
    if child == 0:
        s = Gio.Settings.new("io.kvd.test")
        s.set_string("text", "written-before-exit")
        os._exit(0)
    os.waitpid(child, 0)
    time.sleep(1)
    got = kvd("get", "io.kvd.test", "text")
    backend = os.environ.get("GSETTINGS_BACKEND")
    if backend == "dconf":
        got = subprocess.run(["dconf", "read", "/io/kvd/test/text"], capture_output=True, text=True).stdout.strip()
    verdict(got in ("written-before-exit", "'written-before-exit'"), f"[{backend}] a write then exit without sync: the store holds {got!r}")


def many_objects():
    """1,500 GSettings objects (relocatable, one domain each) written from the main loop."""
    objects = [Gio.Settings.new_with_path("io.kvd.test.profile", f"/io/kvd/many/p{i}/") for i in range(1500)]
    for i, s in enumerate(objects):
        s.set_string("name", f"v{i}")
    Gio.Settings.sync()
    spin(1)
    missing = [i for i in (0, 499, 1023, 1499) if kvd("get", f"io.kvd.many.p{i}", "name") != f"v{i}"]
    reads = sum(1 for i, s in enumerate(objects) if s.get_string("name") != f"v{i}")
    verdict(not missing and reads == 0, f"1,500 objects: missing in kvd {missing}, {reads} read back wrong")


def restart():
    """A write after kvd restarted (the writer's connection is to the old kvd)."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_string("text", "first")
    Gio.Settings.sync()
    subprocess.run(["sh", "-c", os.environ["RESTART_KVD"]], check=True)
    s.set_string("text", "after-restart")
    Gio.Settings.sync()
    spin(0.5)
    verdict(kvd("get", "io.kvd.test", "text") == "after-restart" and s.get_string("text") == "after-restart",
            f"a write after a kvd restart: kvd holds {kvd('get', 'io.kvd.test', 'text')!r}, the app reads {s.get_string('text')!r}")


def full_disk():
    """kvd's state on a full disk: a write the module acknowledged and kvd refuses is reverted."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_string("text", "small")
    Gio.Settings.sync()
    reverted = []
    s.connect("changed::text", lambda *_: reverted.append(s.get_string("text")[:10]))
    s.set_string("text", "y" * (3 << 20))  # the state tmpfs has less room
    Gio.Settings.sync()
    spin(1)
    stored = kvd("get", "io.kvd.test", "text")
    here = s.get_string("text")
    verdict(here == stored, f"full disk: kvd holds {stored[:10] if stored else stored!r}, the app reads {here[:10]!r}; changed: {reverted}")


def stopped_past_timeout():
    """kvd stopped longer than the write timeout: sync returns; then kvd goes on."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_string("text", "before")
    Gio.Settings.sync()
    os.kill(kvd_pid, signal.SIGSTOP)
    s.set_string("text", "during-stop")
    start = time.monotonic()
    GLib.timeout_add_seconds(40, lambda: os.kill(kvd_pid, signal.SIGCONT) and False)
    Gio.Settings.sync()
    waited = time.monotonic() - start
    os.kill(kvd_pid, signal.SIGCONT)
    spin(2)
    stored, here = kvd("get", "io.kvd.test", "text"), s.get_string("text")
    verdict(stored == here, f"kvd stopped 40 s: sync returned after {waited:.0f} s; kvd holds {stored!r}, the app reads {here!r}")


def fork_queued():
    """fork() with writes queued (kvd stopped): the child exits; the parent's writes still land once."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_int("int32", 1)
    Gio.Settings.sync()
    os.kill(kvd_pid, signal.SIGSTOP)
    s.set_int("int32", 555)
    child = os.fork()
    if child == 0:
        here = s.get_int("int32")
        os._exit(0 if here == 555 else 100 + here)
    os.kill(kvd_pid, signal.SIGCONT)
    _, status = os.waitpid(child, 0)
    Gio.Settings.sync()
    verdict(status == 0 and kvd("get", "io.kvd.test", "int32") == "555",
            f"fork with a queued write: the child read {'its parent’s value' if status == 0 else '%d' % (os.waitstatus_to_exitcode(status) - 100)} (its parent wrote 555 before the fork), kvd holds {kvd('get', 'io.kvd.test', 'int32')}")


def no_flicker():
    """Writes of 1..300 with the main loop running between them: what any object reads in its
    `changed` handlers only goes forward (an older value settling must not show again)."""
    a, b = Gio.Settings.new("io.kvd.test"), Gio.Settings.new("io.kvd.test")
    a.set_int("int32", 0)
    Gio.Settings.sync()
    spin(0.3)
    seen = {"a": [], "b": []}
    a.connect("changed::int32", lambda *_: seen["a"].append(a.get_int("int32")))
    b.connect("changed::int32", lambda *_: seen["b"].append(b.get_int("int32")))
    ctx = GLib.MainContext.default()
    for value in range(1, 301):
        a.set_int("int32", value)
        for _ in range(20):
            ctx.iteration(False)
        time.sleep(0.001)
    Gio.Settings.sync()
    spin(1)
    back = {k: [(x, y) for x, y in zip(v, v[1:]) if y < x][:3] for k, v in seen.items()}
    verdict(not back["a"] and not back["b"] and a.get_int("int32") == 300,
            f"values going back in `changed` handlers: {back}; counts a={len(seen['a'])} b={len(seen['b'])}; final {a.get_int('int32')}")


def sync_per_domain_timeout():
    """kvd stopped (not dead): writes to 4 domains, then g_settings_sync, as an app's exit does.
    Each domain waits its own 25 s in turn: the app hangs 4 x 25 s (1,500 domains: 10 hours)."""
    objects = [Gio.Settings.new_with_path("io.kvd.test.profile", f"/io/kvd/dom/p{i}/") for i in range(4)]
    for s in objects:
        s.set_string("name", "x")
    Gio.Settings.sync()
    os.kill(kvd_pid, signal.SIGSTOP)
    for i, s in enumerate(objects):
        s.set_string("name", f"while-stopped-{i}")
    start = time.monotonic()
    Gio.Settings.sync()
    waited = time.monotonic() - start
    os.kill(kvd_pid, signal.SIGCONT)
    verdict(waited < 60, f"kvd stopped, writes to 4 domains: g_settings_sync took {waited:.0f} s (one write timeout is 25 s)")


def writable_changed():
    """A lock then an unlock by the admin: `writable-changed` once each, writable false then true."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_int("int64", 5)
    Gio.Settings.sync()
    spin(0.3)
    events = []
    s.connect("writable-changed::int64", lambda *_: events.append(s.is_writable("int64")))
    subprocess.run([kvctl, "--system", "lock", "io.kvd.test", "int64"], check=True, capture_output=True)
    spin(1.5)
    subprocess.run([kvctl, "--system", "unlock", "io.kvd.test", "int64"], check=True, capture_output=True)
    spin(1.5)
    verdict(events == [False, True], f"lock then unlock: writable-changed gave is_writable {events} (expected [False, True])")


def crash_in_flight():
    """kvd killed (-9) with a write sent but unanswered, then started again (as socket activation
    does): afterwards the app and kvd agree, and a change by another process reaches the app."""
    s = Gio.Settings.new("io.kvd.test")
    s.set_string("text", "before")
    Gio.Settings.sync()
    spin(0.3)
    os.kill(kvd_pid, signal.SIGSTOP)
    s.set_string("text", "in-flight")
    time.sleep(0.5)
    subprocess.run(["sh", "-c", os.environ["CRASH_RESTART_KVD"]], check=True)
    Gio.Settings.sync()
    spin(2)
    stored, here = kvd("get", "io.kvd.test", "text"), s.get_string("text")
    subprocess.run([kvctl, "set", "io.kvd.test", "text", "from-kvctl"], check=True, capture_output=True)
    spin(3)
    later = s.get_string("text")
    verdict(stored == here and later == "from-kvctl",
            f"after a crash with a write in flight: kvd {stored!r}, app {here!r}; a kvctl set afterwards: app reads {later!r}")


globals()[scenario]()
