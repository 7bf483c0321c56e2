"""The blame rows of make bench: what knowing who made each change costs.

kvd reads who is on the other end of a connection once, when it accepts it: what a sandboxed
app's confinement depends on and what history records (`PeerProcess.begin`: `SO_PEERCRED`, a
pidfd, `/proc/PID/exe` and its root's device, inode and mount, then the pidfd's
cgroup id, which also says the process still runs; `cgroup` read once a cgroup, and
`/.flatpak-info` looked for only in a root that is not kvd's, off the loop); it writes that into the log record and the history line of every change (`Writer`, Sources/KVValues/Writer.swift). Two fresh kvds alike but for that, one started with
`KVD_BENCH_NO_WRITERS=1` (read nowhere else; it exists for this comparison: that kvd reads the
credentials alone, as before it knew its peers, records no writer and confines no sandbox), take
in turn:

- connection setup: a fresh connection, one durable Set on it, close (the Set pays the
  identification, once per connection), driven by this process, one connection after another,
  to the two kvds in turn connection by connection (so that the disk's drift falls on both);
- durable Set, 1 client: one connection to each kvd (identified once, then free), durable Sets
  driven by this process to the two in turn, Set by Set, for the same reason.

Targets: each within 1.1x (with blame / without, in time per operation). And the history bytes per
change: a fresh pair of kvds gets CHANGES Sets of distinct keys from this process, is stopped (a
stop folds the log into history), and its history file's size is divided by CHANGES; the
difference is what a writer adds to a change (documented in docs/reference/on-disk-format.md).
"""
import os
import socket
import statistics
import time

GOAL = 1.1
CHANGES = 200


def varlink_set(conn, domain, key, value):
    conn.sendall(('{"method":"io.kvd.Defaults.Set","parameters":{"domain":"%s","key":"%s","value":%d}}'
                  % (domain, key, value)).encode() + b"\0")
    reply = b""
    while not reply.endswith(b"\0"):
        chunk = conn.recv(4096)
        if not chunk:
            raise RuntimeError("kvd closed the connection")
        reply += chunk
    if b'"error"' in reply:
        raise RuntimeError(f"Set failed: {reply[:200]!r}")


class BlameRows:
    def __init__(self, bench):
        self.bench = bench

    def start_pair(self, tag):
        """Two fresh kvds alike but for writer records: (with, without) sockets and processes."""
        servers = []
        for name, extra in ((f"kvd-blame-{tag}", {}), (f"kvd-noblame-{tag}", {"KVD_BENCH_NO_WRITERS": "1"})):
            sock = self.bench.path(name + ".sock")
            env = dict(self.bench.env, **extra)
            proc = self.bench.start([self.bench.tool("kvd"), "--socket", sock, "--state-dir", self.bench.path(name + "-state"),
                                     "--idle-exit", "0", "--no-system-layer"], sock, name, env=env)
            servers.append((proc, sock, self.bench.path(name + "-state")))
        return servers

    def alternated(self, on_sock, off_sock, fresh):
        """Both subjects at once, one operation to each in turn, for `seconds` a run: the disk's
        drift (an fdatasync's time varies by the second here) falls on both alike. An operation
        is one durable Set: on a fresh connection, closed after it (`fresh`: connection setup),
        or on one connection to each kvd kept for the run. Per subject: its rate in the time it
        took, p50 and p99."""
        latencies = ([], [])
        # This process is the client here: on the clients' core, as kvbench is (the servers have
        # theirs), then back where it was.
        allowed = os.sched_getaffinity(0)
        if self.bench.client_cpus:
            os.sched_setaffinity(0, self.bench.client_cpus)
        try:
            self.drive(on_sock, off_sock, latencies, fresh)
        finally:
            os.sched_setaffinity(0, allowed)
        runs = []
        for taken in latencies:
            taken.sort()
            runs.append({"ops": len(taken), "ops_per_s": len(taken) / (sum(taken) / 1e6),
                         "p50_us": statistics.median(taken),
                         "p99_us": taken[min(len(taken) - 1, int(len(taken) * 0.99))]})
        return runs

    def drive(self, on_sock, off_sock, latencies, fresh):
        """Operations in turn to the two kvds for `seconds` (see `alternated`), each one's time in
        µs appended to `latencies` (with writers, without)."""
        kept = [] if fresh else [socket.socket(socket.AF_UNIX) for _ in range(2)]
        try:
            for conn, sock in zip(kept, (on_sock, off_sock)):
                conn.connect(sock)
            start, n = time.monotonic(), 0
            while time.monotonic() - start < self.bench.seconds:
                for index in ((0, 1) if n % 2 else (1, 0)):
                    began = time.monotonic_ns()
                    if fresh:
                        with socket.socket(socket.AF_UNIX) as conn:
                            conn.connect((on_sock, off_sock)[index])
                            varlink_set(conn, "bench.blame", "k", n)
                    else:
                        varlink_set(kept[index], "bench.blame-set", "k", n)
                    latencies[index].append((time.monotonic_ns() - began) / 1000)
                n += 1
        finally:
            for conn in kept:
                conn.close()

    def run(self):
        bench = self.bench
        (on, on_sock, _), (off, off_sock, _) = self.start_pair("speed")
        both = [self.alternated(on_sock, off_sock, fresh=True) for _ in range(bench.runs)]
        setup_on = bench.summarize("connection setup + Set", "kvd, writers recorded", [run[0] for run in both])
        setup_off = bench.summarize("connection setup + Set", "kvd, writers off", [run[1] for run in both])
        bench.target("blame: connection setup", "time per connection+Set, writers on/off",
                     setup_off["ops_per_s"] / setup_on["ops_per_s"], GOAL, "<=")
        # The mean above moves with the disk's stalls (which fall on either kvd at random); the
        # median does not: reported beside it, with what identification adds a connection.
        note = (f"connection setup + Set, medians: {setup_on['p50_us']:.0f} µs with writers, "
                f"{setup_off['p50_us']:.0f} without (ratio {setup_on['p50_us'] / setup_off['p50_us']:.3f}, "
                f"+{setup_on['p50_us'] - setup_off['p50_us']:.0f} µs a connection)")
        bench.notes.append(note)
        print(f"  {note}", flush=True)
        sets = [self.alternated(on_sock, off_sock, fresh=False) for _ in range(bench.runs)]
        set_on = bench.summarize("durable set, blame", "kvd Set (fsync), writers recorded", [run[0] for run in sets])
        set_off = bench.summarize("durable set, blame", "kvd Set (fsync), writers off", [run[1] for run in sets])
        bench.target("blame: durable set", "time per Set, writers on/off",
                     set_off["ops_per_s"] / set_on["ops_per_s"], GOAL, "<=")
        bench.stop(on)
        bench.stop(off)
        self.history_bytes()

    def history_bytes(self):
        """History bytes per change with and without writers (reported, and the difference)."""
        bench = self.bench
        sizes = []
        for proc, sock, state in self.start_pair("size"):
            with socket.socket(socket.AF_UNIX) as conn:
                conn.connect(sock)
                for n in range(CHANGES):
                    varlink_set(conn, "bench.size", f"key{n:04d}", n)
            bench.stop(proc)  # folds the log into the history file
            sizes.append(os.path.getsize(os.path.join(state, "bench.size.history")) / CHANGES)
        with_writer, without = sizes
        bench.notes.append(f"history bytes per change: {with_writer:.0f} with writers, {without:.0f} without "
                           f"(+{with_writer - without:.0f}: a python3 client's writer)")
        print(f"  history bytes per change: {with_writer:.0f} with writers, {without:.0f} without", flush=True)
        bench.target("blame: history size", "bytes a writer adds to a history line (bound 1,592)",
                     with_writer - without, 1592, "<=")
