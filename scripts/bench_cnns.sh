#!/usr/bin/env bash
# The example CNNs (examples/models/make_cnns.py: ResNet-50, MobileNetV2) at 224 x 224, batch 1 and 32, through
# `npusim run` in timing-only mode on the default 910b: device time of the execution, images per second, kernels,
# the Cube's share of the convolutions' tasks, peak device memory, and the host time of the whole process. Issue 20
# asks that both run timing-only at those shapes. Prints a markdown table (docs/graph.md records it). The models are
# written into build/models/ when missing or older than make_cnns.py.
#   scripts/bench_cnns.sh [--no-setup] [--config NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1
config=910b
while [ $# -gt 0 ]; do
  case "$1" in
    --no-setup) setup=0 ;;
    --config) config="$2"; shift ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "bench_cnns.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ $setup -eq 1 ]; then scripts/setup.sh; fi
for b in 1 32; do
  dir=build/models/cnn_b$b
  mkdir -p "$dir"
  for m in resnet50 mobilenetv2; do
    if [ ! -f "$dir/$m.onnx" ] || [ examples/models/make_cnns.py -nt "$dir/$m.onnx" ]; then
      echo "bench_cnns: writing $dir/$m.onnx (224 x 224, batch $b)" >&2
      .venv/bin/python examples/models/make_cnns.py --size full --batch "$b" --models "$m" --out "$dir" >&2
    fi
  done
done
exec .venv/bin/python - "$config" <<'PY'
import collections, json, subprocess, sys, time

config = sys.argv[1]
print(f"| model ({config}, timing-only, 224 x 224) | batch | execute time | images/s | kernels (Conv2D) | peak device memory | host time |")
print("|---|---|---|---|---|---|---|")
for name in ("resnet50", "mobilenetv2"):
    for batch in (1, 32):
        t0 = time.monotonic()
        out = subprocess.run(["build/npusim", "run", f"build/models/cnn_b{batch}/{name}.onnx", "--config", config, "--json"],
                             check=True, capture_output=True, text=True).stdout
        wall = time.monotonic() - t0
        j = json.loads(out)
        g = j["graph"]
        kernels = collections.Counter(t["name"] for t in j["tasks"] if t["type"] == "kernel")
        print(f"| {name} | {batch} | {g['execute_us'] / 1e3:.2f} ms | {batch / (g['execute_us'] / 1e6):,.0f} | "
              f"{g['kernels']} ({kernels['Conv2D']}) | {g['peak_device_bytes'] / 2**20:.0f} MiB | {wall:.1f} s |")
PY
