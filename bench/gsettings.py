"""The GSettings rows of make bench: kvd's GSettings backend (libgiokvd.so) beside dconf's, the
same C program (bench/gsettings-bench.c, built here against the installed GLib) on each:

- gsettings read: g_settings_get_int of one key from the backend's cache (kvd: the module's
  in-process cache; dconf: its mmap'd database), ns per read (target: kvd at most 2 times dconf);
- gsettings write: a write acknowledged durable (set, then g_settings_sync until kvd made it
  durable, or dconf-service has written its database),
  writes per second (target: kvd at least 1 times dconf);
- gsettings burst: 10,000 g_settings_set_int of one key in a loop, then one g_settings_sync (an
  app writing from its main loop: each set returns at once, the sync waits until all is durable
  in kvd, or written to dconf's database), seconds for all of it (target: kvd at most 2 times
  dconf's time);
- gsettings change seen: a write by another process until this one's `changed` signal, in its
  main loop, shows it (p50 latency, reported beside dconf's).

dconf runs as it does on a desktop, on a session bus of its own: each dconf measurement is one
`dbus-run-session` (the bus and the dconf-service it starts end with it), with its database in
the bench's temporary folder. Servers (kvd; the bus and dconf-service) run on the servers' CPU,
the measuring program binds itself to the clients' CPU. make bench installs what is missing
(libglib2.0-dev, libglib2.0-bin, dconf-service, dconf-gsettings-backend, dbus-daemon); the smoke
mode installs nothing and skips the rows when something lacks.
"""
import json
import os
import shutil
import subprocess

SCHEMA = """<?xml version="1.0" encoding="UTF-8"?>
<schemalist>
  <schema id="io.kvd.bench" path="/io/kvd/bench/">
    <key name="counter" type="i"><default>0</default></key>
  </schema>
  <schema id="io.kvd.bench.profile">
    <key name="name" type="s"><default>'unnamed'</default></key>
    <key name="size" type="i"><default>-1</default></key>
    <key name="flag" type="b"><default>false</default></key>
  </schema>
</schemalist>
"""


# The first-read rows (issue 38): relocatable objects on distinct paths, and an app's start.
MANY_OBJECTS = 1500
START_SCHEMAS = 50
MAX_SOCKETS = 8


class GSettingsRows:
    def __init__(self, bench, kvd_sock, module_dir):
        self.bench = bench
        self.kvd_sock = kvd_sock
        self.module_dir = os.path.abspath(module_dir) if module_dir else None
        self.reads = 20_000 if bench.quick else 2_000_000
        self.burst = 1_000 if bench.quick else 10_000

    # ---- prerequisites ---------------------------------------------------------------

    def dconf_module(self):
        folder = subprocess.run(["pkg-config", "--variable=giomoduledir", "gio-2.0"], capture_output=True, text=True).stdout.strip()
        return os.path.join(folder, "libdconfsettings.so") if folder else ""

    def missing(self):
        need = []
        if subprocess.run(["pkg-config", "--exists", "gio-2.0"], capture_output=True).returncode != 0:
            need.append("libglib2.0-dev")
        if not shutil.which("glib-compile-schemas"):
            need.append("libglib2.0-bin")
        if not os.path.exists("/usr/libexec/dconf-service"):
            need.append("dconf-service")
        if not os.path.exists(self.dconf_module()):
            need.append("dconf-gsettings-backend")
        if not shutil.which("dbus-run-session"):
            need.append("dbus-daemon")
        return need

    def ensure_packages(self):
        """Installs what the rows need (make bench), as Bench.ensure_packages does for its peers."""
        need = self.missing()
        if not need:
            return
        if not self.bench.install:
            print(f"not installing {' '.join(need)} (smoke mode or --no-install)")
            return
        sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
        print(f"installing {' '.join(need)}", flush=True)
        try:
            subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + need, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                           timeout=300, stdout=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            print(f"could not install: {error}")

    def available(self):
        if "gsettings" in self.bench.skipped:
            self.bench.skip("GSettings rows", "BENCH_SKIP=gsettings")
            return False
        if not self.module_dir or not os.path.exists(os.path.join(self.module_dir, "libgiokvd.so")):
            self.bench.skip("GSettings rows", "no libgiokvd.so (make bench builds it: make giokvd)")
            return False
        need = self.missing()
        if need:
            self.bench.skip("GSettings rows", f"{', '.join(need)} not installed (make bench installs them)")
            return False
        return True

    # ---- setup -----------------------------------------------------------------------

    def prepare(self):
        here = os.path.dirname(os.path.abspath(__file__))
        self.program = self.bench.path("gsettings-bench")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gio-2.0"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["cc", "-O2", "-o", self.program, os.path.join(here, "gsettings-bench.c")] + flags, check=True, timeout=120)
        schemas = self.bench.path("gsettings-schemas")
        os.makedirs(schemas, exist_ok=True)
        with open(os.path.join(schemas, "io.kvd.bench.gschema.xml"), "w") as f:
            f.write(SCHEMA)
        subprocess.run(["glib-compile-schemas", schemas], check=True, timeout=60)
        runtime = self.bench.path("gsettings-runtime")  # dconf's shm flag file lives there
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        env = dict(self.bench.env, GSETTINGS_SCHEMA_DIR=schemas, XDG_RUNTIME_DIR=runtime)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        if self.bench.client_cpus:
            env["GSETTINGS_BENCH_CPU"] = str(min(self.bench.client_cpus))
        self.kvd_env = dict(env, GSETTINGS_BACKEND="kvd", GIO_EXTRA_MODULES=self.module_dir, KVD_SOCKET=self.kvd_sock)
        self.dconf_env = dict(env, GSETTINGS_BACKEND="dconf")

    def command(self, backend, *args):
        """The program's argv and env on `backend`; dconf's inside a session bus of its own."""
        if backend == "kvd":
            return [self.program] + list(args), self.kvd_env
        return ["dbus-run-session", "--", self.program] + list(args), self.dconf_env

    def run_program(self, backend, *args):
        argv, env = self.command(backend, *args)
        # Started on the servers' CPU (the bus and dconf-service stay there); the program moves
        # itself to the clients' (GSETTINGS_BENCH_CPU).
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                              preexec_fn=self.bench.pinned(self.bench.server_cpus))
        if done.returncode != 0:
            raise RuntimeError(f"gsettings-bench {' '.join(args)} on {backend} failed: {(done.stdout + done.stderr).strip()[:400]}")
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"gsettings-bench {' '.join(args)} on {backend} printed nothing: {done.stderr.strip()[:400]}")
        return json.loads(lines[-1])

    # ---- the rows --------------------------------------------------------------------

    def run(self):
        if not self.available():
            for row, measure, goal, op in (("gsettings read", "ns per read dconf/kvd", 0.5, ">="),
                                           ("gsettings write", "durable writes/s kvd/dconf", 1.0, ">="),
                                           ("gsettings burst", "seconds kvd/dconf", 2.0, "<="),
                                           ("gsettings change seen", "p50 latency kvd/dconf", None, "<=")):
                self.bench.target(row, measure, None, goal, op, "skipped")
            return
        self.prepare()
        reads = {"kvd": [], "dconf": []}
        for _ in range(self.bench.runs):
            for backend in ("kvd", "dconf"):
                reads[backend].append(self.run_program(backend, "read", str(self.reads))["ns_per_op"])
        medians = {}
        for backend, subject in (("kvd", "kvd backend, g_settings_get_int (cache)"),
                                 ("dconf", "dconf backend, g_settings_get_int (mmap)")):
            runs = reads[backend]
            medians[backend] = sorted(runs)[len(runs) // 2]
            self.bench.rows.append({"row": "gsettings read", "subject": subject, "ns_per_op": medians[backend],
                                    "ns_min": min(runs), "ns_max": max(runs), "runs": len(runs)})
            print(f"  {'gsettings read':<22} {subject:<44} {medians[backend]:8.1f} ns [{min(runs):.1f}–{max(runs):.1f}]", flush=True)
        # Time per read, kvd at most 2 times dconf's: dconf ns / kvd ns at least 0.5.
        self.bench.target("gsettings read", "ns per read dconf/kvd", medians["dconf"] / medians["kvd"], 0.5, ">=",
                          "kvd at most 2x dconf's time per read")

        seconds = str(self.bench.seconds)
        kvd, dconf = self.bench.interleave("gsettings write", [
            ("kvd backend, set + g_settings_sync", (lambda: self.run_program("kvd", "write", seconds), None)),
            ("dconf backend, set + g_settings_sync", (lambda: self.run_program("dconf", "write", seconds), None))])
        self.bench.target("gsettings write", "durable writes/s kvd/dconf", kvd["ops_per_s"] / dconf["ops_per_s"], 1.0, ">=")

        self.run_burst()

        kvd, dconf = self.bench.interleave("gsettings change seen", [
            ("kvd backend, other process's set to changed", (lambda: self.run_program("kvd", "notify", seconds), None)),
            ("dconf backend, other process's set to changed", (lambda: self.run_program("dconf", "notify", seconds), None))])
        self.bench.target("gsettings change seen", "p50 latency kvd/dconf", kvd["p50_us"] / dconf["p50_us"], None, "<=",
                          "no target; each includes its backend's write")

        self.run_start_rows(prepared=True)

    def run_burst(self):
        """The burst row: runs of each backend in turn (kvd, dconf, kvd, ...), medians compared."""
        runs = {"kvd": [], "dconf": []}
        for _ in range(self.bench.runs):
            for backend in ("kvd", "dconf"):
                runs[backend].append(self.run_program(backend, "burst", str(self.burst)))
        medians = {}
        for backend, subject in (("kvd", f"kvd backend, {self.burst:,} set_int + one sync"),
                                 ("dconf", f"dconf backend, {self.burst:,} set_int + one sync")):
            seconds = sorted(run["seconds"] for run in runs[backend])
            sets = sorted(run["set_seconds"] for run in runs[backend])
            medians[backend] = seconds[len(seconds) // 2]
            self.bench.rows.append({"row": "gsettings burst", "subject": subject, "ms": medians[backend] * 1000,
                                    "ms_min": seconds[0] * 1000, "ms_max": seconds[-1] * 1000,
                                    "set_ms": sets[len(sets) // 2] * 1000, "ops": self.burst, "runs": len(seconds)})
            print(f"  {'gsettings burst':<22} {subject:<44} {medians[backend]:8.4f} s [{seconds[0]:.4f}–{seconds[-1]:.4f}], "
                  f"the sets alone {sets[len(sets) // 2]:.4f} s", flush=True)
        self.bench.target("gsettings burst", "seconds kvd/dconf", medians["kvd"] / medians["dconf"], 2.0, "<=",
                          "kvd at most 2x dconf's time for the sets and the sync")

    def run_start_rows(self, prepared=False):
        """gsettings first read of 1,500 objects, gsettings app start (50 schemas): a fresh
        process makes relocatable objects whose values were set before and reads them; its time
        (target: kvd at most 2 times dconf's) and its sockets after (target: at most 8)."""
        rows = (("gsettings first read of 1,500 objects", "many", MANY_OBJECTS),
                ("gsettings app start (50 schemas)", "start", START_SCHEMAS))
        if not self.available():
            for row, _, _ in rows:
                self.bench.target(row, "time kvd/dconf", None, 2.0, "<=", "skipped")
            return
        if not prepared:
            self.prepare()
        for backend in ("kvd", "dconf"):
            self.run_program_plain(backend, "populate", str(MANY_OBJECTS))
        for row, mode, count in rows:
            results = {"kvd": [], "dconf": []}
            for _ in range(self.bench.runs):
                for backend in ("kvd", "dconf"):
                    results[backend].append(self.run_program(backend, mode, str(count)))
            median = {}
            for backend in ("kvd", "dconf"):
                runs = sorted(results[backend], key=lambda r: r["ms"])
                median[backend] = runs[len(runs) // 2]
                wrong = max(r["wrong"] for r in runs)
                if wrong:
                    raise RuntimeError(f"{row} on {backend}: {wrong} objects read wrong")
                self.bench.rows.append({"row": row, "subject": f"{backend} backend, {count} objects", "ms": median[backend]["ms"],
                                        "ms_min": runs[0]["ms"], "ms_max": runs[-1]["ms"], "sockets": median[backend]["sockets"],
                                        "runs": len(runs)})
                print(f"  {row:<40} {backend:<6} {median[backend]['ms']:8.1f} ms [{runs[0]['ms']:.1f}–{runs[-1]['ms']:.1f}]"
                      f"  {median[backend]['sockets']} sockets", flush=True)
            self.bench.target(row, "time kvd/dconf", median["kvd"]["ms"] / median["dconf"]["ms"], 2.0, "<=",
                              "kvd at most 2x dconf's time")
            self.bench.target(row, "sockets per process (kvd)", median["kvd"]["sockets"], MAX_SOCKETS, "<=",
                              "at most 8 descriptors for kvd")

    def run_program_plain(self, backend, *args):
        """Runs the program for its effect (populate), failing on a non-zero exit."""
        argv, env = self.command(backend, *args)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"gsettings-bench {' '.join(args)} on {backend} failed: {(done.stdout + done.stderr).strip()[:400]}")
