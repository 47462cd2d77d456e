#!/usr/bin/env bash
# Issue 20 item 5: a LLaMA-7B-shaped model (examples/llm/llama-7b/config.json: 32 layers, hidden 4096, fp16) through
# `npusim run --decode` in timing-only mode, prefill of 2048 tokens then 16 decode steps, batch 1, on the default
# 910b config: the host time and peak host memory of the process (GNU time), and TTFT, TPOT and the decode steps'
# weight bandwidth from the report. With --no-replay every layer is simulated (docs/llm.md, "Layer replay").
# docs/llm.md records the figures.
#   scripts/bench_llm.sh [--no-setup] [--no-replay]
set -euo pipefail
cd "$(dirname "$0")/.."
setup=1
extra=()
for a in "$@"; do
  case "$a" in
    --no-setup) setup=0 ;;
    --no-replay) extra+=(--no-replay) ;;
    *) echo "bench_llm.sh: unknown option '$a'" >&2; exit 2 ;;
  esac
done
if [ "$setup" = 1 ]; then scripts/setup.sh; fi
out=$(mktemp)
trap 'rm -f "$out" "$out.time"' EXIT
/usr/bin/time -f '%e %M' -o "$out.time" build/npusim run examples/llm/llama-7b --prompt-len 2048 --decode 16 "${extra[@]}" --json > "$out"
read -r wall rss_kib < "$out.time"
.venv/bin/python - "$out" "$wall" "$rss_kib" <<'PY'
import json, sys
report, wall, rss = json.load(open(sys.argv[1])), float(sys.argv[2]), int(sys.argv[3])
d = report["decode"]
print(f"LLaMA-7B shape, prefill 2048 + 16 decode steps, batch 1, {report['config']}, timing-only")
print(f"  host time         {wall:8.1f} s   (simulation {report['sim']['wall_seconds']:.1f} s, "
      f"{report['sim']['instructions']} instructions)")
print(f"  peak host memory  {rss / 1024:8.0f} MiB")
print(f"  layers            {d['layers_simulated']} simulated, {d['layers_replayed']} replayed per pass")
print(f"  TTFT              {d['ttft_us'] / 1e3:8.2f} ms")
print(f"  TPOT              {d['tpot_us'] / 1e3:8.2f} ms")
print(f"  decode weights    {d['weight_bytes_per_step'] / 1e9:.2f} GB a step, {d['decode_weight_GBps']:.0f} GB/s = "
      f"{100 * d['decode_weight_hbm_fraction']:.1f} % of the HBM peak")
PY
