"""The tail rows of make bench: the p99 (and the largest) latency of a durable Set at 50, 200
and 1,000 clients, kvd beside Redis (`appendfsync always`) in the same run, measured with both
of kvbench's generator modes.

- **one epoll thread** (`--mode epoll`, what every other many-client row uses): the scaling
  rows' own measurements, not measured twice.
- **a thread per connection** (`--mode threads`): each client a blocking thread, as separate
  client processes behave; measured here, kvd and Redis in turn, run by run.

A call's latency runs from its send until the generator has read its whole reply, for every
call of every client. In the epoll mode that includes the time a reply waited while the one
thread read the others'; in the thread mode, the time its thread waited to be scheduled. Target:
p99 kvd / p99 Redis at most 1.5 at 50 and 200 clients (1,000: reported).
"""

CLIENTS = (50, 200, 1000)
QUICK_CLIENTS = (50, 200)  # the smoke mode: the same code paths, fewer threads
GOALS = {50: 1.5, 200: 1.5}  # p99 kvd/Redis; other counts are reported
MODES = (("epoll", "one epoll thread"), ("threads", "a thread per connection"))
KVD, REDIS = "kvd Set (fsync)", "Redis SET appendfsync always"


class TailRows:
    def __init__(self, bench):
        self.bench = bench

    def run(self, sock, measured, redis_sock):
        """`sock`: the bench's kvd. `measured`: (op, clients) -> (kvd summary, Redis summary or
        None) from the scaling rows (the epoll mode). Adds the thread-mode rows, one entry per
        (mode, client count) to `bench.tail`, and the targets."""
        bench = self.bench
        counts = QUICK_CLIENTS if bench.quick else CLIENTS
        for mode, label in MODES:
            for clients in counts:
                if mode == "epoll" and ("set", clients) in measured:
                    mine, theirs = measured[("set", clients)]
                else:
                    subjects = [(KVD, bench.kvbench(sock, "varlink", "set", clients, mode=mode))]
                    if redis_sock:
                        subjects.append((REDIS, bench.kvbench(redis_sock, "resp", "set", clients, mode=mode)))
                    summaries = bench.interleave(f"durable set, {clients:,} clients, {label}", subjects)
                    mine, theirs = summaries[0], (summaries[1] if redis_sock else None)
                self.add(mode, label, clients, mine, theirs)

    def add(self, mode, label, clients, mine, theirs):
        bench = self.bench
        ratio = mine["p99_us"] / theirs["p99_us"] if theirs and theirs["p99_us"] else None
        bench.tail.append({
            "mode": mode, "clients": clients,
            "kvd_ops_per_s": mine["ops_per_s"], "kvd_p50_us": mine["p50_us"], "kvd_p99_us": mine["p99_us"],
            "kvd_max_us": mine.get("max_us"),
            "redis_ops_per_s": theirs["ops_per_s"] if theirs else None,
            "redis_p50_us": theirs["p50_us"] if theirs else None,
            "redis_p99_us": theirs["p99_us"] if theirs else None,
            "redis_max_us": theirs.get("max_us") if theirs else None,
            "p99_ratio": ratio})
        row = f"durable set tail, {clients:,} clients, {label}"
        goal = GOALS.get(clients)
        if theirs is None:
            bench.target(row, "p99 latency kvd/Redis", None, goal, "<=", "peer skipped")
        else:
            bench.target(row, "p99 latency kvd/Redis", ratio, goal, "<=",
                         f"kvd p99 {mine['p99_us'] / 1000:.2f} ms, max {(mine.get('max_us') or 0) / 1000:.2f} ms; "
                         f"Redis p99 {theirs['p99_us'] / 1000:.2f} ms, max {(theirs.get('max_us') or 0) / 1000:.2f} ms")
        peer = f"Redis p99 {theirs['p99_us']:>9.0f} µs  kvd/Redis {ratio:.2f}" if theirs else "Redis skipped"
        print(f"  tail {clients:>5} clients, {label:<24} kvd p99 {mine['p99_us']:>9.0f} µs  {peer}", flush=True)
