#!/usr/bin/env bash
# Sets everything up and runs npusim's main job on the built-in default config (910b): the seed FlashAttention
# (B=4, N=32 heads, S=2048, D=64, causal, fp16) through the runtime, printing cycles, time, achieved TFLOPS,
# per-pipe utilisation and where the Perfetto trace went. Extra arguments go to `npusim op` (e.g. --config 910).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/npusim op flash_attention -p B=4 -p N=32 -p S=2048 -p D=64 -p causal=1 --dtype fp16 \
  --trace build/flash_attention_trace.json "$@"
