#!/usr/bin/env python3
"""Instructions kvd executes per Get and per durable Set, counted by callgrind (user space only,
deterministic, unlike timings on a shared machine): the before/after number of CPU work.

    bench/callgrind.py [--op get|set] [--clients N] [--json] KVD [KVD ...]

For each kvd binary: runs it under `valgrind --tool=callgrind --separate-threads=yes` with a fresh
state folder each run (never one another run or binary wrote), sends SMALL and then LARGE calls of each kind (a separate kvd run for each count),
and prints (instructions(LARGE) - instructions(SMALL)) / (LARGE - SMALL) per call, so start-up,
the first call's allocations and shutdown cancel out. Each count is the fewer of two runs.

Two numbers a call:
- **loop**: the event loop's thread (callgrind's thread 1) only: reading, planning and, for one
  writer, committing the call and replying. With one client every commit runs there, and this
  is the number the measurement log has quoted since 2026-11-29.
- **all threads**: every thread of the process, the store's commit queue and fold thread too
  (with several clients a batch of two or more writes commits on the commit queue's thread).
  The log never reaches its 4 MiB fold threshold in LARGE Sets of 100 bytes, so no fold is in it.

`--calls SMALL LARGE` (default 200 1200) counts other calls. With enough Sets to pass the log's
4 MiB several times (about 21,000 durable Sets of 100 bytes a fold, history on as kvd's
default keeps it), the difference holds folds: `--op set --clients 50 --calls 2000 62000 --runs 1`
is a durable Set with its share of the folds, each history file at its bound (1 MiB, rewritten
down to 768 KiB at every fold from the second on).

`--clients N` (default 1) keeps N connections, sends one call on each and then reads the N
replies, round after round: a fixed small group commit (the count of calls is still SMALL and
LARGE in all). Compare binaries built side by side (for example before and after a change) in
one invocation, at the same --clients.
"""
import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

SMALL, LARGE = 200, 1200
PAYLOAD = "x" * 100


def message(method, parameters):
    text = json.dumps({"method": "io.kvd.Defaults." + method, "parameters": parameters}, separators=(",", ":"))
    return text.encode() + b"\0"


def read_reply(sock, method):
    reply = b""
    while not reply.endswith(b"\0"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("kvd closed the connection")
        reply += chunk
    decoded = json.loads(reply[:-1])
    if "error" in decoded:
        raise RuntimeError(f"{method}: {decoded}")


def connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(100):
        try:
            sock.connect(path)
            return sock
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"cannot connect to {path}")


def drive(socks, op, count):
    """`count` calls in rounds of one call on each connection, then its replies."""
    method = "Get" if op == "get" else "Set"
    sent = 0
    while sent < count:
        batch = socks[:count - sent]
        for index, sock in enumerate(batch):
            parameters = {"domain": "bench.kvd", "key": f"k{index}"}
            if op == "set":
                parameters["value"] = PAYLOAD + str((sent + index) % 10)
            sock.sendall(message(method, parameters))
        for sock in batch:
            read_reply(sock, method)
        sent += len(batch)


def instructions(kvd, op, count, clients, folder, run):
    """(event loop thread's instructions, every thread's) of one kvd run of `count` calls, on a
    state folder of its own (a folder another run or binary wrote holds its log: the counts
    would climb from run to run)."""
    name = f"{op}-{count}-{clients}-{run}"
    folder = tempfile.mkdtemp(prefix=f"{name}-", dir=folder)
    state, sock_path = os.path.join(folder, "state"), os.path.join(folder, "kvd.sock")
    out = os.path.join(folder, "callgrind.out")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}", kvd,
                             "--socket", sock_path, "--state-dir", state, "--idle-exit", "0", "--no-system-layer"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            # valgrind 3.19 knows no pidfd_send_signal: every peer would read as
                            # unconfirmed, so confined, and every Set refused. Writers off, as
                            # bench/blame.py's comparison has them.
                            env=dict(os.environ, KVD_BENCH_NO_WRITERS="1"))
    deadline = time.monotonic() + 120
    while not os.path.exists(sock_path):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{kvd} did not start under valgrind")
        time.sleep(0.1)
    socks = [connect(sock_path) for _ in range(clients)]
    for index, sock in enumerate(socks):  # each key exists before the counted calls
        sock.sendall(message("Set", {"domain": "bench.kvd", "key": f"k{index}", "value": PAYLOAD}))
        read_reply(sock, "Set")
    drive(socks, op, count)
    for sock in socks:
        sock.close()
    proc.terminate()
    proc.wait(timeout=120)
    per_thread = {path[-2:]: totals(path) for path in glob.glob(out + "-[0-9][0-9]")}
    if "01" not in per_thread:
        raise RuntimeError(f"no thread 1 in {out}-*")
    return per_thread["01"], sum(per_thread.values())


def totals(path):
    with open(path) as file:
        for line in file:
            match = re.match(r"(?:summary|totals): (\d+)", line)
            if match:
                return int(match.group(1))
    raise RuntimeError(f"no totals in {path}")


def measure(kvd, op, clients, folder, small=SMALL, large=LARGE, runs=2):
    """Instructions per call of `op` (loop thread, all threads), each count the fewer of two runs:
    a run now and then takes an extra pass of the loop (about 20,000 instructions a Set more,
    over the whole run) as its timing falls."""
    small_runs = [instructions(kvd, op, small, clients, folder, run) for run in range(1, runs + 1)]
    large_runs = [instructions(kvd, op, large, clients, folder, run) for run in range(1, runs + 1)]
    loop = (min(r[0] for r in large_runs) - min(r[0] for r in small_runs)) / (large - small)
    every = (min(r[1] for r in large_runs) - min(r[1] for r in small_runs)) / (large - small)
    return {"kvd": kvd, "op": op, "clients": clients, "loop_per_call": loop, "all_threads_per_call": every,
            "loop_whole_run": min(r[0] for r in large_runs), "calls": large}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kvd", nargs="+", help="kvd binaries (release builds) to count")
    parser.add_argument("--op", choices=("get", "set"), action="append", help="only these (default: get and set)")
    parser.add_argument("--clients", type=int, default=1, help="connections, one call in flight on each (default 1)")
    parser.add_argument("--json", action="store_true", help="one JSON object a binary and op")
    parser.add_argument("--calls", type=int, nargs=2, metavar=("SMALL", "LARGE"), default=[SMALL, LARGE],
                        help=f"the two counts of calls whose difference is measured (default {SMALL} {LARGE})")
    parser.add_argument("--runs", type=int, default=2, help="runs of each count, the fewer instructions kept (default 2)")
    args = parser.parse_args()
    ops = args.op or ["get", "set"]
    with tempfile.TemporaryDirectory(prefix="kvd-callgrind-") as folder:
        for kvd in args.kvd:
            results = [measure(kvd, op, max(args.clients, 1), folder, *args.calls, args.runs) for op in ops]
            if args.json:
                for result in results:
                    print(json.dumps(result), flush=True)
                continue
            cells = [f"{r['op']} {r['loop_per_call']:,.0f} on the loop, {r['all_threads_per_call']:,.0f} in all threads"
                     f" (loop's whole run of {r['calls']}: {r['loop_whole_run']:,})" for r in results]
            print(f"{kvd}: instructions per call, {results[0]['clients']} client(s): " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
