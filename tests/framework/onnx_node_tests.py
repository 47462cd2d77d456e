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
The tests onnx_node_required.txt names (those of the ops in the transformers models and the masks exporters build)
must pass when the data directory holds them: one that does not counts as failed.
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
TYPES = FLOATS + (np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint32, np.uint64, np.bool_)


def load_pb(path, bf16=False):
    """A TensorProto file's name and values; bfloat16 as float32 (numpy_helper gives its uint16 bits, and ONNX 1.12's
    test data stores bfloat16 tensors as uint16: `bf16` says the model's value is bfloat16)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    a = numpy_helper.to_array(t)
    if (bf16 or t.data_type == onnx.TensorProto.BFLOAT16) and a.dtype == np.uint16:
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return t.name, a


def is_bf16(values):
    return [v.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16 for v in values]




def tolerance(model):
    # MatMul/Gemm/Conv of float32 run in fp16 on the Cube, and pooling in fp16 on NC1HWC0 (docs/graph.md): fp16
    # rounding of inputs and output (an average also adds in fp16).
    cube = any(n.op_type in ("MatMul", "Gemm", "Conv", "AveragePool") for n in model.graph.node)
    if cube:
        return 3e-3, 5e-3
    # A bfloat16 output within one bfloat16 ulp (2^-7 of the value at most): ONNX 1.12's test data truncates
    # float32 to bfloat16, later versions and the device's cast round to nearest even.
    return (1e-4, 2.0 ** -7) if any(is_bf16(model.graph.output)) else (1e-4, 1e-3)


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
        inits = {i.name for i in model.graph.initializer}
        in_bf16 = is_bf16([v for v in model.graph.input if v.name not in inits])
        out_bf16 = is_bf16(model.graph.output)
        inputs = [load_pb(p, k < len(in_bf16) and in_bf16[k])
                  for k, p in enumerate(sorted(glob.glob(os.path.join(data, "input_*.pb")), key=by_index))]
        outputs = [load_pb(p, k < len(out_bf16) and out_bf16[k])
                   for k, p in enumerate(sorted(glob.glob(os.path.join(data, "output_*.pb")), key=by_index))]
    except Exception:
        unsupported.append(f"{name}: a sequence, optional or map input")
        continue
    if not all(a.dtype in TYPES for _, a in inputs + outputs):
        unsupported.append(f"{name}: tensors of {sorted({str(a.dtype) for _, a in inputs + outputs} - set(map(str, map(np.dtype, TYPES))))}")
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
            unsupported.append(f"{name}: {p.stderr.strip().splitlines()[-1][:200] if p.stderr.strip() else 'exit 1'}")
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
            if got.shape != want.shape or not np.allclose(got.astype(np.float64), want.astype(np.float64), atol=atol, rtol=rtol, equal_nan=True):
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
# Required tests: unsupported is a failure for them.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnx_node_required.txt")) as f:
    required = {line.strip() for line in f if line.strip() and not line.startswith("#")}
for u in list(unsupported):
    if u.split(":")[0] in required:
        unsupported.remove(u)
        failed.append(f"{u} (required: onnx_node_required.txt)")
print(f"ONNX node tests ({DATA}): {len(passed)} passed, {len(failed)} failed, {len(unsupported)} unsupported")
for p in passed:
    print("  passed", p)
for u in unsupported:
    print("  unsupported", u)
for f in failed:
    print("  FAILED", f)
sys.exit(1 if failed else 0)
