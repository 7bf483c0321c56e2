#!/usr/bin/env python3
"""Instructions of the "gsettings app start (50 schemas)" row's measured part, kvd's GSettings
backend beside dconf's, counted by callgrind (deterministic, unlike the row's time on a shared
machine):

    bench/gsettings-callgrind.py [--bin DIR] [--module-dir DIR] [--domains N] [--schemas N] [--no-dconf]

A kvd of its own (from --bin, `swift build --show-bin-path` unless told; no system layer) in a
temporary folder; `gsettings-bench populate N` through the module (N domains of three keys: the
store of the row); then `gsettings-bench start S` under `valgrind --tool=callgrind
--toggle-collect=first_read`, which counts the instructions of the program's first_read, all
threads together: making S objects and reading three keys of each, what the row times (the
module's load and GLib's set-up before it are not counted). dconf alike: its database populated
the same way, then the run inside a session bus of its own (dbus-run-session), as the row runs it.
Each count is the fewer of two runs. The program is built here as bench/gsettings.py builds it.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from gsettings import SCHEMA

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_socket(proc, path):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"kvd exited at start (status {proc.returncode})")
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(path)
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"kvd did not listen on {path}")


def instructions(argv, env, out):
    """The instructions callgrind counted in first_read (its out file's summary)."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or '"wrong": 0' not in done.stdout:
        sys.exit(f"{' '.join(argv)} failed: {(done.stdout + done.stderr)[-800:]}")
    with open(out) as f:
        summary = re.search(r"^summary: (\d+)", f.read(), re.M)
    if not summary or int(summary.group(1)) == 0:
        sys.exit(f"no instructions counted in first_read ({out})")
    return int(summary.group(1))


def measure(prefix, program, schemas, env, folder, name):
    """The fewer instructions of two runs; the callgrind files in `folder`."""
    counts = []
    for run in range(2):
        out = os.path.join(folder, f"callgrind.{name}.{run}")
        valgrind = ["valgrind", "--tool=callgrind", "--toggle-collect=first_read", f"--callgrind-out-file={out}"]
        counts.append(instructions(prefix + valgrind + [program, "start", str(schemas)], env, out))
    return min(counts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", help="the folder of kvd (default: swift build --show-bin-path)")
    parser.add_argument("--module-dir", default=".build/clib/gio", help="the folder of libgiokvd.so (make giokvd)")
    parser.add_argument("--domains", type=int, default=1500)
    parser.add_argument("--schemas", type=int, default=50)
    parser.add_argument("--no-dconf", action="store_true", help="count kvd's backend only")
    parser.add_argument("--keep", help="a folder to keep the callgrind files in (callgrind_annotate reads them)")
    args = parser.parse_args()
    bin_dir = args.bin or subprocess.run(["swift", "build", "--show-bin-path"], capture_output=True, text=True, check=True).stdout.strip()
    module_dir = os.path.abspath(args.module_dir)
    if not os.path.exists(os.path.join(module_dir, "libgiokvd.so")):
        sys.exit(f"no libgiokvd.so in {module_dir} (make giokvd)")
    with tempfile.TemporaryDirectory(prefix="gsettings-callgrind.") as folder:
        program = os.path.join(folder, "gsettings-bench")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "gio-2.0"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["cc", "-O2", "-g", "-o", program, os.path.join(HERE, "gsettings-bench.c")] + flags, check=True)
        schemas = os.path.join(folder, "schemas")
        os.makedirs(schemas)
        with open(os.path.join(schemas, "io.kvd.bench.gschema.xml"), "w") as f:
            f.write(SCHEMA)
        subprocess.run(["glib-compile-schemas", schemas], check=True)
        runtime = os.path.join(folder, "runtime")
        os.makedirs(runtime, mode=0o700)
        env = dict(os.environ, GSETTINGS_SCHEMA_DIR=schemas, XDG_RUNTIME_DIR=runtime, KVD_NO_AUTOSTART="1",
                   HOME=os.path.join(folder, "home"), XDG_CONFIG_HOME=os.path.join(folder, "config"))
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        out = os.path.abspath(args.keep) if args.keep else folder
        os.makedirs(out, exist_ok=True)
        sock = os.path.join(folder, "kvd.sock")
        kvd_env = dict(env, GSETTINGS_BACKEND="kvd", GIO_EXTRA_MODULES=module_dir, KVD_SOCKET=sock)
        with open(os.path.join(folder, "kvd.log"), "wb") as log:
            kvd = subprocess.Popen([os.path.join(bin_dir, "kvd"), "--socket", sock, "--state-dir", os.path.join(folder, "state"),
                                    "--idle-exit", "0", "--no-system-layer"], stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_socket(kvd, sock)
            subprocess.run([program, "populate", str(args.domains)], env=kvd_env, check=True, timeout=600)
            result = {"kvd": measure([], program, args.schemas, kvd_env, out, "kvd")}
        finally:
            kvd.terminate()
            kvd.wait()
        if not args.no_dconf and shutil.which("dbus-run-session") and os.path.exists("/usr/libexec/dconf-service"):
            dconf_env = dict(env, GSETTINGS_BACKEND="dconf")
            subprocess.run(["dbus-run-session", "--", program, "populate", str(args.domains)], env=dconf_env, check=True, timeout=600)
            result["dconf"] = measure(["dbus-run-session", "--"], program, args.schemas, dconf_env, out, "dconf")
    for backend, count in result.items():
        print(f"{backend:<6} first_read of {args.schemas} schemas, {args.domains} domains in the store: {count:,} instructions")
    if "dconf" in result:
        print(f"kvd / dconf: {result['kvd'] / result['dconf']:.2f}")


if __name__ == "__main__":
    main()
