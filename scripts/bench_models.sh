#!/usr/bin/env bash
# The example models at realistic sizes (examples/models/make_models.py --size realistic --dtype float16) through
# `npusim run` in timing-only mode, fused and --no-fusion, on the default 910b: device cycles and time, kernels,
# peak device memory, and the host time of the whole process (import, passes, planning, simulation) and of the
# simulation alone. Issue 7's target: the LLaMA block compiles and simulates in under 60 s of host time. Prints a
# markdown table (docs/graph.md records it). The models are written into build/models/ when missing or older than
# make_models.py (several minutes for the LLaMA block: 200 M parameters traced by PyTorch on the CPU).
#   scripts/bench_models.sh [--no-setup] [--config NAME] [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1
config=910b
runs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-setup) setup=0 ;;
    --config) config="$2"; shift ;;
    --runs) runs="$2"; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "bench_models.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ $setup -eq 1 ]; then scripts/setup.sh; fi
mkdir -p build/models
for m in gpt2 llama bert; do
  if [ ! -f "build/models/$m.onnx" ] || [ examples/models/make_models.py -nt "build/models/$m.onnx" ]; then
    echo "bench_models: writing build/models/$m.onnx (realistic size, float16)" >&2
    .venv/bin/python examples/models/make_models.py --size realistic --dtype float16 --models "$m" --out build/models >&2
  fi
done
exec .venv/bin/python - "$config" "$runs" <<'PY'
import json, statistics, subprocess, sys, time

config, runs = sys.argv[1], int(sys.argv[2])
print(f"| model ({config}, fp16, timing-only) | | execute cycles | execute time | kernels | peak device memory | host time (process) | host time (simulation) |")
print("|---|---|---|---|---|---|---|---|")
for name in ("gpt2", "llama", "bert"):
    for label, extra in (("fused", []), ("--no-fusion", ["--no-fusion"])):
        wall, sim, j = [], [], None
        for _ in range(runs):
            t0 = time.monotonic()
            out = subprocess.run(["build/npusim", "run", f"build/models/{name}.onnx", "--config", config, "--json", *extra],
                                 check=True, capture_output=True, text=True).stdout
            wall.append(time.monotonic() - t0)
            j = json.loads(out)
            sim.append(j["sim"]["wall_seconds"])
        g = j["graph"]
        print(f"| {name} | {label} | {g['execute_cycles']:,} | {g['execute_us'] / 1e3:.2f} ms | {g['kernels']} | "
              f"{g['peak_device_bytes'] / 2**20:.0f} MiB ({g['arena_bytes'] / 2**20:.0f} MiB arena) | "
              f"{statistics.median(wall):.1f} s | {statistics.median(sim):.1f} s |", flush=True)
PY
