#!/usr/bin/env python3
"""kvd's memory around the fold of the memory row's populate, binaries side by side:

    bench/foldmemory.py [--keys 100000] [--runs 3] [--sets N] KVD [KVD ...]

For each kvd binary, `--runs` times (binaries alternating, each run on a fresh state folder):
starts it as `make bench` does (`--idle-exit 0 --no-system-layer`), writes `--keys` keys of
100 bytes in domains of 1,000 keys as `kvbench --op populate` does (varlink `Apply` of 500
keys a call, one connection), and reads /proc/PID/status: VmRSS and RssAnon right after the
populate (the memory row's figure, often during the fold of its last 4 MiB of log), VmHWM (the
peak RSS of the whole run, which a fold under way raises), and VmRSS once no fold runs
(`kvd.wal.next` gone, then 0.2 s). Prints each run and the median of each figure, in KiB.

`--sets N`: instead of the populate, N durable Sets of 100 bytes from 50 connections, a key per
connection (the load of `bench/callgrind.py --op set --clients 50`): with 60,000, three folds,
the domain's history file at its 1 MiB bound from the second on (each rewrites it).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from callgrind import message, read_reply

PAYLOAD = "x" * 100


def call(sock, method, parameters):
    sock.sendall(message(method, parameters))
    read_reply(sock, method)


def status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "RssAnon", "VmHWM"):
                fields[name] = int(rest.split()[0])
    return fields


def drive(path, count, clients=50):
    socks = []
    for _ in range(clients):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        socks.append(sock)
    sent = 0
    while sent < count:
        batch = socks[:count - sent]
        for index, sock in enumerate(batch):
            text = json.dumps({"method": "io.kvd.Defaults.Set", "parameters": {
                "domain": "bench.kvd", "key": f"k{index}", "value": PAYLOAD + str((sent + index) % 10)}})
            sock.sendall(text.encode() + b"\0")
        for sock in batch:
            reply = b""
            while not reply.endswith(b"\0"):
                reply += sock.recv(65536)
        sent += len(batch)
    for sock in socks:
        sock.close()


def run(kvd, keys, folder, sets=0):
    state, path = os.path.join(folder, "state"), os.path.join(folder, "kvd.sock")
    proc = subprocess.Popen([kvd, "--socket", path, "--state-dir", state, "--idle-exit", "0", "--no-system-layer"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 10
        while True:
            try:
                sock.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if sets:
            drive(path, sets)
        for domain in range(0 if sets else (keys + 999) // 1000):
            for first in range(0, 1000, 500):
                changes = [{"key": f"p{index}", "value": PAYLOAD} for index in range(first, first + 500)]
                call(sock, "Apply", {"domain": f"bench.mem.{domain}", "changes": changes})
        after = status(proc.pid)
        deadline = time.monotonic() + 10
        while os.path.exists(os.path.join(state, "kvd.wal.next")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        settled = status(proc.pid)
        sock.close()
        return {"rss": after["VmRSS"], "anon": after["RssAnon"], "peak": settled["VmHWM"], "settled": settled["VmRSS"]}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kvd", nargs="+")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sets", type=int, default=0, help="durable Sets from 50 connections instead of the populate")
    args = parser.parse_args()
    results = {kvd: [] for kvd in args.kvd}
    with tempfile.TemporaryDirectory(prefix="kvd-foldmemory-") as top:
        for index in range(args.runs):
            for kvd in args.kvd:
                result = run(kvd, args.keys, tempfile.mkdtemp(dir=top), args.sets)
                results[kvd].append(result)
                print(f"{kvd} run {index + 1}: " + ", ".join(f"{k} {v} KiB" for k, v in result.items()), flush=True)
    for kvd, runs in results.items():
        medians = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
        print(f"{kvd} median of {len(runs)}: RSS after the populate {medians['rss']:.0f} KiB (RssAnon "
              f"{medians['anon']:.0f}), peak (VmHWM) {medians['peak']:.0f}, once no fold runs {medians['settled']:.0f}")


if __name__ == "__main__":
    sys.exit(main())
