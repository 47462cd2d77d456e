#!/usr/bin/env python3
"""The sweep's own overhead per point (docs/exploration.md): the same N small runs, once as N `npusim op` processes
started one after another, once through `npusim sweep -j 1`; the difference divided by N is what the sweep adds per
point (expanding and loading the point configs, starting and reaping the run, reading its report, extracting the
metrics, appending the row, writing the CSV). Reported against the small run's own time, in CPU time (user + system
of every process, from getrusage: steady on a shared machine) and in wall time (noisier); median of --repeat tries.

  .venv/bin/python scripts/bench_sweep.py [--npusim build/npusim] [--points 24] [--repeat 5]

A benchmark, not a test: the machines are shared and noisy, so it prints numbers and asserts nothing.
"""
import argparse
import os
import re
import resource
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKLOAD = ["op", "add", "-p", "shape=256x256"]  # a small run: tens of milliseconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npusim", default=str(ROOT / "build" / "npusim"))
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    # Distinct configs, so every point is a run of its own (the L2 capacity is read but barely matters here).
    caps = [f"{192 * (i + 1)}KiB" for i in range(a.points)]
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    spec = work / "spec.yaml"
    spec.write_text("name: bench\naxes:\n  grid:\n    l2.capacity: [" + ", ".join(caps) + "]\nworkloads:\n"
                    "  - op: add\n    params: {shape: 256x256}\nmetrics: [kernel.cycles, memory.l2_hit_rate]\n")
    def measure(fn):
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        fn()
        r1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        return t1 - t0, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)

    def direct():
        for c in caps:
            with open(work / "report.json", "w") as f:  # as the sweep keeps each report
                subprocess.run([a.npusim, *WORKLOAD, "--set", f"l2.capacity={c}", "--json"], check=True, stdout=f)

    tries = iter(range(10**6))

    own = []

    def swept():
        # A new results folder each time, as a new sweep has (deleting one just before makes the file system's inode
        # allocation, part of the sweep's cost, slower than a user sees it).
        p = subprocess.run([a.npusim, "sweep", spec, "-j", "1", "-o", work / f"out-{next(tries)}"], check=True,
                           capture_output=True, text=True)
        # The sweep's own CPU time (its process alone, getrusage(RUSAGE_SELF)), from its closing line.
        own.append(float(re.search(r"the sweep's own CPU: (\d+) ms", p.stderr).group(1)) / 1e3)

    d, s = [], []
    for _ in range(a.repeat):
        d.append(measure(direct))
        s.append(measure(swept))
    print(f"{a.points} runs of `npusim {' '.join(WORKLOAD)}`, median of {a.repeat}:")
    for i, what in ((1, "CPU time"), (0, "wall time")):
        dm, sm = statistics.median(x[i] for x in d), statistics.median(x[i] for x in s)
        per_run, overhead = dm / a.points, (sm - dm) / a.points
        print(f"  {what}: one process each {dm:.3f} s ({per_run * 1e3:.1f} ms a run), npusim sweep -j 1 {sm:.3f} s; "
              f"overhead {overhead * 1e3:.2f} ms a point = {100 * overhead / per_run:.1f} % of a run")
    run_cpu = statistics.median(x[1] for x in d) / a.points
    o = statistics.median(own) / a.points
    print(f"  the sweep process's own CPU: {o * 1e3:.2f} ms a point = {100 * o / run_cpu:.1f} % of a run's CPU "
          f"(start-up and spec included)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
