#!/usr/bin/env python3
"""Instructions kvd executes per Get and per durable Set, counted by callgrind (user space only,
deterministic, unlike timings on a shared machine).

    bench/callgrind.py KVD [KVD ...]

For each kvd binary: runs it under `valgrind --tool=callgrind` with a fresh state folder, sends
SMALL and then LARGE calls of each kind on one connection (a separate kvd run for each count),
and prints (instructions(LARGE) - instructions(SMALL)) / (LARGE - SMALL) per call, so start-up,
the first call's allocations and shutdown cancel out. Only the event loop's thread is counted:
the compaction thread folds the log when its timer says, which made whole-process Set counts
vary by a third between runs. Compare binaries built side by side (for
example with and without a build flag) in one invocation; the numbers are for one client.
"""
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


def call(sock, method, parameters):
    message = json.dumps({"method": "io.kvd.Defaults." + method, "parameters": parameters}, separators=(",", ":"))
    sock.sendall(message.encode() + b"\0")
    reply = b""
    while not reply.endswith(b"\0"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("kvd closed the connection")
        reply += chunk
    decoded = json.loads(reply[:-1])
    if "error" in decoded:
        raise RuntimeError(f"{method}: {decoded}")


def instructions(kvd, op, count, folder, run=1):
    name = f"{op}-{count}-{run}"
    state, sock_path = os.path.join(folder, f"state-{name}"), os.path.join(folder, f"kvd-{name}.sock")
    out = os.path.join(folder, f"callgrind-{name}.out")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}", kvd, "--socket", sock_path,
                             "--state-dir", state, "--idle-exit", "0", "--no-system-layer"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not os.path.exists(sock_path):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{kvd} did not start under valgrind")
        time.sleep(0.1)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for _ in range(100):
        try:
            sock.connect(sock_path)
            break
        except OSError:
            time.sleep(0.1)
    call(sock, "Set", {"domain": "bench.kvd", "key": "k0", "value": PAYLOAD})
    for index in range(count):
        if op == "get":
            call(sock, "Get", {"domain": "bench.kvd", "key": "k0"})
        else:
            call(sock, "Set", {"domain": "bench.kvd", "key": "k0", "value": PAYLOAD + str(index % 10)})
    sock.close()
    proc.terminate()
    proc.wait(timeout=120)
    # Thread 1 is the event loop; the others (compaction, the system mirror) run when their
    # timers say, so counting them would make the numbers vary between runs.
    with open(out + "-01") as file:
        for line in file:
            match = re.match(r"(?:summary|totals): (\d+)", line)
            if match:
                return int(match.group(1))
    raise RuntimeError(f"no totals in {out}-01")


def main():
    binaries = sys.argv[1:]
    if not binaries:
        print(__doc__)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="kvd-callgrind-") as folder:
        for kvd in binaries:
            row = []
            for op in ("get", "set"):
                # The fewest of two runs: a run now and then takes an extra pass of the loop
                # (about 20,000 instructions a Set more, over the whole run) as its timing falls.
                small = min(instructions(kvd, op, SMALL, folder, run) for run in (1, 2))
                large = min(instructions(kvd, op, LARGE, folder, run) for run in (1, 2))
                row.append(f"{op} {(large - small) / (LARGE - SMALL):,.0f} (whole run of {LARGE}: {large:,})")
            print(f"{kvd}: instructions per call, " + ", ".join(row))


if __name__ == "__main__":
    main()
