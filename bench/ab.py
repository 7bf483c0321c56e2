#!/usr/bin/env python3
"""Two kvd binaries side by side on make bench's get and durable set rows (1 and 50 clients),
run by run in turn (A, B, A, B, ...) so the machine's other load falls on both alike.

    bench/ab.py KVBENCH KVD_A KVD_B [RUNS] [ROW ...]     (a ROW is op:clients[:mode], e.g. set:50
                                                          or set:200:threads; mode epoll unless told)

Prints, per row, each binary's median throughput, p50 and p99 over RUNS runs of 2 s, the largest
latency of all its runs, and B/A of the throughputs and of the p99s.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def start(kvd, folder, name):
    sock = os.path.join(folder, name + ".sock")
    proc = subprocess.Popen([kvd, "--socket", sock, "--state-dir", os.path.join(folder, name + "-state"), "--idle-exit", "0",
                             "--no-system-layer"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not os.path.exists(sock):
        time.sleep(0.05)
    return proc, sock


def parse_row(row):
    """op:clients[:mode] -> (op, clients, mode)."""
    parts = row.split(":")
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else "epoll"


def main():
    kvbench, kvd_a, kvd_b = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    rows = [parse_row(row) for row in sys.argv[5:]] or [(op, n, "epoll") for op in ("get", "set") for n in (1, 50)]
    with tempfile.TemporaryDirectory(prefix="kvd-ab-") as folder:
        servers = {"A": start(kvd_a, folder, "a"), "B": start(kvd_b, folder, "b")}
        try:
            for op, clients, mode in rows:
                if True:
                    results = {"A": [], "B": []}
                    for _ in range(runs):
                        for name in ("A", "B"):
                            out = subprocess.run([kvbench, "--socket", servers[name][1], "--op", op, "--clients", str(clients),
                                                  "--mode", mode, "--seconds", "2", "--json"],
                                                 capture_output=True, text=True, check=True).stdout
                            results[name].append(json.loads(out.strip().splitlines()[-1]))
                    a = statistics.median(r["ops_per_s"] for r in results["A"])
                    b = statistics.median(r["ops_per_s"] for r in results["B"])
                    pa = statistics.median(r["p50_us"] for r in results["A"])
                    pb = statistics.median(r["p50_us"] for r in results["B"])
                    qa = statistics.median(r["p99_us"] for r in results["A"])
                    qb = statistics.median(r["p99_us"] for r in results["B"])
                    ma = max(r.get("max_us", 0) for r in results["A"])
                    mb = max(r.get("max_us", 0) for r in results["B"])
                    print(f"{op} {clients:>2} clients ({mode}): A {a:>8.0f}/s p50 {pa:6.1f} p99 {qa:7.0f} max {ma:7.0f} µs   "
                          f"B {b:>8.0f}/s p50 {pb:6.1f} p99 {qb:7.0f} max {mb:7.0f} µs   B/A {b / a:.2f}, p99 {qb / qa:.2f}", flush=True)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()
