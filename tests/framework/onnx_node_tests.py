#!/usr/bin/env python3
"""Conformance: the ONNX node tests shipped in Debian's libonnx-testdata, in functional mode through `npusim run`.

For every test directory (data/node/test_*): the model runs with `--inputs test_data_set_0` as the directory is
(input_K.pb by position, as ONNX's own runner takes it) and its outputs, read back from the `output_K.pb` files
`--outputs` writes by position, are compared with the expected ones. A test counts as
  passed       npusim ran it and every output is within tolerance,
  failed       npusim ran it and an output differs (or it crashed, or timed out),
  unsupported  npusim refused it with a clear error (exit status 1: an op, attribute, dtype or shape it does not
               take) or its tensors are not float32/float16.
An `_expanded` test (the op written as its ONNX function body) of an op whose own test passed must also fuse: its
kernels must be the op's kernels, else it counts as failed.
Prints the three counts and the failures; exits 1 when any test failed.
Usage: onnx_node_tests.py PATH/TO/npusim [DATA_DIR]"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

NPUSIM = sys.argv[1]
DATA = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/libonnx-testdata/data/node"
FLOATS = (np.float32, np.float16)
# Integers and bools cross to the device as int32 and int8 (docs/graph.md): tests of these types run too.
TYPES = FLOATS + (np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_)


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def tolerance(model):
    # MatMul/Gemm/Conv of float32 run in fp16 on the Cube, and pooling in fp16 on NC1HWC0 (docs/graph.md): fp16
    # rounding of inputs and output (an average also adds in fp16).
    cube = any(n.op_type in ("MatMul", "Gemm", "Conv", "AveragePool") for n in model.graph.node)
    return (3e-3, 5e-3) if cube else (1e-4, 1e-3)


passed, failed, unsupported = [], [], []
kernels = {}  # test name -> the kernels npusim ran
for test in sorted(glob.glob(os.path.join(DATA, "test_*"))):
    name = os.path.basename(test)
    model_path = os.path.join(test, "model.onnx")
    data = os.path.join(test, "test_data_set_0")
    if not os.path.exists(model_path) or not os.path.isdir(data):
        continue
    model = onnx.load(model_path)
    by_index = lambda p: int(os.path.basename(p).split("_")[1].split(".")[0])
    try:  # sequences, optionals and maps are not TensorProto
        inputs = [load_pb(p) for p in sorted(glob.glob(os.path.join(data, "input_*.pb")), key=by_index)]
        outputs = [load_pb(p) for p in sorted(glob.glob(os.path.join(data, "output_*.pb")), key=by_index)]
    except Exception:
        unsupported.append(name)
        continue
    if not all(a.dtype in TYPES for _, a in inputs + outputs):
        unsupported.append(name)
        continue
    with tempfile.TemporaryDirectory() as d:
        outs = os.path.join(d, "out")
        try:
            p = subprocess.run([NPUSIM, "run", model_path, "--functional", "--config", "tiny", "--inputs", data,
                                "--outputs", outs, "--json"], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            failed.append(f"{name}: timed out")
            continue
        if p.returncode == 1:
            unsupported.append(name)
            continue
        if p.returncode != 0:
            failed.append(f"{name}: exit {p.returncode}: {p.stderr.strip()[:300]}")
            continue
        kernels[name] = [t["name"] for t in json.loads(p.stdout)["tasks"] if t["type"] == "kernel"]
        atol, rtol = tolerance(model)
        bad = None
        for k, (pb_name, want) in enumerate(outputs):
            out_name = pb_name or model.graph.output[k].name
            got = load_pb(os.path.join(outs, f"output_{k}.pb"))[1]
            if got.shape != want.shape or not np.allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol):
                err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.shape == want.shape else "shape"
                bad = f"{name}: output {out_name}: max abs error {err}"
                break
        (failed if bad else passed).append(bad or name)

# Expanded forms fuse back into their op's kernels.
for name in list(passed):
    base = name[: -len("_expanded")] if name.endswith("_expanded") else None
    if base in passed and kernels[name] != kernels[base]:
        passed.remove(name)
        failed.append(f"{name}: not fused: kernels {kernels[name]}, the op itself runs {kernels[base]}")
print(f"ONNX node tests ({DATA}): {len(passed)} passed, {len(failed)} failed, {len(unsupported)} unsupported")
for p in passed:
    print("  passed", p)
for f in failed:
    print("  FAILED", f)
sys.exit(1 if failed else 0)
