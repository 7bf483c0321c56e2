#!/usr/bin/env python3
"""make bench: kvd beside Redis, SQLite, Foundation's UserDefaults and dconf, in one run on one machine.

Starts every server it measures itself (kvd, Redis on a Unix socket only, the raw ping-pong
server) in a temporary folder on disk, drives them with the same load generator (kvbench:
varlink to kvd, RESP to Redis), runs the in-process rows with kvbench-local, and writes
bench/results.json, bench/results.md and bench/results.svg. Every child is bounded in time and
stopped at the end, whatever happens. A peer that cannot be had is skipped with a note.

    bench/run.py --bin .build/release [--gio-modules .build/clib/gio] [--quick] [--out bench] [--no-install]
                 [--only history,blame,cold,shared,dropins,gsettings,gsettings-start,scaling,tail,fold,memory]

--quick (BENCH_QUICK=1) is the smoke mode: tiny durations, one run, never installs anything.
"""
import argparse
import contextlib
import json
import grp
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import chart
from blame import BlameRows
from fleet import FleetRows
from dropins import DropInRow
from flood import FloodRow
from fold import FoldRow
from gsettings import GSettingsRows
from scaling import ScalingRows
from tail import TailRows

CHILD_TIMEOUT = 120  # seconds any one measuring program may take
ACTIVATE = 'export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" "$@" {redirect}'


class Bench:
    def __init__(self, args):
        self.bin = os.path.abspath(args.bin)
        self.gio_modules = args.gio_modules  # the folder of libgiokvd.so (the GSettings rows)
        self.quick = args.quick
        self.install = not args.no_install and not args.quick
        self.seconds = 0.2 if self.quick else args.seconds
        self.runs = 1 if self.quick else args.runs
        self.only = set(filter(None, (args.only or "").split(",")))
        self.out = args.out or (os.path.join(os.path.dirname(__file__), "..", ".build", "bench-smoke") if self.quick
                                else os.path.dirname(os.path.abspath(__file__)))
        # BENCH_SKIP=redis,sqlite: behave as if those peers were missing (to check the skips).
        self.skipped = set(filter(None, os.environ.get("BENCH_SKIP", "").split(",")))
        # On disk, not tmpfs: fsync and /proc/PID/io must mean what they say.
        base = os.path.abspath(args.tmp or os.path.join(os.path.dirname(__file__), "..", ".build"))
        os.makedirs(base, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix="bench.", dir=base)
        self.children = []
        # Servers on CPU 0, clients on CPU 1: a round trip always wakes the other core, whatever
        # the scheduler would have chosen (which otherwise swings 1-client rows by 3x run to run).
        pin = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
        cpus = sorted(os.sched_getaffinity(0))
        self.server_cpus = {cpus[0]} if pin else None
        self.client_cpus = {cpus[1]} if pin else None
        self.rows = []       # one per measured subject of a row
        self.targets = []    # one per target
        self.scaling = []    # one per (op, client count): kvd and Redis side by side (bench/scaling.py)
        self.tail = []       # one per (generator mode, client count): durable Set p99, kvd and Redis (bench/tail.py)
        self.notes = []
        self.env = dict(os.environ, KVD_NO_AUTOSTART="1", HOME=os.path.join(self.dir, "home"),
                        XDG_CONFIG_HOME=os.path.join(self.dir, "home", ".config"))
        os.makedirs(self.env["XDG_CONFIG_HOME"], exist_ok=True)

    # ---- processes -------------------------------------------------------------------

    def path(self, name):
        return os.path.join(self.dir, name)

    def tool(self, name):
        return os.path.join(self.bin, name)

    def start(self, argv, sock, name, **kwargs):
        """Starts a server and waits (at most 10 s) until `sock` accepts connections."""
        log = open(self.path(name + ".log"), "wb")
        env = kwargs.pop("env", self.env)
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=self.pinned(self.server_cpus), **kwargs)
        self.children.append(proc)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited at start (see {self.path(name + '.log')})")
            try:
                with socket.socket(socket.AF_UNIX) as probe:
                    probe.connect(sock)
                return proc
            except OSError:
                time.sleep(0.01)
        raise RuntimeError(f"{name} did not listen on {sock} within 10 s")

    @staticmethod
    def pinned(cpus):
        """A preexec_fn that binds the child (and every thread it starts) to `cpus`."""
        if cpus is None:
            return None
        return lambda: os.sched_setaffinity(0, cpus)

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.children:
            self.children.remove(proc)

    def stop_all(self):
        for proc in list(self.children):
            self.stop(proc)

    def run_json(self, argv, timeout=CHILD_TIMEOUT):
        """Runs a measuring program; returns the JSON objects it printed, one a line."""
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env,
                              preexec_fn=self.pinned(self.client_cpus))
        if done.returncode != 0:
            raise RuntimeError(f"{os.path.basename(argv[0])} failed: {(done.stdout + done.stderr).strip()[:400]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    # ---- measuring -------------------------------------------------------------------

    def summarize(self, row, subject, runs, **extra):
        """Median of the runs with the spread; appends it to the rows."""
        rates = [r["ops_per_s"] for r in runs]
        cpu = [r["client_cpu_s"] / max(r["ops"], 1) * 1e6 for r in runs if "client_cpu_s" in r]
        entry = {
            "row": row, "subject": subject, "runs": len(runs),
            "ops_per_s": statistics.median(rates), "ops_per_s_min": min(rates), "ops_per_s_max": max(rates),
            "p50_us": statistics.median(r["p50_us"] for r in runs),
            "p99_us": statistics.median(r["p99_us"] for r in runs),
        }
        if all("max_us" in r for r in runs):
            entry["max_us"] = max(r["max_us"] for r in runs)  # the largest of every run, not a median
        if cpu:
            entry["loadgen_cpu_us_per_op"] = statistics.median(cpu)
        entry.update(extra)
        self.rows.append(entry)
        print(f"  {row:<22} {subject:<28} {entry['ops_per_s']:>10.0f} ops/s "
              f"[{entry['ops_per_s_min']:.0f}–{entry['ops_per_s_max']:.0f}]  "
              f"p50 {entry['p50_us']:.1f} µs  p99 {entry['p99_us']:.1f} µs", flush=True)
        return entry

    def kvbench(self, sock, proto, op, clients, domain="bench.kvd", io_pid=None, mode="epoll"):
        """A subject measured by kvbench: a function that makes one run. `mode`: how kvbench
        drives many clients, "epoll" (one thread) or "threads" (a blocking thread each)."""
        argv = [self.tool("kvbench"), "--socket", sock, "--proto", proto, "--op", op, "--clients", str(clients),
                "--mode", mode, "--seconds", str(self.seconds), "--runs", "1", "--domain", domain, "--json"]
        return lambda: self.run_json(argv)[0], io_pid

    def local(self, mode, *args):
        """A subject measured in process by kvbench-local."""
        argv = [self.tool("kvbench-local"), mode, "--seconds", str(self.seconds), "--runs", "1"] + list(args)
        return lambda: self.run_json(argv)[0], None

    def interleave(self, row, subjects):
        """Measures the subjects of a row run by run in turn (kvd, peer, kvd, peer, ...), so that
        whatever else the machine does falls on each alike. Returns their summaries."""
        runs = {name: [] for name, _ in subjects}
        written = {name: 0 for name, _ in subjects}
        for _ in range(self.runs):
            for name, (measure, io_pid) in subjects:
                before = read_io(io_pid)
                result = measure()
                if before is not None:
                    written[name] += read_io(io_pid) - before
                runs[name].append(result)
        summaries = []
        for name, (_, io_pid) in subjects:
            extra = {}
            if io_pid is not None:
                extra["write_bytes_per_op"] = written[name] / max(sum(r["ops"] for r in runs[name]), 1)
            summaries.append(self.summarize(row, name, runs[name], **extra))
        return summaries

    def populate(self, sock, proto, keys, domain, domains=1):
        self.run_json([self.tool("kvbench"), "--socket", sock, "--proto", proto, "--op", "populate",
                       "--keys", str(keys), "--domain", domain, "--domains", str(domains), "--json"], timeout=300)

    def target(self, row, measure, ratio, goal, op, note=""):
        met = None if ratio is None or goal is None or row == "raw limit" else (ratio >= goal if op == ">=" else ratio <= goal)
        self.targets.append({"row": row, "measure": measure, "ratio": ratio, "target": "reported" if goal is None else f"{op} {goal}",
                             "met": met, "note": note})

    def skip(self, what, why):
        note = f"{what}: skipped — {why}"
        self.notes.append(note)
        print("  " + note, flush=True)

    # ---- peers -----------------------------------------------------------------------

    def ensure_packages(self):
        missing = [p for p, cmd in (("redis-server", "redis-server"), ("redis-tools", "redis-cli"), ("sqlite3", "sqlite3"))
                   if not shutil.which(cmd)]
        if not os.path.exists("/usr/include/sqlite3.h"):
            missing.append("libsqlite3-dev")
        if not missing:
            return
        if not self.install:
            print(f"not installing {' '.join(missing)} (smoke mode or --no-install)")
            return
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        print(f"installing {' '.join(missing)}", flush=True)
        try:
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + missing, env=env, timeout=300,
                           stdout=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            print(f"could not install: {error}")

    def start_redis(self, name, durable=True):
        if not shutil.which("redis-server") or "redis" in self.skipped:
            return None
        data = self.path(name)
        os.makedirs(data, exist_ok=True)
        sock = self.path(name + ".sock")
        conf = self.path(name + ".conf")
        with open(conf, "w") as f:
            f.write(f"port 0\nunixsocket {sock}\nunixsocketperm 700\ndir {data}\nsave \"\"\n"
                    f"appendonly {'yes' if durable else 'no'}\nappendfsync always\ndaemonize no\n")
        proc = self.start(["redis-server", conf], sock, name)
        return proc, sock

    def start_kvd(self, name, system_socket=None):
        """A user's kvd; with `system_socket`, following that system instance, else with no
        system layer at all."""
        sock = self.path(name + ".sock")
        layer = ["--system-socket", system_socket] if system_socket else ["--no-system-layer"]
        proc = self.start([self.tool("kvd"), "--socket", sock, "--state-dir", self.path(name + "-state"),
                           "--idle-exit", "0"] + layer, sock, name)
        return proc, sock

    def start_system_layer(self, domain, keys):
        """A system instance holding `keys` keys of `domain` (p0, p1, ...) with p0 locked, and a
        user's kvd following it. Returns the user's kvd's socket. The bench's own user may
        write to the system instance (its primary group is the admin group)."""
        folder = self.path("system-run")
        os.makedirs(folder, mode=0o755, exist_ok=True)
        sys_sock = os.path.join(folder, "system.sock")
        admins = grp.getgrgid(os.getgid()).gr_name
        self.start([self.tool("kvd"), "--system", "--socket", sys_sock, "--state-dir", self.path("system-state"),
                    "--admin-group", admins], sys_sock, "kvd-system")
        self.populate(sys_sock, "varlink", keys, domain)
        subprocess.run([self.tool("kvctl"), "--system", "--socket", sys_sock, "lock", domain, "p0"], check=True, timeout=30)
        _, sock = self.start_kvd("kvd-layered", system_socket=sys_sock)
        return sock

    # ---- the rows --------------------------------------------------------------------

    def run_only(self):
        """--only: the rows named, printed, nothing installed and no results files written."""
        if "history" in self.only:
            _, kvd_sock = self.start_kvd("kvd")
            self.history_rows(kvd_sock)
            self.stop_all()
        if "blame" in self.only:
            print("blame: writers recorded or not", flush=True)
            BlameRows(self).run()
            self.stop_all()
        if "cold" in self.only:
            print("cold start", flush=True)
            self.cold_start_row()
        if "shared" in self.only:
            print("shared machine", flush=True)
            FloodRow(self).run()
        if "dropins" in self.only:
            print("drop-in reload", flush=True)
            DropInRow(self).run()
        if "scaling" in self.only:
            print("scaling", flush=True)
            _, kvd_sock = self.start_kvd("kvd")
            redis = self.start_redis("redis")
            ScalingRows(self).run(kvd_sock, {}, redis[1] if redis else None)
            self.stop_all()
        if "tail" in self.only:
            print("tail: durable Set p99, both generator modes", flush=True)
            _, kvd_sock = self.start_kvd("kvd")
            redis = self.start_redis("redis")
            if redis is None:
                self.skip("Redis tail rows", "redis-server is not installed or BENCH_SKIP has redis")
            TailRows(self).run(kvd_sock, {}, redis[1] if redis else None)
            self.stop_all()
        if "fold" in self.only:
            print("fold under load", flush=True)
            FoldRow(self).run()
            self.stop_all()
        if "memory" in self.only:
            print("memory", flush=True)
            self.memory_row()
        if "gsettings-start" in self.only:
            print("GSettings first reads, kvd's backend and dconf's", flush=True)
            _, kvd_sock = self.start_kvd("kvd")
            GSettingsRows(self, kvd_sock, self.gio_modules).run_start_rows()
            self.stop_all()
        if "gsettings" in self.only:
            print("GSettings, kvd's backend and dconf's", flush=True)
            _, kvd_sock = self.start_kvd("kvd")
            GSettingsRows(self, kvd_sock, self.gio_modules).run()
            self.stop_all()
        for t in self.targets:
            ratio = "n/a" if t["ratio"] is None else f"{t['ratio']:.2f}"
            print(f"  target {t['row']}: {t['measure']} = {ratio} (target {t['target']})", flush=True)

    def run(self):
        if self.only:
            return self.run_only()
        self.ensure_packages()
        self.machine = machine()
        kvd, kvd_sock = self.start_kvd("kvd")
        gsettings_rows = GSettingsRows(self, kvd_sock, self.gio_modules)
        gsettings_rows.ensure_packages()
        redis = self.start_redis("redis")
        if redis is None:
            self.skip("Redis rows", "redis-server is not installed or BENCH_SKIP has redis (make bench installs it; smoke mode does not)")
        echo_sock = self.path("echo.sock")
        self.start([self.tool("kvbench"), "--serve-echo", echo_sock], echo_sock, "echo")

        print("raw limit, get, set", flush=True)
        redis_sock = redis[1] if redis else None
        measured_rows = {}  # (op, clients) -> (kvd, Redis): the scaling rows reuse them
        for clients in (1, 50):
            row = f"get, {clients} client{'s' if clients > 1 else ''}"
            subjects = [("kvd Get", self.kvbench(kvd_sock, "varlink", "get", clients))]
            # The raw ping-pong: with 1 client the physical limit; with 50, the ceiling of the
            # load generator itself (an echo costs the server next to nothing).
            subjects.append(("raw Unix socket ping-pong", self.kvbench(echo_sock, "echo", "ping", clients)))
            if redis:
                subjects.append(("Redis GET", self.kvbench(redis_sock, "resp", "get", clients)))
            measured = self.interleave(row, subjects)
            measured_rows[("get", clients)] = (measured[0], measured[-1] if redis else None)
            # 50 clients: 1.1, so that the lead holds through this machine's noise
            self.compare(row, "throughput kvd/Redis", measured[0], measured[-1] if redis else None, ">=",
                         1.1 if clients > 1 else 1.0)
            if clients == 1:
                self.target("raw limit", "kvd Get as share of the raw round trip",
                            measured[0]["ops_per_s"] / measured[1]["ops_per_s"], 0.0, ">=", "reported, no target")
        sqlite = self.sqlite_available()
        for clients in (1, 50):
            row = f"durable set, {clients} client{'s' if clients > 1 else ''}"
            subjects = [("kvd Set (fsync)", self.kvbench(kvd_sock, "varlink", "set", clients, io_pid=kvd.pid))]
            if redis:
                subjects.append(("Redis SET appendfsync always", self.kvbench(redis_sock, "resp", "set", clients, io_pid=redis[0].pid)))
            if clients == 1 and sqlite:
                subjects.append(("SQLite WAL synchronous=FULL", self.local("sqlite-set", "--dir", self.dir)))
            measured = {m["subject"]: m for m in self.interleave(row, subjects)}
            mine = measured["kvd Set (fsync)"]
            measured_rows[("set", clients)] = (mine, measured.get("Redis SET appendfsync always"))
            self.compare(row, "throughput kvd/Redis", mine, measured.get("Redis SET appendfsync always"), ">=",
                         1.1 if clients > 1 else 1.0)
            if clients == 1:
                self.target("write amplification", "bytes written per 100-byte durable set (kvd)",
                            mine.get("write_bytes_per_op"), 4096, "<=", "from /proc/PID/io write_bytes")
                self.compare(row, "throughput kvd/SQLite, pinned", mine, measured.get("SQLite WAL synchronous=FULL"), ">=",
                             None, "SQLite runs in the measuring process on the clients' CPU; each kvd call wakes the other CPU")
                if sqlite:
                    self.unpinned_sqlite_row()

        print("scaling", flush=True)
        measured_rows = ScalingRows(self).run(kvd_sock, measured_rows, redis_sock)
        print("tail: durable Set p99, both generator modes", flush=True)
        TailRows(self).run(kvd_sock, measured_rows, redis_sock)
        print("fold under load", flush=True)
        FoldRow(self).run()

        self.history_rows(kvd_sock)
        print("blame: writers recorded or not", flush=True)
        BlameRows(self).run()

        print("large domain", flush=True)
        self.populate(kvd_sock, "varlink", 10, "bench.small")
        self.populate(kvd_sock, "varlink", 20 if self.quick else 100_000, "bench.large")
        small, large = self.interleave("set, domain size", [
            ("kvd Set, 10-key domain", self.kvbench(kvd_sock, "varlink", "set", 1, "bench.small")),
            (f"kvd Set, {'20' if self.quick else '100,000'}-key domain", self.kvbench(kvd_sock, "varlink", "set", 1, "bench.large"))])
        self.target("set in a large domain", "p50 latency large/small", large["p50_us"] / small["p50_us"], 1.5, "<=")

        print("system layer", flush=True)
        system_keys = 20 if self.quick else 1000
        layered_sock = self.start_system_layer("bench.kvd", system_keys)
        for op, name in (("get", "Get"), ("set", "Set (fsync)")):
            row = f"{op}, system layer"
            plain, layered = self.interleave(row, [
                (f"kvd {name}, no system layer", self.kvbench(kvd_sock, "varlink", op, 1)),
                (f"kvd {name}, system layer of {system_keys:,} keys, 1 locked", self.kvbench(layered_sock, "varlink", op, 1))])
            # p50 latency, as the large-domain row: a throughput median of a few short runs
            # moves with whatever else the machine does; the median of every call of the row
            # does not.
            self.target(row, "p50 latency with/without the system layer", layered["p50_us"] / plain["p50_us"], 1.1, "<=")

        print("shared machine", flush=True)
        FloodRow(self).run()

        print("drop-in reload", flush=True)
        DropInRow(self).run()

        print("fleet (etcd)", flush=True)
        FleetRows(self).run()

        print("Foundation, cached read", flush=True)
        self.foundation_rows(kvd_sock)
        print("GSettings, kvd's backend and dconf's", flush=True)
        gsettings_rows.run()
        print("shell", flush=True)
        self.shell_row(kvd_sock, redis[1] if redis else None)
        self.stop_all()
        print("cold start", flush=True)
        self.cold_start_row()
        print("memory", flush=True)
        self.memory_row()

    def history_rows(self, kvd_sock):
        """History: a durable Set with history kept against one with history off
        (--history-keep 0 --history-days 0), and History of a key with 1,000 entries against a
        List of a 1,000-key domain."""
        print("history", flush=True)
        servers = {}
        for name, flags in (("kvd-history", []), ("kvd-nohistory", ["--history-keep", "0", "--history-days", "0"])):
            sock = self.path(name + ".sock")  # two fresh kvd alike but for history
            servers[name] = (self.start([self.tool("kvd"), "--socket", sock, "--state-dir", self.path(name + "-state"), "--idle-exit", "0",
                                         "--no-system-layer"] + flags, sock, name), sock)
        on, no = self.interleave("durable set, history", [
            ("kvd Set (fsync), history kept", self.kvbench(servers["kvd-history"][1], "varlink", "set", 1, "bench.history-set")),
            ("kvd Set (fsync), history off", self.kvbench(servers["kvd-nohistory"][1], "varlink", "set", 1, "bench.history-set"))])
        self.target("history cost", "durable Set throughput history on/off", on["ops_per_s"] / no["ops_per_s"], 0.95, ">=")
        entries = 20 if self.quick else 1000
        self.populate(kvd_sock, "varlink", entries, "bench.list1000")
        with socket.socket(socket.AF_UNIX) as conn:  # one key changed `entries` times
            conn.connect(kvd_sock)
            for value in range(entries):
                conn.sendall(json.dumps({"method": "io.kvd.Defaults.Set", "parameters": {
                    "domain": "bench.history", "key": "k0", "value": value}}).encode() + b"\0")
                reply = b""
                while not reply.endswith(b"\0"):
                    reply += conn.recv(4096)
        history, listing = self.interleave("history of a key", [
            (f"kvd History of a key with {entries:,} entries", self.kvbench(kvd_sock, "varlink", "history", 1, "bench.history")),
            (f"kvd List of a {entries:,}-key domain", self.kvbench(kvd_sock, "varlink", "list", 1, "bench.list1000"))])
        self.target("history read", "p50 latency History/List", history["p50_us"] / listing["p50_us"], 2.0, "<=")
        for proc, _ in servers.values():
            self.stop(proc)

    @contextlib.contextmanager
    def unpinned(self):
        """Nothing pinned while inside: servers started and programs run meanwhile go where the
        scheduler puts them, as an app and its settings daemon run on a desktop."""
        saved = (self.server_cpus, self.client_cpus)
        self.server_cpus = self.client_cpus = None
        try:
            yield
        finally:
            self.server_cpus, self.client_cpus = saved

    def unpinned_sqlite_row(self):
        """kvd's durable Set beside SQLite with nothing pinned (the target is on this
        pair): a kvd of its own, kvbench and the SQLite program where the scheduler puts them."""
        with self.unpinned():
            _, sock = self.start_kvd("kvd-unpinned")
            mine, peer = self.interleave("durable set, 1 client, unpinned", [
                ("kvd Set (fsync), unpinned", self.kvbench(sock, "varlink", "set", 1)),
                ("SQLite WAL synchronous=FULL, unpinned", self.local("sqlite-set", "--dir", self.dir))])
        self.compare("durable set, 1 client, unpinned", "throughput kvd/SQLite, unpinned", mine, peer, ">=", 0.7,
                     "SQLite runs in the measuring process; kvd adds a socket round trip to the same sync")

    def compare(self, row, measure, mine, peer, op, goal, note=""):
        if peer is None:
            self.target(row, measure, None, goal, op, "peer skipped")
        else:
            self.target(row, measure, mine["ops_per_s"] / peer["ops_per_s"], goal, op, note)

    def sqlite_available(self):
        if "sqlite" in self.skipped:
            self.skip("SQLite", "BENCH_SKIP=sqlite")
            return False
        probe = subprocess.run([self.tool("kvbench-local"), "sqlite-probe"], capture_output=True, text=True, timeout=30)
        if probe.returncode != 0 or "skipped" in probe.stdout:
            self.skip("SQLite", (probe.stdout + probe.stderr).strip())
            return False
        return True

    def foundation_rows(self, kvd_sock):
        """KVDefaults.write beside UserDefaults.set + synchronize(), pinned (reported: the app on
        the clients' CPU, kvd on the other, so every write wakes the other CPU twice while
        UserDefaults stays on its own) and unpinned (the target, as for SQLite: both run where
        the scheduler puts them, as an app does)."""
        mine, peer = self.interleave("Foundation, pinned", [
            ("KVDefaults.write (durable), pinned", self.local("kvdefaults-set", "--socket", kvd_sock)),
            ("UserDefaults.set+synchronize, pinned", self.local("userdefaults-set"))])
        self.target("Foundation, pinned", "throughput KVDefaults/UserDefaults, pinned", mine["ops_per_s"] / peer["ops_per_s"],
                    None, ">=", "UserDefaults writes in the measuring process; each KVDefaults call wakes kvd's CPU")
        with self.unpinned():
            _, sock = self.start_kvd("kvd-foundation-unpinned")
            mine, peer = self.interleave("Foundation", [
                ("KVDefaults.write (durable)", self.local("kvdefaults-set", "--socket", sock)),
                ("UserDefaults.set+synchronize", self.local("userdefaults-set"))])
        self.target("Foundation", "throughput KVDefaults/UserDefaults, unpinned", mine["ops_per_s"] / peer["ops_per_s"],
                    1.5, ">=", "nothing pinned, as an app runs")
        count = "20000" if self.quick else "2000000"
        read = self.run_json([self.tool("kvbench-local"), "cached-read", "--socket", kvd_sock, "--count", count,
                              "--runs", str(self.runs)])[0]
        self.rows.append({"row": "cached read", "subject": "KVDefaults.string(forKey:)", "ns_per_op": read["kvdefaults_ns"]})
        self.rows.append({"row": "cached read", "subject": "UserDefaults.standard.string", "ns_per_op": read["userdefaults_ns"]})
        print(f"  cached read: KVDefaults {read['kvdefaults_ns']:.0f} ns, UserDefaults {read['userdefaults_ns']:.0f} ns", flush=True)
        self.target("cached read", "UserDefaults ns / KVDefaults ns", read["userdefaults_ns"] / read["kvdefaults_ns"], 4.0, ">=")

    def time_process(self, argv, count):
        """Median wall time of `count` runs of a whole process, in ms (each must succeed)."""
        return self.time_processes([argv], count)[0]

    def time_processes(self, argvs, count):
        """Like time_process for several commands, run in turn (a, b, a, b, ...) so that whatever
        else the machine does falls on each alike; one (median, min, max) per command."""
        times = [[] for _ in argvs]
        for _ in range(count):
            for argv, samples in zip(argvs, times):
                begin = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, env=self.env, timeout=30)  # not pinned: a shell is not
                samples.append((time.perf_counter() - begin) * 1000)
                if done.returncode != 0:
                    raise RuntimeError(f"{argv[0]} failed: {done.stderr.decode()[:200]}")
        return [(statistics.median(t), min(t), max(t)) for t in times]

    def shell_row(self, kvd_sock, redis_sock):
        count = 3 if self.quick else 100
        kvctl = [self.tool("kvctl"), "--socket", kvd_sock, "get", "bench.kvd", "k0"]
        if redis_sock is None or not shutil.which("redis-cli") or "redis" in self.skipped:
            self.add_time_row("shell", "kvctl get (whole process)", self.time_process(kvctl, count))
            self.skip("shell redis-cli", "redis-cli is not installed")
            self.target("shell", "time kvctl/redis-cli", None, 1.0, "<=", "peer skipped")
            return
        mine, peer = self.time_processes([kvctl, ["redis-cli", "-s", redis_sock, "get", "bench.kvd:k0"]], count)
        self.add_time_row("shell", "kvctl get (whole process)", mine)
        self.add_time_row("shell", "redis-cli get (whole process)", peer)
        self.target("shell", "time kvctl/redis-cli", mine[0] / peer[0], 1.0, "<=")

    def add_time_row(self, row, subject, timing):
        self.rows.append({"row": row, "subject": subject, "ms": timing[0], "ms_min": timing[1], "ms_max": timing[2]})
        print(f"  {row:<22} {subject:<28} {timing[0]:.2f} ms [{timing[1]:.2f}–{timing[2]:.2f}]", flush=True)

    def cold_start_row(self):
        kvd, sock = self.start_kvd("cold")
        keys = 200 if self.quick else 10_000
        self.populate(sock, "varlink", keys, "bench.cold", domains=100)
        self.stop(kvd)
        count = 3 if self.quick else 20
        times = []
        for index in range(count):
            times.append(self.activate_and_get(self.path(f"act{index}.sock"), self.path("cold-state")))
        mine = (statistics.median(times), min(times), max(times))
        self.add_time_row("cold start", f"kvd activation → first Get ({keys} keys)", mine)
        hello = self.time_process(["sh", "-c", 'exec "$0"', self.tool("kvbench-hello")], count)
        self.add_time_row("cold start", "hello-world Swift (Foundation)", hello)
        self.target("cold start", "time kvd/hello-world", mine[0] / hello[0], 10.0, "<=")

    def activate_and_get(self, path, state):
        """Socket activation by hand: a listening socket as fd 3, then the time to the first reply."""
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(16)

        call = json.dumps({"method": "io.kvd.Defaults.Get", "parameters": {"domain": "bench.cold.50", "key": "p0"}}).encode() + b"\0"
        log = open(self.path("activation.log"), "ab")
        begin = time.perf_counter()
        # sh sets LISTEN_PID to its own pid, which exec hands on to kvd (sh's start is timed too,
        # and so it is for the hello-world program it is compared with).
        fd = listener.fileno()
        proc = subprocess.Popen(["sh", "-c", ACTIVATE.format(redirect="" if fd == 3 else f"3<&{fd} {fd}<&-"), self.tool("kvd"), "--state-dir", state, "--idle-exit", "0"],
                                stdout=log, stderr=subprocess.STDOUT, env=self.env, pass_fds=(fd,))
        self.children.append(proc)
        try:
            with socket.socket(socket.AF_UNIX) as client:
                client.settimeout(10)
                client.connect(path)
                client.sendall(call)
                reply = b""
                while not reply.endswith(b"\0"):
                    chunk = client.recv(65536)
                    if not chunk:
                        raise RuntimeError("kvd closed the activated socket")
                    reply += chunk
            elapsed = (time.perf_counter() - begin) * 1000
            if b'"error"' in reply:
                raise RuntimeError(f"cold Get failed: {reply[:200]!r}")
            return elapsed
        finally:
            listener.close()
            self.stop(proc)

    def memory_row(self):
        """RSS after populating 100,000 and 1,000,000 keys of 100 B (1,000 keys a domain), kvd beside
        Redis (no persistence: only what it holds in memory)."""
        for keys, goal in ((1000, 2.0), (10_000, 2.0)) if self.quick else ((100_000, 1.25), (1_000_000, 1.25)):
            self.memory_pair(keys, keys // 1000, goal)

    def memory_pair(self, keys, domains, goal):
        kvd, sock = self.start_kvd(f"mem-kvd-{keys}")
        empty = rss_kib(kvd.pid)
        self.populate(sock, "varlink", keys, "bench.mem", domains=domains)
        mine, mine_anon = rss_kib(kvd.pid), rss_kib(kvd.pid, "RssAnon")
        settled = self.settled_rss(kvd.pid, self.path(f"mem-kvd-{keys}-state"))
        self.stop(kvd)
        self.rows.append({"row": "memory", "subject": f"kvd RSS, {keys:,} keys of 100 B", "rss_kib": mine, "rss_empty_kib": empty,
                          "rss_anon_kib": mine_anon, "rss_settled_kib": settled})
        print(f"  memory: kvd {empty} KiB empty, {mine} KiB with {keys} keys, {settled} KiB once no fold runs", flush=True)
        redis = self.start_redis(f"mem-redis-{keys}", durable=False)
        if redis is None:
            self.target("memory", f"RSS kvd/Redis, {keys:,} keys", None, goal, "<=", "peer skipped")
            return
        empty = rss_kib(redis[0].pid)
        self.populate(redis[1], "resp", keys, "bench.mem", domains=domains)
        peer, peer_anon = rss_kib(redis[0].pid), rss_kib(redis[0].pid, "RssAnon")
        self.stop(redis[0])
        self.rows.append({"row": "memory", "subject": f"Redis RSS, {keys:,} keys of 100 B", "rss_kib": peer, "rss_empty_kib": empty,
                          "rss_anon_kib": peer_anon})
        print(f"  memory: Redis {empty} KiB empty, {peer} KiB with {keys} keys", flush=True)
        self.target("memory", f"RSS kvd/Redis, {keys:,} keys", mine / peer, goal, "<=",
                    f"anonymous memory (RssAnon: the heap, not the programs' mapped files) kvd/Redis {mine_anon / peer_anon:.2f}; "
                    f"once no fold runs {settled / peer:.2f}")

    def settled_rss(self, pid, state):
        """kvd's RSS once the fold running as the populate ended (if any) has ended: `kvd.wal.next`
        gone (it is renamed over `kvd.wal` at a fold's end), then 0.2 s for the freed memory to be
        given back; at most 10 s. The row's target is on the RSS right after the populate, which
        often falls during a fold (its commits not folded yet and its buffers still held)."""
        deadline = time.monotonic() + 10
        while os.path.exists(os.path.join(state, "kvd.wal.next")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        return rss_kib(pid)

    # ---- output ----------------------------------------------------------------------

    def write(self):
        os.makedirs(self.out, exist_ok=True)
        result = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": self.machine, "quick": self.quick, "seconds_per_run": self.seconds,
            "runs": self.runs, "server_cpus": sorted(self.server_cpus or []), "client_cpus": sorted(self.client_cpus or []),
            "loadavg_end": os.getloadavg(), "rows": self.rows, "targets": self.targets, "notes": self.notes,
            "scaling": self.scaling, "tail": self.tail,
        }
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(result, f, indent=2)
        with open(os.path.join(self.out, "results.md"), "w") as f:
            f.write(chart.markdown(result))
        with open(os.path.join(self.out, "results.svg"), "w") as f:
            f.write(chart.svg(result))
        print(f"wrote {self.out}/results.json, results.md, results.svg")


def read_io(pid):
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def rss_kib(pid, field="VmRSS"):
    """A size line of /proc/PID/status, in KiB: VmRSS (everything resident), RssAnon (the heap
    and stacks, without the program's and libraries' mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.strip() if shutil.which("redis-server") else ""
    return {"cpu": model, "cores": os.cpu_count(), "loadavg_start": os.getloadavg(), "kernel": platform.release(),
            "os": platform.freedesktop_os_release().get("PRETTY_NAME", "") if hasattr(platform, "freedesktop_os_release") else "",
            "swift": swift[0] if swift else "", "redis": redis}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="folder with kvd, kvctl, kvbench, kvbench-local, kvbench-hello, kvbench-fleet")
    parser.add_argument("--gio-modules", help="folder of libgiokvd.so, kvd's GSettings backend (make giokvd): the GSettings rows")
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    parser.add_argument("--no-install", action="store_true")
    parser.add_argument("--no-pin", action="store_true", help="do not bind servers to one core and clients to another")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one run")
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (median and spread)")
    parser.add_argument("--out", help="folder for results.* (default: bench, or .build/bench-smoke with --quick)")
    parser.add_argument("--tmp", help="folder for the servers' state (default .build; must not be tmpfs)")
    parser.add_argument("--only", help="run only these rows, comma-separated (history, blame, cold, shared, dropins, gsettings, gsettings-start, scaling, tail, fold, memory), print them and write no results")
    args = parser.parse_args()
    if args.only and not set(args.only.split(",")) <= {"history", "blame", "cold", "shared", "dropins", "gsettings", "gsettings-start", "scaling", "tail", "fold", "memory"}:
        parser.error(f"--only takes history, blame, cold, shared, dropins, gsettings, gsettings-start, scaling, tail, fold and/or memory, not {args.only}")
    bench = Bench(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        bench.run()
        if not bench.only:
            bench.write()
    finally:
        bench.stop_all()
        shutil.rmtree(bench.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
