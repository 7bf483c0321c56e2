#!/usr/bin/env python3
"""The kvd GSettings backend's writes, from a PyGObject program (run by clib/gio/tests/run.sh).

test_writes.py KVCTL KVD_PID    against a running kvd (KVD_SOCKET, pid KVD_PID) with a system instance

Checks that a write never waits for kvd and reads back at once (kvd stopped with SIGSTOP: sets,
a reset and a delayed apply return and read back; g_settings_sync returns only after SIGCONT,
and then kvd has them); that 10,000 set_int then one sync read back right, are in kvd, and were
merged (far fewer commits than writes); that a write kvd refuses (a 17 MiB string) returns,
reads back, then is reverted to kvd's value with a `changed`, and a write queued with it lands;
that 200 writes of 1 MiB to one key with kvd stopped hold one value; that a write queued before
its key is locked is refused by kvd and reverted with `changed`; that a write of a key known
locked returns FALSE at once; that a child of fork() writes and syncs. run.sh then kills kvd
with SIGKILL and checks that the synced values survived.
"""
import json
import os
import signal
import subprocess
import sys
import threading

from gi.repository import Gio, GLib

signal.alarm(120)  # a hang fails the test instead of stalling make test


def fail(message):
    print(f"test_writes.py: FAIL: {message}", file=sys.stderr)
    os.kill(kvd_pid, signal.SIGCONT)
    sys.exit(1)


def ok(message):
    print(f"ok {message}", flush=True)


kvctl, kvd_pid = sys.argv[1], int(sys.argv[2])
backend = Gio.SettingsBackend.get_default()
if type(backend).__gtype__.name != "KvdSettingsBackend":
    fail(f"GLib chose {type(backend).__gtype__.name}, not kvd's backend")
settings = Gio.Settings.new("io.kvd.test")
loop = GLib.MainLoop()
changed = []  # (key, the value read in the handler, abridged)
writable = []


def on_changed(_settings, key):
    value = settings.get_value(key)
    changed.append((key, value.get_string()[:32] if value.get_type_string() == "s" else value.unpack()))


settings.connect("changed", on_changed)
settings.connect("writable-changed", lambda _settings, key: writable.append(key))


def wait_for(condition, what):
    """Runs the main loop until condition() holds (checked every 5 ms)."""
    def poll():
        if condition():
            loop.quit()
            return False
        return True
    GLib.timeout_add(5, poll)
    timeout = GLib.timeout_add_seconds(30, lambda: fail(f"timed out waiting for {what}; changed: {changed[-6:]}"))
    loop.run()
    GLib.source_remove(timeout)


def kvd(*arguments, check=True):
    done = subprocess.run([kvctl, *arguments], capture_output=True, text=True)
    if check and done.returncode != 0:
        fail(f"kvctl {' '.join(arguments)}: {done.stderr.strip()}")
    return done.stdout.strip() if done.returncode == 0 else None


# Known values first (and every domain watched, so that no write below has to make a watch).
settings.set_string("text", "before-stop")
settings.set_value("int16", GLib.Variant("n", 5))
settings.set_value("uint16", GLib.Variant("q", 1))
settings.set_double("real", 1.5)
Gio.Settings.sync()
if kvd("get", "io.kvd.test", "int16") != "5":
    fail("the writes before the sync are not in kvd")

# kvd stopped: every write returns at once and reads back at once; sync waits for kvd.
os.kill(kvd_pid, signal.SIGSTOP)
if not settings.set_string("text", "while-stopped"):
    fail("a set returned FALSE with kvd stopped")
settings.reset("int16")
delayed = Gio.Settings.new("io.kvd.test")  # delay mode is for good: an object of its own
delayed.delay()
delayed.set_value("uint16", GLib.Variant("q", 77))
delayed.set_double("real", 2.5)
delayed.apply()
read = (settings.get_string("text"), settings.get_value("int16").unpack(), settings.get_value("uint16").unpack(),
        settings.get_double("real"))
if read != ("while-stopped", -3, 77, 2.5):
    fail(f"with kvd stopped, the writes do not read back: {read}")
ok("with kvd stopped: a set, a reset and a delayed apply return and read back at once")
continued = threading.Event()


def resume():
    continued.set()
    os.kill(kvd_pid, signal.SIGCONT)


threading.Timer(1.0, resume).start()
Gio.Settings.sync()
if not continued.is_set():
    fail("g_settings_sync returned while kvd was stopped")
stored = (kvd("get", "io.kvd.test", "text"), kvd("get", "io.kvd.test", "int16", check=False), kvd("get", "io.kvd.test", "uint16"),
          kvd("get", "io.kvd.test", "real"))
if stored != ("while-stopped", None, "77", "2.5"):
    fail(f"after the sync, kvd holds {stored}")
ok("g_settings_sync returned only once kvd went on, and kvd had every write")

# 10,000 set_int, one sync: read back right at once and after, in kvd, merged into few commits.
for i in range(10_000):
    if not settings.set_int("int32", 100_000 + i):
        fail(f"set_int {i} returned FALSE")
    if i % 1000 == 0 and settings.get_int("int32") != 100_000 + i:
        fail(f"set_int {i} does not read back at once")
Gio.Settings.sync()
if settings.get_int("int32") != 109_999 or kvd("get", "io.kvd.test", "int32") != "109999":
    fail(f"after 10,000 set_int and a sync: {settings.get_int('int32')} here, {kvd('get', 'io.kvd.test', 'int32')} in kvd")
history = json.loads(kvd("--json", "history", "io.kvd.test", "int32", "--limit", "20000"))
burst = [entry for entry in history if isinstance(entry.get("value"), int) and 100_000 <= entry["value"] < 110_000]
if not burst or len(burst) > 1000:
    fail(f"10,000 set_int were {len(burst)} commits (merged, they are a few)")
ok(f"10,000 set_int then one sync: read back, in kvd, {len(burst)} commits")

# A write kvd refuses (17 MiB, over its message limit): it returns TRUE and reads back, then is
# reverted to what kvd holds, announced by `changed` (run.sh checks the warning). It is queued
# with a write of another key, the two refused as one Apply: the other is sent again alone.
settings.set_string("text", "before-big")
settings.set_boolean("flag", False)
Gio.Settings.sync()
wait_for(lambda: ("text", "before-big") in changed, "changed for before-big")
changed.clear()
big = "x" * (17 * 1024 * 1024)
# kvd stopped while a write is in flight: the big one waits in the queue behind it, so that it
# is surely not yet refused when read back (libkvd refuses it without sending it).
os.kill(kvd_pid, signal.SIGSTOP)
settings.set_value("uint16", GLib.Variant("q", 78))
if not settings.set_string("text", big):
    fail("a set of 17 MiB returned FALSE (the refusal is kvd's, later)")
settings.set_boolean("flag", True)
if len(settings.get_string("text")) != len(big):
    fail("the 17 MiB write does not read back at once")
os.kill(kvd_pid, signal.SIGCONT)
wait_for(lambda: ("text", "before-big") in changed, "changed for the reverted write")
Gio.Settings.sync()
if settings.get_string("text") != "before-big" or kvd("get", "io.kvd.test", "text") != "before-big":
    fail(f"the refused write was not reverted: {settings.get_string('text')[:20]}")
if not settings.get_boolean("flag") or kvd("get", "io.kvd.test", "flag") != "true":
    fail("the write queued with the refused one failed with it")
texts = [entry for entry in changed if entry[0] == "text"]
if texts != [("text", "x" * 32), ("text", "before-big")]:
    fail(f"the write was not announced, then its revert: {changed}")
ok("a write kvd refused: returned TRUE, read back, then reverted with changed; the one queued with it landed")

# Bounded: 200 writes of 1 MiB to one key while kvd is stopped hold one queued value, not 200.
def rss_mib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


os.kill(kvd_pid, signal.SIGSTOP)
settings.set_value("uint16", GLib.Variant("q", 79))  # in flight, waiting for kvd
before = rss_mib()
for i in range(200):
    settings.set_string("text", f"{i:04d}" + "m" * (1024 * 1024))
grown = rss_mib() - before
os.kill(kvd_pid, signal.SIGCONT)
Gio.Settings.sync()
if grown > 64 or kvd("get", "io.kvd.test", "text")[:4] != "0199":
    fail(f"200 writes of 1 MiB while kvd was stopped: the process grew by {grown:.0f} MiB, kvd has {kvd('get', 'io.kvd.test', 'text')[:4]}")
ok(f"200 writes of 1 MiB with kvd stopped: one value queued (the process grew by {grown:.0f} MiB), the last one in kvd")

# A key known locked: the write returns FALSE at once, nothing changes or is announced.
kvd("--system", "lock", "io.kvd.test", "int64")
wait_for(lambda: "int64" in writable, "writable-changed on a lock")
before = settings.get_int64("int64")  # locked without a value: the schema default
changed.clear()
if settings.set_int64("int64", before + 1):
    fail("a write of a key known locked returned TRUE")
Gio.Settings.sync()
after = settings.get_int64("int64")
kvd("--system", "unlock", "io.kvd.test", "int64")
if changed or after != before:
    fail(f"a refused write of a locked key changed something: {changed}, {after}")
ok("a write of a key known locked returns FALSE at once")

# A key locked while its write waits in the queue (kvd stopped; the system instance locks it, kvd
# follows once it goes on, before the queued Apply arrives): kvd refuses it, the app's value goes
# back, announced, quietly (run.sh checks that no warning names int64). Should the write land
# first after all, the user's value shows it after the unlock, and the round is run again.
def locked_while_queued(attempt):
    wait_for(lambda: settings.is_writable("int64"), "int64 writable again after its unlock")
    if not settings.set_int64("int64", 11):
        fail("int64, unlocked, is not writable")
    Gio.Settings.sync()
    changed.clear()
    os.kill(kvd_pid, signal.SIGSTOP)
    settings.set_value("uint16", GLib.Variant("q", 80 + attempt))  # in flight
    if not settings.set_int64("int64", 12):  # queued behind it
        fail("int64 was locked too soon")
    kvd("--system", "lock", "io.kvd.test", "int64")
    os.kill(kvd_pid, signal.SIGCONT)
    Gio.Settings.sync()
    wait_for(lambda: [key for key, _ in changed].count("int64") >= 2 and settings.get_int64("int64") == -42,
             f"the write of a key locked meanwhile reverted, with changed (attempt {attempt})")
    kvd("--system", "unlock", "io.kvd.test", "int64")
    wait_for(lambda: kvd("get", "io.kvd.test", "int64", check=False) in ("11", "12"), "the user's value after the unlock")
    return kvd("get", "io.kvd.test", "int64") == "11"


refused_at = next((attempt for attempt in range(5) if locked_while_queued(attempt)), None)
if refused_at is None:
    fail("a write queued before its key was locked always landed: the lock never came first")
ok(f"a write of a key locked while it was queued: refused by kvd, reverted with changed (round {refused_at + 1})")

# fork(): the child's writes go through a writer of its own (the parent's thread is not in it).
settings.set_string("text", "before-fork")
Gio.Settings.sync()
child = os.fork()
if child == 0:
    signal.alarm(20)  # a child whose sync hangs is killed, and fails below
    settings.set_string("text", "from-child")
    Gio.Settings.sync()
    os._exit(0 if kvd("get", "io.kvd.test", "text") == "from-child" else 3)
_, status = os.waitpid(child, 0)
if status != 0:
    fail(f"a child of fork() could not write (wait status {status}: 14 is a hung sync)")
wait_for(lambda: settings.get_string("text") == "from-child", "the child's write seen by the parent")
settings.set_string("text", "after-fork")
Gio.Settings.sync()
if kvd("get", "io.kvd.test", "text") != "after-fork":
    fail("after a fork, the parent's write is not in kvd")
ok("fork(): the child writes and syncs on its own, the parent goes on")
