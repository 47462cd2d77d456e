#!/usr/bin/env python3
"""npusim plot: figures and an HTML report from a sweep's results folder (docs/exploration.md).

  npusim plot RESULTS [--out DIR] [--x AXIS ...] [--metric NAME ...] [--pareto X,Y ...] [--no-html]

RESULTS is the folder `npusim sweep` wrote (its results.jsonl, sweep.json and reports.jsonl), or its results.jsonl.
Views, each written as PNG and SVG into DIR (default RESULTS/plots) and gathered in DIR/report.html:
  - each metric against each axis, one line per workload (and per value of the other axes);
  - a roofline per chip: operational intensity (FLOP per HBM byte) against achieved TFLOPS, with the chip's
    compute and HBM roofs (from npusim info of that point's config);
  - per-pipe busy fractions stacked per point and workload;
  - Pareto fronts of two metrics (min:NAME / max:NAME; the spec's plots.pareto or --pareto).
The report is one static file: the figures are inline SVG with their text kept as text, so it opens anywhere and
its labels can be searched.
"""
import argparse
import html
import io
import json
import math
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:  # pragma: no cover - reported to the user
    sys.exit(f"npusim plot: error: matplotlib is missing from {sys.executable} ({e}); "
             "scripts/setup.sh installs it into .venv/, or set NPUSIM_PYTHON to a Python that has it")

PIPES = ["scalar", "cube", "vector", "mte1", "mte2", "mte3", "fixpipe"]
PIPE_COLOURS = {"scalar": "#7f7f7f", "cube": "#d62728", "vector": "#1f77b4", "mte1": "#9467bd", "mte2": "#2ca02c",
                "mte3": "#ff7f0e", "fixpipe": "#8c564b"}
MAX_LINES = 12  # lines per figure before the rest are left out (named in the caption)


class PlotError(Exception):
    pass


def load(results):
    folder = results if os.path.isdir(results) else os.path.dirname(os.path.abspath(results))
    rows_path = os.path.join(folder, "results.jsonl") if os.path.isdir(results) else results
    if not os.path.exists(rows_path):
        raise PlotError(f"{results}: no results.jsonl (give the folder `npusim sweep` wrote, or its results.jsonl)")
    rows = []
    with open(rows_path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                print(f"npusim plot: warning: {rows_path}:{n}: not a JSON row (a torn line?); skipped", file=sys.stderr)
    spec_path = os.path.join(folder, "sweep.json")
    spec = {}
    if os.path.exists(spec_path):
        with open(spec_path) as f:
            spec = json.load(f)
    # The newest row of each point x workload (a rerun may have appended a retried run).
    latest = {}
    for r in rows:
        latest[(r.get("point"), r.get("workload"))] = r
    rows = sorted(latest.values(), key=lambda r: (r.get("point", 0), r.get("workload", "")))
    if not rows:
        raise PlotError(f"{rows_path}: no rows yet (run the sweep first)")
    if "axes" not in spec:  # no sweep.json (a results file copied alone): the axes are the rows' own
        keys = sorted({k for r in rows for k in r.get("values", {})})
        spec = dict(spec, axes=[{"key": k, "unit": ""} for k in keys], derived=[])
        print(f"npusim plot: warning: no sweep.json beside {rows_path}: axes taken from the rows, without units",
              file=sys.stderr)
    return folder, spec, rows


class Reports:
    """The runs' whole --json reports, kept by the sweep as lines {"key": K, "report": {...}} in reports.jsonl (and
    a Slurm job's slurm/job-N/reports-ID.jsonl): indexed by key in one pass, each parsed when asked for."""

    PREFIX = b'{"key":"'

    def __init__(self, folder):
        self.index = {}
        files = [os.path.join(folder, "reports.jsonl")]
        slurm = os.path.join(folder, "slurm")
        if os.path.isdir(slurm):
            for job in sorted(os.listdir(slurm)):
                d = os.path.join(slurm, job)
                if os.path.isdir(d):
                    files += [os.path.join(d, f) for f in sorted(os.listdir(d))
                              if f.startswith("reports-") and f.endswith(".jsonl")]
        for path in files:
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                offset = 0
                for line in f:
                    if line.startswith(self.PREFIX) and line.endswith(b"}\n"):
                        end = line.index(b'"', len(self.PREFIX))
                        self.index[line[len(self.PREFIX):end].decode()] = (path, offset, len(line))
                    offset += len(line)
        self.cache = {}

    def get(self, key):
        if key not in self.cache:
            where = self.index.get(key)
            report = None
            if where:
                with open(where[0], "rb") as f:
                    f.seek(where[1])
                    try:
                        report = json.loads(f.read(where[2]))["report"]
                    except (ValueError, KeyError):
                        report = None
            self.cache[key] = report
        return self.cache[key]


def report_of(reports, row):
    return reports.get(row.get("key"))


def number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


UNIT_SCALES = {
    "bytes": [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")],
    "Hz": [(1e9, "GHz"), (1e6, "MHz"), (1, "Hz")],
    "B/s": [(1e12, "TB/s"), (1e9, "GB/s"), (1, "B/s")],
    "bit/s": [(1e9, "Gbps"), (1e6, "Mbps"), (1, "bps")],
    "ns": [(1e3, "us"), (1, "ns")],
}


def axis_scale(unit, values):
    """A divisor and a unit name that make the axis' values readable (bytes in KiB, bandwidth in TB/s...)."""
    for div, name in UNIT_SCALES.get(unit, []):
        if values and min(abs(v) for v in values if v) >= div:
            return div, name
    return 1, unit if unit not in ("count", "number") else ""


def axis_label(key, unit_name):
    return f"{key} [{unit_name}]" if unit_name else key


def pipes_of(report):
    """Per-pipe busy fractions of a run: the kernel's for an op or a kernel; for a model, the kernel tasks'
    fractions weighted by their durations."""
    if not report:
        return None
    tasks = [t for t in report.get("tasks", []) if t.get("type") == "kernel" and t.get("pipes")]
    if report.get("op") or len(tasks) <= 1:
        pipes = (report.get("kernel") or {}).get("pipes")
        if pipes:
            return {p: number(pipes.get(p)) or 0.0 for p in PIPES}
    total = sum(number(t.get("dur_us")) or 0.0 for t in tasks)
    if not total:
        return None
    return {p: sum((number(t["pipes"].get(p)) or 0.0) * (number(t.get("dur_us")) or 0.0) for t in tasks) / total
            for p in PIPES}


def short(key):
    """A key's last two parts (ub.size, not size): short and still unambiguous in a legend."""
    return ".".join(key.split(".")[-2:])


def point_label(row, keys):
    axes = row.get("axes", {})
    parts = [f"{short(k)}={axes[k]}" for k in keys if k in axes]
    return " ".join(parts) if parts else f"point {row.get('point')}"


def save(fig, out, name, figures, title, caption):
    png = os.path.join(out, name + ".png")
    svg = os.path.join(out, name + ".svg")
    fig.savefig(png, dpi=110, bbox_inches="tight")
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text stays text in the report
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg_text = buf.getvalue()
    with open(svg, "w") as f:
        f.write(svg_text)
    figures.append({"name": name, "title": title, "caption": caption, "svg": svg_text, "png": png})


def values_of(rows, key):
    return [r.get("values", {}).get(key) for r in rows]


def metric_value(row, name, spec_axis_keys):
    if name in spec_axis_keys:
        return number(row.get("values", {}).get(name))
    return number(row.get("metrics", {}).get(name))


def plot_metric_vs_axis(rows, spec, out, figures, xs, metrics):
    axes_info = {a["key"]: a for a in spec.get("axes", []) + spec.get("derived", [])}
    ok = [r for r in rows if r.get("status") == "ok"]
    for x in xs:
        xvals = sorted({v for v in values_of(ok, x) if v is not None})
        if len(xvals) < 2:
            continue
        div, unit_name = axis_scale(axes_info.get(x, {}).get("unit", ""), xvals)
        # One line per workload and per value of the other axes (derived keys follow the axes, so they do not split
        # lines; along a derived key, one line per workload).
        axis_keys = [a["key"] for a in spec.get("axes", [])]
        others = [k for k in axis_keys if k != x] if x in axis_keys else []
        for m in metrics:
            series = {}
            for r in ok:
                xv, yv = r.get("values", {}).get(x), number(r.get("metrics", {}).get(m))
                if xv is None or yv is None:
                    continue
                label = r["workload"] + "".join(f", {short(k)}={r['axes'].get(k, r.get('derived', {}).get(k))}" for k in others
                                                if k in r.get("axes", {}) or k in r.get("derived", {}))
                series.setdefault(label, []).append((xv / div, yv))
            if not series:
                continue
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            shown = sorted(series)[:MAX_LINES]
            for label in shown:
                pts = sorted(series[label])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            if xvals[0] > 0 and xvals[-1] / xvals[0] >= 16:  # a doubling axis (sizes, bandwidths): log-scaled
                ax.set_xscale("log", base=2)
                ax.set_xticks([v / div for v in xvals])
                ax.set_xticklabels([f"{v / div:g}" for v in xvals])
            ax.set_xlabel(axis_label(x, unit_name))
            ax.set_ylabel(m)
            ax.set_title(f"{m} against {x}")
            ax.grid(True, alpha=0.3)
            if len(shown) > 1:
                ax.legend(fontsize=7)
            left = len(series) - len(shown)
            caption = f"{m} for each workload as {x} varies" + (f" ({left} more lines not drawn)" if left > 0 else "")
            save(fig, out, f"metric_{safe(m)}_vs_{safe(x)}", figures, f"{m} against {x}", caption)


def safe(name):
    return "".join(c if c.isalnum() else "_" for c in name)


def plot_roofline(reports, rows, spec, out, figures):
    """Operational intensity (FLOP per HBM byte) against achieved TFLOPS, with each chip's roofs."""
    axis_keys = [a["key"] for a in spec.get("axes", []) + spec.get("derived", [])]
    chips = {}
    skipped = set()
    for r in rows:
        if r.get("status") != "ok":
            continue
        rep = report_of(reports, r)
        op = (rep or {}).get("op") or {}
        flops = number(op.get("flops"))
        mem = (rep or {}).get("memory") or {}
        hbm = (number(mem.get("hbm_read_bytes")) or 0) + (number(mem.get("hbm_write_bytes")) or 0)
        t_us = number(((rep or {}).get("kernel") or {}).get("time_us"))
        if not flops or not t_us:
            skipped.add(r["workload"])
            continue
        chip = r.get("chip") or {}
        dtype = op.get("dtype", "fp16")
        peak = number(chip.get(f"peak_{dtype}_tflops")) or number(chip.get("peak_fp16_tflops"))
        bw = number(chip.get("peak_hbm_GBps"))
        key = r.get("config_hash")
        c = chips.setdefault(key, {"label": point_label(r, axis_keys), "peak": peak, "bw": bw, "points": []})
        c["points"].append((flops / hbm if hbm else None, flops / (t_us * 1e6), r["workload"]))
    if not chips:
        return
    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    all_oi = [p[0] for c in chips.values() for p in c["points"] if p[0]]
    lo = min(all_oi + [1.0]) / 4
    hi = max(all_oi + [1000.0]) * 4
    markers = "osD^v<>ph*"
    workloads = sorted({p[2] for c in chips.values() for p in c["points"]})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (key, c) in enumerate(sorted(chips.items(), key=lambda kv: kv[1]["label"])[:MAX_LINES]):
        colour = colours[i % len(colours)]
        if c["peak"] and c["bw"]:
            ridge = c["peak"] * 1e3 / c["bw"]  # FLOP/byte where bandwidth x intensity meets the compute peak
            xs = [lo, ridge, hi]
            ax.plot(xs, [min(c["peak"], c["bw"] * x / 1e3) for x in xs], color=colour, lw=1.2, alpha=0.7,
                    label=f"{c['label']} roof")
        for oi, tflops, w in c["points"]:
            if oi:
                ax.scatter([oi], [tflops], color=colour, marker=markers[workloads.index(w) % len(markers)], zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity [FLOP per HBM byte]")
    ax.set_ylabel("achieved TFLOPS")
    ax.set_title("roofline per chip")
    ax.grid(True, which="both", alpha=0.2)
    handles, labels = ax.get_legend_handles_labels()
    for w in workloads:
        handles.append(plt.Line2D([], [], color="black", marker=markers[workloads.index(w) % len(markers)], ls=""))
        labels.append(w)
    ax.legend(handles, labels, fontsize=7, loc="lower right")
    caption = ("each chip's roofs: its compute peak (npusim info, the op's dtype) and its HBM bandwidth times the "
               "intensity; a marker per workload at its achieved TFLOPS (op.flops over the kernel's time) and its "
               "intensity (op.flops over HBM bytes read and written)")
    if skipped:
        caption += "; without flops (not drawn): " + ", ".join(sorted(skipped))
    save(fig, out, "roofline", figures, "roofline per chip", caption)


def plot_pipes(reports, rows, spec, out, figures):
    axis_keys = [a["key"] for a in spec.get("axes", []) + spec.get("derived", [])]
    bars = []
    for r in rows:
        if r.get("status") != "ok":
            continue
        p = pipes_of(report_of(reports, r))
        if p:
            bars.append((f"{point_label(r, axis_keys)}\n{r['workload']}", p))
    if not bars:
        return
    bars = bars[:60]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.45 * len(bars) + 2), 4.6))
    bottom = [0.0] * len(bars)
    for pipe in PIPES:
        vals = [b[1][pipe] for b in bars]
        ax.bar(range(len(bars)), vals, bottom=bottom, color=PIPE_COLOURS[pipe], label=pipe)
        bottom = [a + b for a, b in zip(bottom, vals)]
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([b[0] for b in bars], rotation=60, ha="right", fontsize=6)
    ax.set_xlabel("point and workload")
    ax.set_ylabel("busy fraction per pipe (stacked)")
    ax.set_title("pipe busy fractions")
    ax.legend(fontsize=7, ncol=4)
    ax.grid(True, axis="y", alpha=0.3)
    save(fig, out, "pipes", figures, "pipe busy fractions",
         "each pipe's busy fraction (busy time over the kernel's time and cores; for a model, its kernels' fractions "
         "weighted by their durations), stacked: pipes run at once, so a stack may pass 1")


def pareto_front(points, minimise_x, minimise_y):
    sx = 1 if minimise_x else -1
    sy = 1 if minimise_y else -1
    front = []
    for p in sorted(points, key=lambda p: (sx * p[0], sy * p[1])):
        if not front or sy * p[1] < sy * front[-1][1]:
            front.append(p)
    return front


def plot_pareto(rows, spec, out, figures, pairs):
    axis_keys = [a["key"] for a in spec.get("axes", []) + spec.get("derived", [])]
    ok = [r for r in rows if r.get("status") == "ok"]
    for pair in pairs:
        (dx, nx), (dy, ny) = [(n[:3], n[4:]) if n[:4] in ("min:", "max:") else ("min", n) for n in pair]
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        drawn = False
        for w in sorted({r["workload"] for r in ok}):
            pts = []
            for r in ok:
                if r["workload"] != w:
                    continue
                x, y = metric_value(r, nx, axis_keys), metric_value(r, ny, axis_keys)
                if x is not None and y is not None:
                    pts.append((x, y, point_label(r, axis_keys)))
            if not pts:
                continue
            drawn = True
            sc = ax.scatter([p[0] for p in pts], [p[1] for p in pts], alpha=0.45, label=f"{w} points")
            front = pareto_front(pts, dx == "min", dy == "min")
            ax.plot([p[0] for p in front], [p[1] for p in front], marker="o", color=sc.get_facecolor()[0][:3],
                    label=f"{w} front ({len(front)})")
        if not drawn:
            plt.close(fig)
            continue
        ax.set_xlabel(f"{nx} ({'lower' if dx == 'min' else 'higher'} is better)")
        ax.set_ylabel(f"{ny} ({'lower' if dy == 'min' else 'higher'} is better)")
        ax.set_title(f"Pareto front: {nx} and {ny}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        save(fig, out, f"pareto_{safe(nx)}_{safe(ny)}", figures, f"Pareto front of {nx} and {ny}",
             "the points no other point beats in both, per workload")


def write_html(path, spec, rows, figures):
    counts = {}
    for r in rows:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    name = spec.get("name") or (rows[0].get("sweep") if rows else "sweep")
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>npusim sweep {html.escape(name)}</title>",
        "<style>body{font-family:sans-serif;margin:24px;max-width:1100px}figure{margin:24px 0;padding:8px;"
        "border:1px solid #ddd}figure svg{max-width:100%;height:auto}figcaption{font-size:13px;color:#444}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
        ".failed,.invalid,.timeout{color:#b00}</style></head><body>",
        f"<h1>npusim sweep {html.escape(name)}</h1>",
        f"<p>base config <code>{html.escape(str(spec.get('base', '')))}</code>; {len(rows)} runs: "
        + ", ".join(f"{n} {html.escape(str(s))}" for s, n in sorted(counts.items())) + "</p>",
    ]
    for f in figures:
        svg = f["svg"]
        svg = svg[svg.find("<svg"):]  # drop the XML prolog and doctype
        parts.append(f"<figure id='{html.escape(f['name'])}'><h2>{html.escape(f['title'])}</h2>{svg}"
                     f"<figcaption>{html.escape(f['caption'])}</figcaption></figure>")
    metric_names = [m["name"] for m in spec.get("metrics", [])] or sorted({k for r in rows for k in r.get("metrics", {})})
    axis_keys = [a["key"] for a in spec.get("axes", []) + spec.get("derived", [])]
    parts.append("<h2>runs</h2><table><tr><th>point</th><th>workload</th><th>status</th>"
                 + "".join(f"<th>{html.escape(k)}</th>" for k in axis_keys + metric_names) + "<th>error</th></tr>")
    for r in rows[:500]:
        vals = [r.get("axes", {}).get(k, r.get("derived", {}).get(k, "")) for k in axis_keys]
        vals += [r.get("metrics", {}).get(m, "") for m in metric_names]
        cells = "".join(f"<td>{html.escape(fmt(v))}</td>" for v in vals)
        parts.append(f"<tr class='{html.escape(str(r.get('status')))}'><td>{r.get('point')}</td>"
                     f"<td>{html.escape(str(r.get('workload')))}</td><td>{html.escape(str(r.get('status')))}</td>"
                     f"{cells}<td>{html.escape(r.get('error') or '')}</td></tr>")
    parts.append("</table>")
    if len(rows) > 500:
        parts.append(f"<p>{len(rows) - 500} more runs in results.csv</p>")
    parts.append("</body></html>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(parts))
    os.replace(tmp, path)


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="npusim plot", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the folder npusim sweep wrote (or its results.jsonl)")
    ap.add_argument("--out", help="where the figures and report.html go (default: RESULTS/plots)")
    ap.add_argument("--x", action="append", help="an axis to plot the metrics against (repeatable; default: the "
                                                 "spec's plots.x, else every axis and derived key)")
    ap.add_argument("--metric", action="append", help="a metric to plot (repeatable; default: the spec's "
                                                      "plots.metrics, else every metric but the per-pipe ones)")
    ap.add_argument("--pareto", action="append", metavar="X,Y",
                    help="a Pareto front of two metrics or axes, each min:NAME (default) or max:NAME (repeatable)")
    ap.add_argument("--no-html", action="store_true", help="write the figures only")
    args = ap.parse_args(argv)
    try:
        folder, spec, rows = load(args.results)
        out = args.out or os.path.join(folder, "plots")
        os.makedirs(out, exist_ok=True)
        plots = spec.get("plots", {})
        axis_keys = [a["key"] for a in spec.get("axes", []) + spec.get("derived", [])]
        metric_names = [m["name"] for m in spec.get("metrics", [])] or sorted({k for r in rows for k in r.get("metrics", {})})
        known = set(axis_keys) | set(metric_names)
        for name in (args.x or []) + (args.metric or []):
            if name not in known:
                raise PlotError(f"'{name}' is not an axis or a metric of this sweep (axes: {', '.join(axis_keys) or 'none'}; "
                                f"metrics: {', '.join(metric_names)})")
        xs = args.x or plots.get("x") or axis_keys
        metrics = args.metric or plots.get("metrics") or [m for m in metric_names if "pipes." not in m]
        pairs = []
        for p in args.pareto or []:
            two = [s.strip() for s in p.split(",")]
            if len(two) != 2:
                raise PlotError(f"--pareto {p}: give two names, X,Y")
            for n in two:
                if (n[4:] if n[:4] in ("min:", "max:") else n) not in known:
                    raise PlotError(f"--pareto {p}: '{n}' is not an axis or a metric of this sweep")
            pairs.append(two)
        pairs = pairs or plots.get("pareto", [])
        figures = []
        plot_metric_vs_axis(rows, spec, out, figures, xs, metrics)
        reports = Reports(folder)
        plot_roofline(reports, rows, spec, out, figures)
        plot_pipes(reports, rows, spec, out, figures)
        plot_pareto(rows, spec, out, figures, pairs)
        if not args.no_html:
            write_html(os.path.join(out, "report.html"), spec, rows, figures)
        print(f"npusim plot: {len(figures)} figures in {out}" + ("" if args.no_html else f"; report: {os.path.join(out, 'report.html')}"))
        if not figures:
            print("npusim plot: warning: nothing to draw (no finished runs with numeric metrics?)", file=sys.stderr)
        return 0
    except PlotError as e:
        print(f"npusim plot: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
