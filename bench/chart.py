"""The Markdown table and the hand-written SVG bar chart of bench/results.json."""
from html import escape


def fmt(value, digits=0):
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def fmt_load(values):
    return "unknown" if not values else " / ".join(f"{v:.2f}" for v in values)


def measure_cell(row):
    """What a row measured, whatever its kind."""
    if "ops_per_s" in row:
        return (f"{fmt(row['ops_per_s'])} ops/s [{fmt(row['ops_per_s_min'])}–{fmt(row['ops_per_s_max'])}]",
                fmt(row["p50_us"], 1), fmt(row["p99_us"], 1))
    if "ns_per_op" in row:
        spread = f" [{fmt(row['ns_min'], 1)}–{fmt(row['ns_max'], 1)}]" if "ns_min" in row else ""
        return f"{fmt(row['ns_per_op'], 1)} ns/op{spread}", "", ""
    if "ms" in row:
        return f"{fmt(row['ms'], 2)} ms [{fmt(row['ms_min'], 2)}–{fmt(row['ms_max'], 2)}]", "", ""
    if "rss_kib" in row:
        anon = f"; anonymous {fmt(row['rss_anon_kib'] / 1024, 1)} MiB" if "rss_anon_kib" in row else ""
        return f"{fmt(row['rss_kib'] / 1024, 1)} MiB RSS (empty: {fmt(row['rss_empty_kib'] / 1024, 1)} MiB{anon})", "", ""
    return "", "", ""


def markdown(result):
    m = result["machine"]
    lines = [
        f"# kvd benchmark — {result['date']}",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}, {m['os']}; {m['swift']}; {m['redis'] or 'no Redis'}.",
        f"Load average (1, 5, 15 min) at the start {fmt_load(m.get('loadavg_start'))}, at the end {fmt_load(result.get('loadavg_end'))}: "
        "anything else running on the machine shows in the numbers; subjects of a row are measured in turn, run by run.",
        f"Each measurement: median of {result['runs']} run(s) of {result['seconds_per_run']} s, [min–max] across runs."
        + (" **Smoke mode (BENCH_QUICK=1): numbers are not meaningful.**" if result["quick"] else ""),
        "Load generator (kvbench, the same for every server): 1 client is a blocking thread; 50 clients are 50 "
        "non-blocking connections on one epoll thread, one call in flight on each (rows marked \"a thread per connection\": a "
        "blocking thread each); its own CPU per call is in the last column. "
        "The raw ping-pong row is that generator against an echo server (a thread per connection): with 1 client the "
        "physical limit of a Unix-socket round trip; with 50 the generator's ceiling is at least the highest rate of the row. "
        + (f"Servers run on CPU {result['server_cpus']}, load generators and in-process rows on CPU {result['client_cpus']} "
              "(whole-process rows, shell and cold start, are not pinned)." if result.get("server_cpus")
           else "Nothing is pinned to a CPU."),
        "",
        "| row | subject | measure | p50 µs | p99 µs | extra |",
        "|---|---|---|---:|---:|---|",
    ]
    for row in result["rows"]:
        cell, p50, p99 = measure_cell(row)
        extra = []
        if "write_bytes_per_op" in row:
            extra.append(f"{fmt(row['write_bytes_per_op'])} B written/op")
        if "max_us" in row:
            extra.append(f"max {fmt(row['max_us'])} µs")
        if "folds" in row:
            extra.append(fold_cell(row))
        if "loadgen_cpu_us_per_op" in row:
            extra.append(f"load generator {fmt(row['loadgen_cpu_us_per_op'], 1)} µs CPU/op")
        lines.append(f"| {row['row']} | {row['subject']} | {cell} | {p50} | {p99} | {'; '.join(extra)} |")
    lines += ["", "## Targets (ratio kvd/peer unless said)", "", "| row | measure | ratio | target | met |", "|---|---|---:|---|---|"]
    for t in result["targets"]:
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        ratio = "—" if t["ratio"] is None else f"{t['ratio']:,.2f}"
        target = "reported" if t["row"] == "raw limit" or t["target"] == "reported" else t["target"]
        lines.append(f"| {t['row']} | {t['measure']} | {ratio} | {target} | {met}{' — ' + t['note'] if t['note'] else ''} |")
    lines += scaling_markdown(result.get("scaling") or [])
    lines += tail_markdown(result.get("tail") or [])
    if result["notes"]:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in result["notes"]]
    return "\n".join(lines) + "\n"


def scaling_markdown(scaling):
    """The scaling rows (bench/scaling.py) as one table: a line per client count."""
    if not scaling:
        return []
    lines = ["", "## Scaling: throughput by client count (kvd beside Redis)", "",
             "| clients | kvd Get/s | Redis GET/s | kvd/Redis | kvd Set (fsync)/s | Redis SET (always)/s | kvd/Redis |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    by = {(e["op"], e["clients"]): e for e in scaling}
    for clients in sorted({e["clients"] for e in scaling}):
        cells = []
        for op in ("get", "set"):
            e = by.get((op, clients))
            cells += ["—"] * 3 if e is None else [
                fmt(e["kvd_ops_per_s"]), fmt(e["redis_ops_per_s"]), "—" if e["ratio"] is None else f"{e['ratio']:.2f}"]
        lines.append(f"| {clients:,} | " + " | ".join(cells) + " |")
    return lines


def fold_cell(row):
    """The fold-under-load row's findings (bench/fold.py)."""
    if not row.get("runs_with_fold"):
        return "no fold seen"
    return (f"{row['folds']} folds seen in {row['runs_with_fold']} of {row['runs']} runs, a window {fmt(row['fold_window_ms'])} ms; "
            f"worst call during a fold {fmt(row['fold_worst_us'])} µs (a fold's own worst, median {fmt(row.get('fold_worst_median_us'))} µs), "
            f"p99 of the others {fmt(row['nofold_p99_us'])} µs")


def tail_markdown(tail):
    """The tail rows (bench/tail.py): durable Set p99 by client count and generator mode."""
    if not tail:
        return []
    lines = ["", "## Tail: durable Set latency by client count and generator mode (kvd beside Redis)", "",
             "| clients | generator | kvd Set/s | kvd p99 µs | kvd max µs | Redis SET/s | Redis p99 µs | Redis max µs | p99 kvd/Redis |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    label = {"epoll": "one epoll thread", "threads": "a thread per connection"}
    for e in sorted(tail, key=lambda e: (e["clients"], e["mode"])):
        ratio = "—" if e["p99_ratio"] is None else f"{e['p99_ratio']:.2f}"
        lines.append(f"| {e['clients']:,} | {label.get(e['mode'], e['mode'])} | {fmt(e['kvd_ops_per_s'])} | {fmt(e['kvd_p99_us'])} | "
                     f"{fmt(e['kvd_max_us'])} | {fmt(e['redis_ops_per_s'])} | {fmt(e['redis_p99_us'])} | {fmt(e['redis_max_us'])} | {ratio} |")
    return lines


def scaling_svg(scaling, top, width):
    """A panel of four lines (kvd and Redis, Get and durable Set) over the client counts, on a
    logarithmic axis; returns its SVG elements and its height."""
    if not scaling:
        return [], 0
    import math
    counts = sorted({e["clients"] for e in scaling})
    left, plot_w, plot_h = 80, width - 300, 220
    peak = max(max(e["kvd_ops_per_s"], e["redis_ops_per_s"] or 0) for e in scaling) or 1
    span = math.log10(max(counts)) - math.log10(min(counts)) or 1
    def x(c):
        return left + plot_w * (math.log10(c) - math.log10(min(counts))) / span
    def y(v):
        return top + 30 + plot_h * (1 - v / peak)
    out = [f'<text x="10" y="{top + 14}" font-weight="bold" font-size="12">scaling: throughput (ops/s) by client count, '
           'kvd beside Redis (higher is better)</text>',
           f'<line x1="{left}" y1="{y(0):.1f}" x2="{left + plot_w}" y2="{y(0):.1f}" stroke="#999"/>',
           f'<line x1="{left}" y1="{y(0):.1f}" x2="{left}" y2="{y(peak):.1f}" stroke="#999"/>',
           f'<text x="{left - 6}" y="{y(peak) + 4:.1f}" text-anchor="end">{fmt(peak)}</text>',
           f'<text x="{left - 6}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>']
    for c in counts:
        out.append(f'<text x="{x(c):.1f}" y="{y(0) + 14:.1f}" text-anchor="middle">{c:,}</text>')
    series = [("kvd Get", "get", "kvd_ops_per_s", "#2b6cb0", ""), ("Redis GET", "get", "redis_ops_per_s", "#dd6b20", ""),
              ("kvd Set (fsync)", "set", "kvd_ops_per_s", "#2b6cb0", ' stroke-dasharray="5,3"'),
              ("Redis SET (always)", "set", "redis_ops_per_s", "#dd6b20", ' stroke-dasharray="5,3"')]
    for index, (name, op, key, colour, dash) in enumerate(series):
        points = [(x(e["clients"]), y(e[key])) for e in sorted(scaling, key=lambda e: e["clients"])
                  if e["op"] == op and e[key] is not None]
        if points:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        ly = top + 40 + index * 16
        out.append(f'<line x1="{left + plot_w + 20}" y1="{ly}" x2="{left + plot_w + 50}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{left + plot_w + 56}" y="{ly + 4}">{escape(name)}</text>')
    return out, plot_h + 60


COLORS = {"kvd": "#2b6cb0", "kvctl": "#2b6cb0", "KVDefaults": "#2b6cb0", "raw": "#718096"}


def color(subject):
    for prefix, value in COLORS.items():
        if subject.startswith(prefix):
            return value
    return "#dd6b20"


def svg(result):
    """Three panels (throughput, p50, p99); each row's bars scaled to that row's largest value."""
    groups = []
    for row in result["rows"]:
        if "ops_per_s" not in row:
            continue
        if not groups or groups[-1][0] != row["row"]:
            groups.append((row["row"], []))
        groups[-1][1].append(row)
    panels = [("throughput (ops/s, higher is better)", "ops_per_s", 0), ("p50 latency (µs)", "p50_us", 1),
              ("p99 latency (µs)", "p99_us", 1)]
    others = []  # rows with one measure each: (row, [(subject, value, unit)])
    for row in result["rows"]:
        for key, unit, scale, digits in (("ns_per_op", "ns/read", 1, 0), ("ms", "ms", 1, 2), ("rss_kib", "MiB RSS", 1 / 1024, 1)):
            if key in row:
                if not others or others[-1][0] != row["row"]:
                    others.append((row["row"], []))
                others[-1][1].append((row["subject"], row[key] * scale, unit, digits))
    bar, gap, label_width, panel_width = 16, 14, 250, 300
    width = label_width + panel_width * len(panels) + 20
    _, scaling_height = scaling_svg(result.get("scaling") or [], 0, width)
    height = (90 + sum(len(rows) * bar + gap + 16 for _, rows in groups) + sum(len(rows) * bar + gap + 16 for _, rows in others)
              + scaling_height)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="18" font-size="14" font-weight="bold">kvd beside its peers — {escape(result["date"])}'
           f'{" (smoke mode)" if result["quick"] else ""}</text>']
    for index, (title, _, _) in enumerate(panels):
        out.append(f'<text x="{label_width + index * panel_width}" y="42" font-weight="bold">{escape(title)}</text>')
    y = 56
    for name, rows in groups:
        out.append(f'<text x="10" y="{y + 10}" font-weight="bold">{escape(name)}</text>')
        y += 14
        for row in rows:
            out.append(f'<text x="20" y="{y + 12}">{escape(row["subject"])}</text>')
            for index, (_, key, digits) in enumerate(panels):
                top = max(r[key] for r in rows) or 1
                length = (panel_width - 90) * row[key] / top
                x = label_width + index * panel_width
                out.append(f'<rect x="{x}" y="{y + 2}" width="{length:.1f}" height="{bar - 4}" fill="{color(row["subject"])}"/>')
                out.append(f'<text x="{x + length + 4:.1f}" y="{y + 12}">{fmt(row[key], digits)}</text>')
            y += bar
        y += gap
    out.append(f'<text x="10" y="{y + 14}" font-weight="bold" font-size="12">whole processes, cached reads, memory (lower is better)</text>')
    y += 26
    for name, rows in others:
        out.append(f'<text x="10" y="{y + 10}" font-weight="bold">{escape(name)}</text>')
        y += 14
        top = max(value for _, value, _, _ in rows) or 1
        for subject, value, unit, digits in rows:
            length = (panel_width * 2 - 90) * value / top
            out.append(f'<text x="20" y="{y + 12}">{escape(subject)}</text>')
            out.append(f'<rect x="{label_width}" y="{y + 2}" width="{length:.1f}" height="{bar - 4}" fill="{color(subject)}"/>')
            out.append(f'<text x="{label_width + length + 4:.1f}" y="{y + 12}">{fmt(value, digits)} {unit}</text>')
            y += bar
        y += gap
    scaling, _ = scaling_svg(result.get("scaling") or [], y + 10, width)
    out += scaling
    out.append("</svg>")
    return "\n".join(out) + "\n"
