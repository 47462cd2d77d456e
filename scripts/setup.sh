#!/usr/bin/env bash
# Sets up a Debian 12 (bookworm) or 13 (trixie) machine for npusim and builds it:
#   1. installs the Debian packages the C++ build and the tests need (idempotent, quiet when all are there);
#   2. makes the Python virtual environment .venv/ from requirements.txt (pinned; redone only when that file
#      changes or the venv no longer runs);
#   3. configures and builds with CMake, which runs the Python tests with .venv/bin/python, and installs the
#      Release build with its kernel SDK under $NPUSIM_PREFIX (default /usr/local as root, else ~/.local); the
#      venv imports the npusim Python package from build/python (`import npusim` in .venv/bin/python).
#
#   scripts/setup.sh               install + Release build in build/
#   scripts/setup.sh --sanitize    install + ASan/UBSan build in build-asan/
#   scripts/setup.sh --fuzz        install + the libFuzzer targets (clang, ASan/UBSan) in build-fuzz/ (scripts/fuzz.sh)
#   scripts/setup.sh --no-build    install only (packages and .venv/)
#
# The venv's interpreter: $NPUSIM_VENV_PYTHON if set, else python3.11 if on PATH (PyTorch 2.13.0's CPU wheel on
# the project's machines is built for Python 3.11), else python3 (Debian 12: 3.11, Debian 13: 3.13; installed from
# Debian when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

# The same package names on both releases; the versions differ (docs/foundation.md has the table).
PACKAGES=(
  g++ cmake make pkg-config
  libsystemc-dev          # SystemC: 2.3.4 on Debian 12, 3.0 on Debian 13
  libboost-dev
  libyaml-cpp-dev         # chip configs
  nlohmann-json3-dev      # --json output, traces
  zlib1g-dev              # gzip-compressed traces (--trace F.json.gz) and the trace checker reading them
  libcli11-dev            # command line
  libgtest-dev libgmock-dev
  libbenchmark-dev        # Google Benchmark
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX import: ONNX 1.12 on Debian 12, 1.17 on Debian 13
  libonnx-testdata        # ONNX node tests (conformance)
  pybind11-dev            # the Python package's native module (npusim._core)
  chromium chromium-driver  # npusim plot's HTML report is checked in a real headless browser (tests/cli/sweep_test.py)
  slurm-wlm munge         # npusim sweep --slurm is tested on a single-node Slurm started on localhost
  clang-format clang-tidy # scripts/check_style.sh (ctest style): formatting and clang-tidy's checks
  clang libclang-rt-dev   # the fuzz targets (scripts/fuzz.sh): clang's libFuzzer and sanitizer runtimes
)

build=1
build_dir=build
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
targets=()  # all
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    --sanitize) build_dir=build-asan; cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSIM_SANITIZE=ON) ;;
    --fuzz)
      build_dir=build-fuzz
      cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSIM_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++)
      targets=(--target fuzz_config fuzz_memtrace fuzz_npy fuzz_onnx fuzz_kernel_args) ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -r /etc/debian_version ]; then
  case "$(cut -d. -f1 /etc/debian_version)" in
    12|13) ;;
    *) echo "setup: warning: Debian $(cat /etc/debian_version) is not a release npusim is tested on (12, 13)" >&2 ;;
  esac
else
  echo "setup: warning: not a Debian machine (no /etc/debian_version); the packages below are Debian's" >&2
fi

# The interpreter the venv is made from; Debian's python3 and its venv module are installed when there is none.
venv_python=${NPUSIM_VENV_PYTHON:-}
if [ -z "$venv_python" ]; then
  venv_python=$(command -v python3.11 || command -v python3 || true)
fi
if [ -z "$venv_python" ]; then
  PACKAGES+=(python3 python3-venv)
  venv_python=/usr/bin/python3
elif ! "$venv_python" -c 'import ensurepip, venv' 2>/dev/null; then
  case "$venv_python" in
    /usr/bin/*) PACKAGES+=("$(basename "$("$venv_python" -c 'import os, sys; print(os.path.realpath(sys.executable))')")-venv") ;;
    *) echo "setup: $venv_python has no venv/ensurepip module (set NPUSIM_VENV_PYTHON to another Python)" >&2; exit 1 ;;
  esac
fi

# The Python package's native module needs the interpreter's headers: a Debian interpreter gets its -dev package.
if [ -x "$venv_python" ] && ! "$venv_python" -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
  case "$venv_python" in
    /usr/bin/*) PACKAGES+=("$(basename "$("$venv_python" -c 'import os, sys; print(os.path.realpath(sys.executable))')")-dev") ;;
    *) echo "setup: warning: $venv_python has no Python.h; the npusim Python package will not build" >&2 ;;
  esac
elif [ ! -x "$venv_python" ]; then
  PACKAGES+=(python3-dev)
fi

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

# The venv: made again when it does not run (its base interpreter moved) and refilled when requirements.txt changed.
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if ! .venv/bin/python -c 'import sys' 2>/dev/null; then
  echo "setup: making .venv/ with $venv_python ($("$venv_python" --version 2>&1))"
  rm -rf .venv
  "$venv_python" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements.txt into .venv/"
  .venv/bin/python -m pip install --disable-pip-version-check -q -r requirements.txt
  echo "$want" > "$stamp"
fi

if [ $build -eq 1 ]; then
  jobs=$(nproc 2>/dev/null || echo 2)
  cmake -S . -B "$build_dir" "${cmake_args[@]}" -DNPUSIM_PYTHON="$PWD/.venv/bin/python" >/dev/null
  cmake --build "$build_dir" -j "$jobs" "${targets[@]}" -- --no-print-directory >/dev/null
  if [ ${#targets[@]} -eq 0 ]; then echo "setup: built $build_dir/npusim"; else echo "setup: built ${targets[*]:1} in $build_dir"; fi
  # The Release build is installed (npusim and the kernel SDK: find_package(npusim), pkg-config npusim), so a
  # kernel project outside this checkout finds it; the sanitizer build stays in its build tree.
  if [ "$build_dir" = build ]; then
    # The venv imports the Python package from the build tree (build/python/npusim), as an editable install does.
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$PWD/build/python" > "$site/npusim-build.pth"
    if [ -n "${NPUSIM_PREFIX:-}" ]; then prefix=$NPUSIM_PREFIX
    elif [ "$(id -u)" -eq 0 ]; then prefix=/usr/local
    else prefix=$HOME/.local
    fi
    cmake --install "$build_dir" --prefix "$prefix" >/dev/null
    echo "setup: installed npusim and its kernel SDK under $prefix (docs/kernel-sdk.md)"
  fi
fi
