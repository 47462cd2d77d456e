#!/usr/bin/env bash
# Host-time benchmarks of whole ops through the runtime in timing-only mode (issue 6's targets: the seed
# FlashAttention and the 4096^3 MatMul each under 10 s of host time). One npusim process per run, three runs per
# op; prints the best and median wall time of the process and the median of the simulation's own wall time
# (sim.wall_seconds). docs/ops.md records the figures.
#   scripts/bench_ops.sh [--no-setup]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-setup" ]; then scripts/setup.sh; fi
exec .venv/bin/python - <<'PY'
import json, statistics, subprocess, time

cases = [
    ("flash_attention 4x32x2048x64 causal fp16", ["flash_attention", "-p", "B=4", "-p", "N=32", "-p", "S=2048", "-p", "D=64", "-p", "causal=1"]),
    ("matmul 4096^3 fp16", ["matmul", "-p", "M=4096", "-p", "N=4096", "-p", "K=4096"]),
    ("layernorm 32768x4096 fp16", ["layernorm", "-p", "shape=32768x4096"]),
    ("add 3 x 256 MiB fp16", ["add", "-p", "shape=128x1024x1024"]),
]
for name, args in cases:
    wall, sim = [], []
    for _ in range(3):
        t0 = time.monotonic()
        out = subprocess.run(["build/npusim", "op", *args, "--json"], check=True, capture_output=True, text=True).stdout
        wall.append(time.monotonic() - t0)
        sim.append(json.loads(out)["sim"]["wall_seconds"])
    print(f"{name:<42} process best {min(wall):6.2f} s  median {statistics.median(wall):6.2f} s"
          f"   simulation median {statistics.median(sim):6.2f} s")
PY
