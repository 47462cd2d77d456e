#!/usr/bin/env python3
"""Per-tile cycles of the FlashAttention tiles in fa_tiles.cpp beside the published 910B cost model's.

  run.py NPUSIM [--config 910b] [--repeat R] [--json]

Runs each tile kernel with repeat=1 and repeat=R (timing-only) and reports (cycles(R) - cycles(1)) / (R - 1): one
tile's latency on an idle core, without the kernel's start-up; and, the same way, the cycles each pipe was busy per
tile (a copy until its data landed). The anchors are the PTO-ISA FlashAttention cost
model's per-tile cycles for H = 128, a 128-row query tile and a 256-key tile (issue 19; docs/calibration.md).
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

# name -> (entry, core type, arguments, anchor cycles)
TILES = {
    "qk": ("fa_qk", "cube", ["q=random:fp16:128x128", "k=random:fp16:256x128", "s=out:fp32:128x256"], 2487),
    "softmax": ("fa_softmax", "vector", ["s=random:fp32:64x256", "p=out:fp16:64x256"], 2489),
    "pv": ("fa_pv", "cube", ["p=random:fp16:128x256", "v=random:fp16:256x128", "o=out:fp32:128x128"], 1617),
    "update": ("fa_update", "vector", ["pv=random:fp32:64x128"], 834),
}


PIPES = ("mte2", "mte1", "cube", "fixpipe", "vector", "mte3")


def run_json(npusim, entry, kind, args, repeat, config, blocks=1):
    cmd = [npusim, "kernel", str(HERE / "fa_tiles.cpp"), "--entry", entry, "--type", kind, "--config", config,
           "--json", "--block-dim", str(blocks), "--tiling", f"repeat={repeat}", "--tiling-schema",
           str(HERE / "tiling.json")]
    for a in args + ["tiling=tiling"]:
        cmd += ["--arg", a]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def run_kernel(npusim, entry, kind, args, repeat, config):
    """The kernel's cycles and each pipe's busy cycles (from the --json busy fractions of the block span)."""
    k = run_json(npusim, entry, kind, args, repeat, config)["kernel"]
    return k["cycles"], {p: k["pipes"][p] * k["cycles"] for p in PIPES}


def launch_costs(npusim, config, repeat):
    """The control costs beside the tiles, in core cycles: one cube/vector flag round trip (fa_sync), one more wave
    of blocks on every vector core (fa_empty on 2 x the AIV count against 1 x), and an empty one-block kernel's
    device time (the kernel task: dispatch, start-up, init and the completion report)."""
    cyc = lambda j: j["kernel"]["cycles"]  # noqa: E731
    sync = (cyc(run_json(npusim, "fa_sync", "mix", [], repeat, config)) -
            cyc(run_json(npusim, "fa_sync", "mix", [], 1, config))) / (repeat - 1)
    one = run_json(npusim, "fa_empty", "vector", [], 1, config, blocks=1)
    info = json.loads(subprocess.run([npusim, "info", "--config", config, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    aiv, hz = info["cores"]["aiv"], info["clock_GHz"] * 1e9
    task_us = lambda j: next(t["dur_us"] for t in j["tasks"] if t["type"] == "kernel")  # noqa: E731
    wave1 = task_us(run_json(npusim, "fa_empty", "vector", [], 1, config, blocks=aiv))
    wave2 = task_us(run_json(npusim, "fa_empty", "vector", [], 1, config, blocks=2 * aiv))
    return {"sync": round(sync), "block_dispatch": round((wave2 - wave1) * 1e-6 * hz),
            "kernel_launch": round(task_us(one) * 1e-6 * hz)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("npusim")
    ap.add_argument("--config", default="910b")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = ap.parse_args()
    if a.repeat < 2:
        sys.exit("run.py: --repeat must be at least 2")
    rows = {}
    for name, (entry, kind, args, anchor) in TILES.items():
        c1, b1 = run_kernel(a.npusim, entry, kind, args, 1, a.config)
        cr, br = run_kernel(a.npusim, entry, kind, args, a.repeat, a.config)
        per = lambda x, y: round((y - x) / (a.repeat - 1))  # noqa: E731
        rows[name] = {"cycles": per(c1, cr), "anchor": anchor, "ratio": per(c1, cr) / anchor,
                      "busy": {p: per(b1[p], br[p]) for p in PIPES if br[p] > b1[p]}}
    anchors = {"sync": 1000, "block_dispatch": 2000, "kernel_launch": 10900}
    control = {k: {"cycles": v, "anchor": anchors[k], "ratio": v / anchors[k]}
               for k, v in launch_costs(a.npusim, a.config, a.repeat).items()}
    if a.json:
        print(json.dumps({"tiles": rows, "control": control}, indent=1, sort_keys=True))
        return
    print(f"{'tile':8} {'ours':>6} {'anchor':>6} {'ratio':>6}  busy cycles per tile")
    for name, r in rows.items():
        busy = " ".join(f"{p}={c}" for p, c in r["busy"].items())
        print(f"{name:8} {r['cycles']:6d} {r['anchor']:6d} {r['ratio']:6.2f}  {busy}")
    for name, r in control.items():
        print(f"{name:14} {r['cycles']:6d} {r['anchor']:6d} {r['ratio']:6.2f}")


if __name__ == "__main__":
    main()
