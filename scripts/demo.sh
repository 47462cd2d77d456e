#!/usr/bin/env bash
# Sets everything up and runs npusim's main job on the built-in default config (910b): the device facts, then the
# double-buffered vector_add sample with a Perfetto trace. (The FlashAttention demo replaces this when the operator
# library lands.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build/npusim info "$@"
echo
build/npusim kernel vector_add -p n=1048576 -p tile=16384 -p buffer_num=2 --trace build/vector_add_trace.json "$@"
