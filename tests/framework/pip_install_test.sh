#!/bin/sh
# `pip install .` as a user runs it into their own environment (here a --target directory, with the project's venv
# as the interpreter and its numpy): the wheel builds through pyproject.toml (scikit-build-core, without build
# isolation so nothing is downloaded), installs npusim with its native module, and imports and runs from there.
#   pip_install_test.sh PYTHON SOURCE_DIR WORK_DIR
set -eu
py=$1 src=$2 work=$3
rm -rf "$work/site"
mkdir -p "$work"
"$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$work/site" \
  --config-settings=build-dir="$work/build" "$src"
cd "$work"
PYTHONPATH="$work/site" "$py" - "$work/site" <<'PY'
import os, sys
import numpy as np
import npusim
assert os.path.dirname(npusim.__file__) == os.path.join(sys.argv[1], "npusim"), npusim.__file__
assert os.path.exists(os.path.join(sys.argv[1], "npusim", "torch", "profiler.py"))
o = npusim.ops.relu(np.array([-1.0, 2.0, -3.0, 4.0], np.float16))
assert o.tolist() == [0.0, 2.0, 0.0, 4.0], o
print("pip install . ->", npusim.__file__, "relu on", npusim.device().name, "in",
      npusim.device().last_report["kernel"]["cycles"], "cycles")
PY
