#!/usr/bin/env bash
# Sets everything up and runs the whole test suite with ctest (each test case in its own process).
#   scripts/test.sh [--sanitize] [extra ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build
setup_args=()
if [ "${1:-}" = "--sanitize" ]; then
  build_dir=build-asan; setup_args=(--sanitize); shift
fi
scripts/setup.sh "${setup_args[@]}"
jobs=$(nproc 2>/dev/null || echo 2)
# Under the sanitizers the seed-shape FlashAttention check (about a minute normally) would take over ten; the
# normal run covers it.
exclude=()
if [ "$build_dir" = build-asan ]; then exclude=(-E SeedShape); fi
exec ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "${exclude[@]}" "$@"
