#!/usr/bin/env bash
# Fuzzes the parsers of outside input (tests/fuzz: configs, ONNX models and TensorProtos, .npy files, memory traces,
# kernel arguments and tiling) with libFuzzer, ASan and UBSan: builds the targets with clang in build-fuzz/ (setup.sh
# --fuzz), then runs each for SECONDS (default 60) from its seed corpus (tests/fuzz/corpus/TARGET). Fails on any
# finding; libFuzzer leaves the input in build-fuzz/findings/TARGET/ (crash-*, timeout-*, oom-*, leak-*). Once the
# cause is fixed, copy the input to tests/fuzz/regressions/TARGET/: the suite replays it from then on.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(config memtrace npy onnx kernel_args)
scripts/setup.sh --fuzz
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# LeakSanitizer with its defaults: scripts/test.sh --sanitize turns off its stack scan for SystemC's coroutines,
# which the fuzz targets do not run, and without it what libFuzzer holds on its stack would count as leaked.
unset LSAN_OPTIONS
status=0
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
  rm -rf "$findings"
  mkdir -p "$work" "$findings"
  # The checked-in seeds stay as they are; what libFuzzer learns goes to build-fuzz/corpus/TARGET.
  # -timeout: one input over 10 s is a hang; -rss_limit_mb: over 2 GB is a blow-up (issue 23's bounds).
  if build-fuzz/tests/fuzz_"$t" "$work" "tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$findings/" -print_final_stats=1 >"build-fuzz/fuzz_$t.log" 2>&1; then
    echo "fuzz $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/fuzz_$t.log" | grep -o '[0-9]*$') runs in ${seconds} s, no finding"
  else
    status=1
    echo "fuzz $t: FINDING (build-fuzz/fuzz_$t.log; input in $findings/)"
    grep -m3 -E 'ERROR|SUMMARY|Test unit written' "build-fuzz/fuzz_$t.log" || tail -5 "build-fuzz/fuzz_$t.log"
  fi
done
exit $status
