"""The fleet rows of make bench: kvd's system instances mirroring a real etcd cluster.

- fleet propagation: a Set on host A's system instance until the Watch reply on host B's, beside
  etcd's own put until its watch event through the same gateway client (kvbench-fleet), in the
  same run, interleaved (target: kvd at most 2 times etcd, p50).
- fleet first listing: a fresh system instance started until it has mirrored 10,000 fleet keys,
  beside `etcdctl get --prefix` of the same keys (both from process start; target: at most 2 times).

The cluster has 3 members on 127.0.0.1 (1 in the smoke mode), data on disk, fsync on, as etcd
runs in production; its folders live in the bench's temporary folder.
"""
import os
import shutil
import socket
import statistics
import subprocess
import time


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class FleetRows:
    def __init__(self, bench):
        self.bench = bench
        self.members = 1 if bench.quick else 3
        self.keys = 200 if bench.quick else 10_000

    def available(self):
        missing = [tool for tool in ("etcd", "etcdctl") if not shutil.which(tool)]
        if missing:
            self.bench.skip("fleet rows", f"{' and '.join(missing)} not installed (scripts/install-deps.sh installs etcd-server and etcd-client)")
            return False
        if "etcd" in self.bench.skipped:
            self.bench.skip("fleet rows", "BENCH_SKIP=etcd")
            return False
        return True

    def start_cluster(self):
        ports = free_ports(2 * self.members)
        client = [f"http://127.0.0.1:{ports[2 * i]}" for i in range(self.members)]
        peer = [f"http://127.0.0.1:{ports[2 * i + 1]}" for i in range(self.members)]
        cluster = ",".join(f"m{i}={peer[i]}" for i in range(self.members))
        for i in range(self.members):
            log = open(self.bench.path(f"etcd-m{i}.log"), "wb")
            proc = subprocess.Popen(
                ["etcd", "--name", f"m{i}", "--data-dir", self.bench.path(f"etcd-m{i}"),
                 "--listen-client-urls", client[i], "--advertise-client-urls", client[i],
                 "--listen-peer-urls", peer[i], "--initial-advertise-peer-urls", peer[i],
                 "--initial-cluster", cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", os.path.basename(self.bench.dir),
                 "--experimental-watch-progress-notify-interval", "5s", "--logger", "zap", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, preexec_fn=self.bench.pinned(self.bench.server_cpus))
            self.bench.children.append(proc)
        self.endpoints = ",".join(client)
        self.env = dict(self.bench.env, ETCDCTL_API="3")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if subprocess.run(["etcdctl", "--endpoints", self.endpoints, "endpoint", "health"], env=self.env,
                              capture_output=True, timeout=30).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError("etcd did not become healthy within 30 s (see etcd-m*.log)")

    def start_host(self, name):
        folder = self.bench.path(name)
        os.makedirs(folder, mode=0o755, exist_ok=True)
        sock = os.path.join(folder, "system.sock")
        self.bench.start([self.bench.tool("kvd"), "--system", "--socket", sock, "--state-dir", os.path.join(folder, "state"),
                          "--etcd", self.endpoints, "--fleet-domain", "com.corp.*", "--etcd-progress-interval", "5"], sock, name)
        return sock

    def fleet(self, *args):
        return [self.bench.tool("kvbench-fleet")] + list(args) + ["--etcd", self.endpoints, "--seconds", str(self.bench.seconds)]

    def run(self):
        if not self.available():
            return
        self.start_cluster()
        a, b = self.start_host("fleet-host-a"), self.start_host("fleet-host-b")
        row = "fleet propagation"
        kvd, etcd = self.bench.interleave(row, [
            ("kvd Set on host A to Watch on host B", (lambda: self.bench.run_json(self.fleet("propagation", "--subject", "kvd", "--from", a, "--to", b))[0], None)),
            ("etcd put to watch, same gateway", (lambda: self.bench.run_json(self.fleet("propagation", "--subject", "etcd"))[0], None))])
        self.bench.target(row, "p50 latency kvd/etcd", kvd["p50_us"] / etcd["p50_us"], 2.0, "<=")

        self.bench.run_json(self.fleet("populate", "--keys", str(self.keys)), timeout=300)
        row = "fleet first listing"
        mine, theirs = [], []
        for _ in range(self.bench.runs):
            mine.append(self.bench.run_json(self.fleet("first-listing", "--kvd", self.bench.tool("kvd"), "--dir", self.bench.dir))[0]["seconds"])
            theirs.append(self.time_etcdctl())
        kvd_s, etcdctl_s = statistics.median(mine), statistics.median(theirs)
        for subject, runs in ((f"kvd system instance, first listing of {self.keys:,} keys", mine),
                              (f"etcdctl get --prefix of the same keys", theirs)):
            self.bench.rows.append({"row": row, "subject": subject, "runs": len(runs), "ms": statistics.median(runs) * 1000,
                                    "ms_min": min(runs) * 1000, "ms_max": max(runs) * 1000})
            print(f"  {row:<22} {subject:<50} {statistics.median(runs) * 1000:8.1f} ms [{min(runs) * 1000:.1f}–{max(runs) * 1000:.1f}]", flush=True)
        self.bench.target(row, "time kvd/etcdctl", kvd_s / etcdctl_s, 2.0, "<=", "both from process start")

    def time_etcdctl(self):
        begin = time.perf_counter()
        done = subprocess.run(["etcdctl", "--endpoints", self.endpoints, "get", "--prefix", "kvd/values/com.corp.bench/"],
                              env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                              preexec_fn=self.bench.pinned(self.bench.client_cpus))
        elapsed = time.perf_counter() - begin
        if done.returncode != 0:
            raise RuntimeError(f"etcdctl get failed: {done.stderr.decode()[:300]}")
        return elapsed
