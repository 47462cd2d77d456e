#!/usr/bin/env bash
# Simulation-speed benchmarks (Google Benchmark), one process per benchmark because SystemC elaborates once per
# process. Prints simulated instructions per host second; docs/hw.md records the figures.
#   scripts/bench.sh [benchmark-name-regex]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
filter="${1:-.}"
for b in BM_vector_add BM_matmul_tile BM_vector_peak BM_vector_add_simple_gm BM_matmul_tile_simple_gm BM_hbm_stream_1GiB; do
  if [[ "$b" =~ $filter ]]; then
    build/tests/kernel_bench --benchmark_filter="^${b}/" 2>/dev/null | grep "^BM_"
  fi
done
