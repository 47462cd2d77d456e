#!/usr/bin/env bash
# Sets up a Debian machine for npusim and builds it: installs every Debian package the build and the tests need
# (idempotent, and quiet when everything is already there), then configures and builds with CMake.
#
#   scripts/setup.sh               install + Release build in build/
#   scripts/setup.sh --sanitize    install + ASan/UBSan build in build-asan/
#   scripts/setup.sh --no-build    install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  g++ cmake make pkg-config
  libsystemc-dev          # SystemC 2.3.4, the hardware models
  libboost-dev
  libyaml-cpp-dev         # chip configs
  nlohmann-json3-dev      # --json output, traces
  libcli11-dev            # command line
  libgtest-dev libgmock-dev
  libbenchmark-dev        # Google Benchmark
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX import
  libonnx-testdata        # ONNX node tests (conformance)
  python3-onnx python3-numpy                      # test models built by tests/framework/*.py
  python3-torch                                   # the example models (examples/models/make_models.py)
)

build=1
build_dir=build
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    --sanitize) build_dir=build-asan; cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSIM_SANITIZE=ON) ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ $build -eq 1 ]; then
  jobs=$(nproc 2>/dev/null || echo 2)
  cmake -S . -B "$build_dir" "${cmake_args[@]}" >/dev/null
  cmake --build "$build_dir" -j "$jobs" -- --no-print-directory >/dev/null
  echo "setup: built $build_dir/npusim"
fi
