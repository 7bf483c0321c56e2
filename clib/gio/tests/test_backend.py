#!/usr/bin/env python3
"""The kvd GSettings backend from a PyGObject program (run by clib/gio/tests/run.sh).

test_backend.py KVCTL       against a running kvd (KVD_SOCKET) with a system instance
test_backend.py --unreachable   with KVD_SOCKET pointing at nothing

Checks that the backend GLib chose is kvd's; that delay-apply (g_settings_apply) is one Apply,
one revision in kvd's history; that an own write is announced once; that a kvctl change and a
lock/unlock arrive as `changed` / `writable-changed` in the main thread; and, unreachable, that
reads give defaults, a write reads back until it fails, then is reverted with `changed`, and the
main loop keeps running.
"""
import json
import signal
import subprocess
import sys
import threading

from gi.repository import Gio, GLib

signal.alarm(60)  # a hang fails the test instead of stalling make test


def fail(message):
    print(f"test_backend.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def ok(message):
    print(f"ok {message}")


backend = Gio.SettingsBackend.get_default()
if type(backend).__gtype__.name != "KvdSettingsBackend":
    fail(f"GLib chose {type(backend).__gtype__.name}, not kvd's backend")
ok("GLib chose KvdSettingsBackend")
settings = Gio.Settings.new("io.kvd.test")
loop = GLib.MainLoop()
changed = []
writable = []


def on_changed(_settings, key):
    if threading.current_thread() is not threading.main_thread():
        fail(f"changed::{key} outside the main thread")
    changed.append(key)


def on_writable(_settings, key):
    writable.append(key)


settings.connect("changed", on_changed)
settings.connect("writable-changed", on_writable)


def wait_for(condition, what):
    """Runs the main loop until condition() holds (checked after each event)."""
    def poll():
        if condition():
            loop.quit()
            return False
        return True
    GLib.timeout_add(5, poll)
    timeout = GLib.timeout_add_seconds(20, lambda: fail(f"timed out waiting for {what}"))
    loop.run()
    GLib.source_remove(timeout)


if sys.argv[1] == "--unreachable":
    ticks = []
    GLib.timeout_add(10, lambda: ticks.append(1) or True)
    results = {}

    def work():
        results["read"] = settings.get_string("text")
        results["write"] = settings.set_string("text", "lost")
        results["after"] = settings.get_string("text")
        return False
    GLib.idle_add(work)
    # The write returns at once and reads back (unless it has failed already: connecting fails at
    # once); failed, it is reverted and announced.
    wait_for(lambda: "after" in results and len(ticks) >= 5 and changed.count("text") >= 2, "the main loop to go on")
    Gio.Settings.sync()
    if results["read"] != "hello" or not results["write"] or results["after"] not in ("lost", "hello") or \
            settings.get_string("text") != "hello":
        fail(f"unreachable: {results}, then {settings.get_string('text')}")
    ok("kvd unreachable: defaults, a write read back then reverted with changed, the main loop runs on")
    sys.exit(0)

kvctl = sys.argv[1]


def run(*arguments):
    return subprocess.run([kvctl, *arguments], check=True, capture_output=True, text=True).stdout


# An own write is announced once: after it, a kvctl change to another key is seen, and by then
# the watch event of the own write (which came first) has been handled.
settings.set_string("text", "own-write")
flag = settings.get_boolean("flag")
run("set", "io.kvd.test", "flag", "-bool", "false" if flag else "true")
wait_for(lambda: "flag" in changed, "changed::flag from kvctl")
if changed.count("text") != 1:
    fail(f"an own write was announced {changed.count('text')} times: {changed}")
if settings.get_boolean("flag") == flag:
    fail("the kvctl change is not in the cache")
ok("an own write announced once; a kvctl set seen as changed in the main thread")

# Delay-apply: three keys, one Apply (one revision in kvd's history), announced.
changed.clear()
settings.delay()
settings.set_value("int16", GLib.Variant("n", 11))
settings.set_value("uint16", GLib.Variant("q", 12))
settings.set_double("real", 13.5)
Gio.Settings.sync()  # the own write of text, acknowledged
if json.loads(run("--json", "get", "io.kvd.test", "text")) != "own-write":
    fail("the own write is not in kvd")
settings.apply()
Gio.Settings.sync()
history = json.loads(run("--json", "history", "io.kvd.test", "--limit", "3"))
revisions = {entry["revision"] for entry in history}
keys = {entry["key"] for entry in history}
if keys != {"int16", "uint16", "real"} or len(revisions) != 1:
    fail(f"delay-apply was not one Apply: {history}")
wait_for(lambda: {"int16", "uint16", "real"} <= set(changed), "changed for the applied keys")
if (settings.get_value("int16").unpack(), settings.get_value("uint16").unpack(), settings.get_double("real")) != (11, 12, 13.5):
    fail("the applied values do not read back")
ok("delay-apply is one Apply (revision %d)" % revisions.pop())

# A lock and an unlock on the system instance arrive as writable-changed.
run("--system", "set", "io.kvd.test", "uint32", "-int", "5")
run("--system", "lock", "io.kvd.test", "uint32")
wait_for(lambda: "uint32" in writable and not settings.is_writable("uint32"), "writable-changed on a lock")
if settings.get_uint("uint32") != 5:
    fail("the locked value does not show")
writable.clear()
run("--system", "unlock", "io.kvd.test", "uint32")
wait_for(lambda: "uint32" in writable and settings.is_writable("uint32"), "writable-changed on an unlock")
ok("a lock and an unlock are writable-changed")

# A lock without a value (the key has none anywhere) is writable-changed too.
writable.clear()
run("--system", "lock", "io.kvd.test", "int64")
wait_for(lambda: "int64" in writable and not settings.is_writable("int64"), "writable-changed on a lock without a value")
writable.clear()
run("--system", "unlock", "io.kvd.test", "int64")
wait_for(lambda: "int64" in writable and settings.is_writable("int64"), "writable-changed on its unlock")
ok("a lock and an unlock of a key without a value are writable-changed")
