"""The fold-under-load row of make bench: what a fold of the log costs the writers acknowledged
meanwhile.

kvd folds its log into the domain and history files when the log passes 4 MiB
(`StoreOptions.compactionLogBytes`, Sources/KVStorage/Types.swift), on a thread of its own while
commits go on into `kvd.wal.next`, started as the fold starts (`WriteAheadLog.startFold`); when
the fold ends, `kvd.wal.next` is renamed over `kvd.wal` (`WriteAheadLog.promoteNext`), which
stops growing meanwhile. A fresh kvd takes a
durable Set load of 200 clients (one epoll thread; 100-byte values, about 190 bytes of log a
Set, so the log passes 4 MiB several times a run at this machine's rates; the smoke mode writes
4,000-byte values so that its short run folds too), while a thread of this process, pinned
beside the load generator, polls `kvd.wal` every millisecond:

- a fold's window opens when the file reaches 4 MiB. The file runs ahead of the log by the
  space reserved past its end (at most `StoreOptions.logReservationBytes`, 256 KiB), so the
  window opens at most that many bytes of records early, never late;
- it closes when `kvd.wal` is another file (a new inode: `kvd.wal.next` renamed over it at the
  fold's end), plus GRACE (the rename's directory sync, and the poll's period).

kvbench writes every call's start and latency (`--trace`); a call counts as during a fold when
it overlaps a window. Per run: the worst latency of a call during any fold, the median of each
fold's own worst, and the p99 of the calls during none. The row: the medians over the runs
(runs with no fold seen are left out of the first two, and say so). Target: worst during a fold
/ p99 without one at most 3.

Checked against kvd's own word once (2026-12-04, release build, a 2 s run with `kvd --verbose`,
which logs each fold's end: "folded the log into 1 domain files at revision ..."): 9 windows
seen, 9 such lines.
"""
import bisect
import os
import statistics
import threading
import time

FOLD_LOG_BYTES = 4 << 20  # kvd's StoreOptions.compactionLogBytes
CLIENTS = 200
VALUE_BYTES, QUICK_VALUE_BYTES = 100, 4000
QUICK_SECONDS = 0.5  # long enough for the smoke mode's debug build to fold once
POLL_SECONDS = 0.001
GRACE_NS = 5_000_000
GOAL = 3.0


class LogWatcher(threading.Thread):
    """Polls kvd's log file; `windows` holds (start, end) in `time.monotonic_ns()` (the clock of
    kvbench's trace) of each fold seen, end None for one still running when stopped."""

    def __init__(self, path, cpus):
        super().__init__(daemon=True)
        self.path, self.cpus = path, cpus
        self.windows = []
        self.stopping = threading.Event()

    def run(self):
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)  # this thread only
        inode, opened, last = None, None, time.monotonic_ns()
        while not self.stopping.is_set():
            moment = time.monotonic_ns()
            try:
                status = os.stat(self.path)
            except FileNotFoundError:
                time.sleep(POLL_SECONDS)
                continue
            if inode is not None and status.st_ino != inode:
                # Replaced: a fold ended (one that began before the file was seen that large
                # began at the latest at the poll before).
                self.windows.append((opened if opened is not None else last, moment))
                opened = None
            inode, last = status.st_ino, moment
            if opened is None and status.st_size >= FOLD_LOG_BYTES:
                opened = moment
            time.sleep(POLL_SECONDS)
        if opened is not None:
            self.windows.append((opened, None))

    def stop(self):
        self.stopping.set()
        self.join(timeout=5)


def split_calls(trace_path, windows):
    """The latencies (µs) of the calls in kvbench's trace that overlap a fold's window (widened
    by GRACE_NS at its end), the worst of each window's, and the latencies of the others; a
    window still open ends with the last call."""
    calls = []
    with open(trace_path) as trace:
        for line in trace:
            begin, latency = line.split()
            calls.append((int(begin), int(latency)))
    last_end = max((begin + latency for begin, latency in calls), default=0)
    spans = sorted((start, (end if end is not None else last_end) + GRACE_NS) for start, end in windows)
    starts = [start for start, _ in spans]
    during, outside, worst = [], [], [0] * len(spans)
    for begin, latency in calls:
        end = begin + latency
        # The last window starting before the call ended is the only one it can overlap
        # without overlapping a later one too: windows do not overlap each other.
        index = bisect.bisect_right(starts, end) - 1
        if index >= 0 and begin <= spans[index][1]:
            during.append(latency / 1000)
            worst[index] = max(worst[index], latency / 1000)
        else:
            outside.append(latency / 1000)
    return during, [w for w in worst if w], outside


def p99(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else None


class FoldRow:
    def __init__(self, bench):
        self.bench = bench

    def run(self):
        bench = self.bench
        _, sock = bench.start_kvd("kvd-fold")
        log = bench.path("kvd-fold-state") + "/kvd.wal"
        value_bytes = QUICK_VALUE_BYTES if bench.quick else VALUE_BYTES
        seconds = QUICK_SECONDS if bench.quick else bench.seconds
        runs, per_run = [], []
        for run in range(bench.runs):
            trace = bench.path(f"fold-trace-{run}")
            watcher = LogWatcher(log, bench.client_cpus)
            watcher.start()
            try:
                result = bench.run_json([bench.tool("kvbench"), "--socket", sock, "--op", "set", "--clients", str(CLIENTS),
                                         "--seconds", str(seconds), "--runs", "1", "--domain", "bench.fold",
                                         "--value-bytes", str(value_bytes), "--trace", trace, "--json"])[0]
            finally:
                watcher.stop()
            during, worst_each, outside = split_calls(trace, watcher.windows)
            os.remove(trace)
            lengths = [(end - start) / 1e6 for start, end in watcher.windows if end is not None]
            runs.append(result)
            per_run.append({"folds": len(watcher.windows), "window_ms": statistics.median(lengths) if lengths else None,
                            "worst_us": max(during) if during else None, "calls_during": len(during),
                            "worst_each_us": statistics.median(worst_each) if worst_each else None,
                            "p99_outside_us": p99(outside)})
        self.report(runs, per_run, value_bytes)

    def report(self, runs, per_run, value_bytes):
        bench = self.bench
        folded = [r for r in per_run if r["worst_us"] is not None]
        worst = statistics.median(r["worst_us"] for r in folded) if folded else None
        clean = [r["p99_outside_us"] for r in per_run if r["p99_outside_us"] is not None]
        quiet = statistics.median(clean) if clean else None
        windows = [r["window_ms"] for r in per_run if r["window_ms"] is not None]
        folds = sum(r["folds"] for r in per_run)
        each = [r["worst_each_us"] for r in folded if r["worst_each_us"] is not None]
        subject = f"kvd Set (fsync), {CLIENTS} clients, {value_bytes:,}-byte values"
        entry = bench.summarize("fold under load", subject, runs, folds=folds,
                                fold_window_ms=statistics.median(windows) if windows else None,
                                fold_worst_us=worst, fold_worst_median_us=statistics.median(each) if each else None,
                                nofold_p99_us=quiet,
                                runs_with_fold=len(folded), calls_during_folds=sum(r["calls_during"] for r in per_run))
        if worst is None or quiet is None:
            why = "no fold seen in any run (kvd.wal never reached 4 MiB and was replaced)" if worst is None else "every call overlapped a fold"
            bench.target("fold under load", "worst latency during a fold / p99 without one", None, GOAL, "<=", why)
            print(f"  fold under load: {why}", flush=True)
            return
        ratio = worst / quiet
        bench.target("fold under load", "worst latency during a fold / p99 without one", ratio, GOAL, "<=",
                     f"{folds} folds of a 4 MiB log seen in {len(folded)} of {len(per_run)} runs (kvd.wal replaced); "
                     f"worst during a fold {worst / 1000:.2f} ms (a fold's own worst, median "
                     f"{(entry['fold_worst_median_us'] or 0) / 1000:.2f} ms), p99 without {quiet / 1000:.2f} ms; "
                     f"a fold's window {entry['fold_window_ms'] or 0:.0f} ms")
        print(f"  fold under load: {folds} folds in {len(folded)}/{len(per_run)} runs, window {entry['fold_window_ms'] or 0:.0f} ms, "
              f"worst during a fold {worst:.0f} µs, p99 without {quiet:.0f} µs, ratio {ratio:.2f}", flush=True)
