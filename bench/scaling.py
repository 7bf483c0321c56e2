"""The scaling rows of make bench: Get and durable Set at 1, 10, 50, 200 and 1,000
clients, kvd beside Redis (`appendfsync always`), so a reader sees how each grows.

The same kvbench drives both (1 client: a blocking thread; more: one epoll thread, one call in
flight on each connection); the servers are the bench's own kvd and Redis, on the servers' CPU.
Each client reads or writes its own key of 100 bytes. (A user's kvd has no cap on connections;
the system instance's per-user cap, `--max-connections-per-uid`, does not apply here.) The rows for 1 and 50 clients are the
main get and durable-set rows' own measurements, not measured twice.
"""

CLIENTS = (1, 10, 50, 200, 1000)
QUICK_CLIENTS = (1, 10, 50, 200)  # the smoke mode: a few connections fewer, same code paths


class ScalingRows:
    def __init__(self, bench):
        self.bench = bench

    def run(self, sock, measured, redis_sock):
        """`sock`: the bench's kvd. `measured`: (op, clients) -> (kvd summary, Redis summary or None) from the main rows,
        reused for 1 and 50 clients. Adds the other counts' rows, then one row of ratios a client
        count in `bench.scaling` for the table and the chart. Returns `measured` with every count's
        summaries added (the tail rows reuse the durable Set's)."""
        bench = self.bench
        counts = QUICK_CLIENTS if bench.quick else CLIENTS
        measured = dict(measured)
        for op, name, peer in (("get", "Get", "GET"), ("set", "Set (fsync)", "SET appendfsync always")):
            for clients in counts:
                if (op, clients) in measured:
                    mine, theirs = measured[(op, clients)]
                else:
                    row = f"scaling {op}, {clients:,} clients"
                    subjects = [(f"kvd {name}", bench.kvbench(sock, "varlink", op, clients))]
                    if redis_sock:
                        subjects.append((f"Redis {peer}", bench.kvbench(redis_sock, "resp", op, clients)))
                    summaries = bench.interleave(row, subjects)
                    mine, theirs = summaries[0], (summaries[1] if redis_sock else None)
                    measured[(op, clients)] = (mine, theirs)
                bench.scaling.append({
                    "op": op, "clients": clients, "kvd_ops_per_s": mine["ops_per_s"], "kvd_p50_us": mine["p50_us"],
                    "kvd_p99_us": mine["p99_us"],
                    "redis_ops_per_s": theirs["ops_per_s"] if theirs else None,
                    "redis_p50_us": theirs["p50_us"] if theirs else None,
                    "redis_p99_us": theirs["p99_us"] if theirs else None,
                    "ratio": mine["ops_per_s"] / theirs["ops_per_s"] if theirs else None})
        for entry in bench.scaling:
            ratio = "n/a" if entry["ratio"] is None else f"{entry['ratio']:.2f}"
            print(f"  scaling {entry['op']:<3} {entry['clients']:>5} clients: kvd {entry['kvd_ops_per_s']:>9.0f}/s "
                  f"Redis {entry['redis_ops_per_s'] or 0:>9.0f}/s  kvd/Redis {ratio}", flush=True)
        return measured
