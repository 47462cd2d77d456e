#!/usr/bin/env python3
"""The example CNNs (examples/models/make_cnns.py: ResNet-50 and MobileNetV2 written in PyTorch, random weights and
BatchNorm statistics, 64 x 64 images) import, fuse and run end to end through `npusim run` in functional mode and
match PyTorch's outputs, in two exports: the default (torch.export-based, which folds BatchNorm itself) and the
TorchScript one without constant folding, whose BatchNormalization nodes npusim's fuse_conv folds into the
convolutions (and which --no-fusion runs as per-channel scale and shift kernels, matching too). Every convolution
is one Conv2D task on the Cube; consecutive convolutions hand their NC1HWC0 results over without converting back
(fewer TransData tasks than Conv2D ones); ResNet's stem pooling is one MaxPool task.

Tolerance: float32 models whose convolutions, pooling and MatMul run in fp16 on the Cube (allow_fp32_to_fp16, as
for the transformer examples): np.allclose with atol 5e-3, rtol 1e-2.
Usage: example_cnns_test.py PATH/TO/npusim"""
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

NPUSIM = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "..", "..", "examples", "models", "make_cnns.py")
CONVS = {"resnet50": 53, "mobilenetv2": 52}  # 1 + 16 x 3 + 4 projections; 1 + 17 blocks' 2 or 3 + 1
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(d, name, extra):
    out = os.path.join(d, f"{name}_out{len(extra)}")
    os.makedirs(out, exist_ok=True)
    p = subprocess.run([NPUSIM, "run", os.path.join(d, f"{name}.onnx"), "--functional", "--inputs",
                        os.path.join(d, f"{name}_in"), "--outputs", out, "--json", *extra], capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr
    return json.loads(p.stdout), np.load(os.path.join(out, "y.npy")), ""


with tempfile.TemporaryDirectory() as top:
    for export, flags in (("default", []), ("keep-batchnorm", ["--keep-batchnorm"])):
        d = os.path.join(top, export)
        p = subprocess.run([sys.executable, MAKE, "--size", "small", "--reference", "--out", d, *flags],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(p.stdout, p.stderr[-3000:])
            sys.exit(1)
        for name in CONVS:
            ref = np.load(os.path.join(d, f"{name}_ref", "y.npy"))
            runs = [("fused", [])] + ([("unfused", ["--no-fusion"])] if export == "keep-batchnorm" else [])
            for label, extra in runs:
                r, y, err = run(d, name, extra)
                check(r is not None, f"{name} ({export}, {label}): run failed: {err}")
                if r is None:
                    continue
                e = float(np.max(np.abs(y - ref)))
                check(y.shape == ref.shape and np.allclose(y, ref, atol=5e-3, rtol=1e-2),
                      f"{name} ({export}, {label}): max abs error {e} against PyTorch (range {float(np.max(np.abs(ref)))})")
                kernels = collections.Counter(t["name"] for t in r["tasks"] if t["type"] == "kernel")
                check(kernels["Conv2D"] == CONVS[name], f"{name} ({export}, {label}): {kernels['Conv2D']} Conv2D tasks")
                if label == "fused":
                    check(kernels["TransData"] < kernels["Conv2D"],
                          f"{name} ({export}): {kernels['TransData']} TransData for {kernels['Conv2D']} convolutions")
                    if export == "keep-batchnorm":
                        folded = r["graph"]["passes"].get("fuse_conv", 0)
                        check(folded == CONVS[name], f"{name}: fuse_conv folded {folded} BatchNorms")
                if name == "resnet50":
                    check(kernels["MaxPool"] == 1, f"resnet50 ({export}, {label}): {kernels['MaxPool']} MaxPool tasks")
                print(f"{name} ({export}, {label}): {r['cycles']} cycles, max abs error {e:.2e}, kernels {dict(kernels)}")
print("failures:", len(failures))
sys.exit(1 if failures else 0)
