#!/usr/bin/env bash
# Sets everything up and runs the whole test suite with ctest (each test case in its own process).
#   scripts/test.sh [--sanitize] [extra ctest arguments...]
# With --sanitize, the parsers are fuzzed afterwards too (scripts/fuzz.sh, 60 s a target; NPUSIM_FUZZ_SECONDS=N
# changes it, 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build
setup_args=()
if [ "${1:-}" = "--sanitize" ]; then
  build_dir=build-asan; setup_args=(--sanitize); shift
fi
scripts/setup.sh "${setup_args[@]}"
jobs=$(nproc 2>/dev/null || echo 2)
# Under the sanitizers the seed-shape FlashAttention check (about a minute normally) and the example sweeps (the
# seed FlashAttention nine times, among others) would take over ten minutes each; the normal run covers them, and
# the golden reports, which are about results, not memory errors; the style check is about the source.
exclude=()
if [ "$build_dir" = build-asan ]; then
  exclude=(-E 'SeedShape|sweep_examples|golden|^style$')
  # SystemC's coroutines (QuickThreads, not annotated for the sanitizers in Debian's build) can leave LeakSanitizer
  # with a coroutine's bounds for the main thread's stack at exit; scanning them crashes LSan's tracer now and then
  # ("Tracer caught signal 11"). Leak checking stays on; thread stacks, which hold no live heap pointers once main
  # has returned, are not scanned.
  export LSAN_OPTIONS="use_stacks=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
fi
status=0
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "${exclude[@]}" "$@" || status=$?
# The five-layer check's measured values (examples/verify_stack.py, ctest verify_stack), shown whether it passed or not.
if [ -f "$build_dir/tests/verify_stack/verify_stack.txt" ]; then
  echo "--- examples/verify_stack.py (ctest verify_stack) ---"
  cat "$build_dir/tests/verify_stack/verify_stack.txt"
fi
fuzz_seconds=${NPUSIM_FUZZ_SECONDS:-60}
if [ "$build_dir" = build-asan ] && [ "$fuzz_seconds" != 0 ]; then
  echo "--- scripts/fuzz.sh $fuzz_seconds (libFuzzer, ASan/UBSan) ---"
  scripts/fuzz.sh "$fuzz_seconds" || status=1
fi
exit $status
