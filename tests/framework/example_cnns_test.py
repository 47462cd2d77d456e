#!/usr/bin/env python3
"""The example CNNs (examples/models/make_cnns.py: ResNet-50 and MobileNetV2 written in PyTorch, random weights and
BatchNorm statistics, 64 x 64 images) import, fuse and run end to end through `npusim run` in functional mode and
match PyTorch's outputs, in two exports: the default (torch.export-based, which folds BatchNorm itself) and the
TorchScript one without constant folding, whose BatchNormalization nodes npusim's fuse_conv folds into the
convolutions (and which --no-fusion runs as per-channel scale and shift kernels, matching too). Every convolution
is one Conv2D task on the Cube (in the trace: Conv2D slices on the stream tracks, Mmad slices on the AIC cores' Cube
pipe and LoadData3D, the img2col, on their MTE1); consecutive convolutions hand their NC1HWC0 results over without converting back
(fewer TransData tasks than Conv2D ones); ResNet's stem pooling is one MaxPool task; the device holds the weights
once, packed in fp16: under 5 B of constants per parameter (ResNet-50 takes 2.3: channels padded to 16;
MobileNetV2 4.0: its depthwise weights are 16 channels a block-diagonal block), where uploading the float32 OIHW
originals beside the packed ones would add 4 more.

Also torch.nn.functional.interpolate as a user writes it (nearest x2, bilinear to a size, bilinear with
align_corners), in both exports: ONNX Resize in nearest and linear modes with three coordinate transformations,
run in float32 (within 1e-4 of PyTorch), and a sum over all axes.

And the limits of running elementwise steps on NC1HWC0 (docs/graph.md): exp of a convolution (outputs up to about e^17,
beyond fp16's range) as a float32 graph output stays finite and float32-accurate, and a chain whose first step maps 0
to 1 (exp, then 1 / (e - 1), infinite at 0) before another convolution gives no NaN (its padded channels would).

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
import onnx

NPUSIM = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "..", "..", "examples", "models", "make_cnns.py")
CONVS = {"resnet50": 53, "mobilenetv2": 52}  # 1 + 16 x 3 + 4 projections; 1 + 17 blocks' 2 or 3 + 1
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def cube_in_trace(path):
    """(Conv2D task slices, Mmad slices on an aic* process's M track, LoadData3D slices on its MTE1 track)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    count = collections.Counter()
    for e in events:
        if e.get("ph") != "X":
            continue
        track, proc = threads.get((e["pid"], e["tid"]), ""), procs.get(e["pid"], "")
        if e["name"] == "Conv2D" and track.startswith("stream"):
            count["conv"] += 1
        elif proc.startswith("aic") and (track, e["name"]) in (("M", "Mmad"), ("MTE1", "LoadData3D")):
            count[e["name"]] += 1
    return count["conv"], count["Mmad"], count["LoadData3D"]


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
            trace = os.path.join(d, f"{name}_trace.json")
            runs = [("fused", ["--trace", trace])] + ([("unfused", ["--no-fusion"])] if export == "keep-batchnorm" else [])
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
                if label == "fused":
                    conv, mmad, img2col = cube_in_trace(trace)
                    check(conv == CONVS[name] and mmad > 0 and img2col > 0,
                          f"{name} ({export}): trace has {conv} Conv2D, {mmad} Mmad, {img2col} LoadData3D slices")
                    params = sum(int(np.prod(i.dims)) for i in onnx.load(os.path.join(d, f"{name}.onnx")).graph.initializer)
                    const = r["graph"]["constant_bytes"]
                    check(const < 5 * params, f"{name} ({export}): {const} B of constants for {params} parameters")
                if name == "resnet50":
                    check(kernels["MaxPool"] == 1, f"resnet50 ({export}, {label}): {kernels['MaxPool']} MaxPool tasks")
                print(f"{name} ({export}, {label}): {r['cycles']} cycles, max abs error {e:.2e}, kernels {dict(kernels)}")
INTERPOLATE = """
import sys, numpy as np, torch, torch.nn.functional as F
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
    def forward(self, x):
        y = F.interpolate(x, scale_factor=2, mode="nearest")
        z = F.interpolate(self.conv(x), size=(13, 21), mode="bilinear", align_corners=False)
        w = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True)
        return y.sum() + z.mean(dim=1), w
torch.manual_seed(0)
m, x = Net().eval(), torch.randn(2, 8, 10, 12)
out = sys.argv[1]
torch.onnx.export(m, (x,), out + "/dyn.onnx", input_names=["x"], output_names=["a", "b"])
torch.onnx.export(m, (x,), out + "/ts.onnx", input_names=["x"], output_names=["a", "b"], dynamo=False, opset_version=17)
np.save(out + "/in/x.npy", x.numpy())
with torch.no_grad():
    a, b = m(x)
np.save(out + "/ref_a.npy", a.numpy())
np.save(out + "/ref_b.npy", b.numpy())
"""


def export_and_run(label, script, models, outputs):
    """Runs a PyTorch export script (writing MODEL.onnx for each model, in/x.npy and ref_NAME.npy into the directory it
    is given), then each model through npusim; yields (model, {output: (npusim's, PyTorch's)})."""
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "in"))
        p = subprocess.run([sys.executable, "-c", script, d], capture_output=True, text=True)
        check(p.returncode == 0, f"{label}: export failed: {p.stderr[-2000:]}")
        for model in models if p.returncode == 0 else ():
            out = os.path.join(d, f"out_{model}")
            r = subprocess.run([NPUSIM, "run", os.path.join(d, f"{model}.onnx"), "--functional", "--inputs",
                                os.path.join(d, "in"), "--outputs", out], capture_output=True, text=True)
            check(r.returncode == 0, f"{label} ({model}): run failed: {r.stderr}")
            if r.returncode == 0:
                yield model, {k: (np.load(os.path.join(out, f"{k}.npy")), np.load(os.path.join(d, f"ref_{k}.npy")))
                              for k in outputs}


for export, results in export_and_run("interpolate", INTERPOLATE, ("dyn", "ts"), "ab"):
    for k, (got, ref) in results.items():
        e = float(np.max(np.abs(got - ref)))
        # a: a sum of 3840 values of about 1 in float32 beside a bilinear resize of a convolution's fp16 result.
        tol = 5e-3 * max(1.0, float(np.max(np.abs(ref)))) if k == "a" else 1e-4
        check(got.shape == ref.shape and e <= tol, f"interpolate ({export}) output {k}: max abs error {e} > {tol}")
        print(f"interpolate ({export}) output {k}: max abs error {e:.2e}")
LIMITS = """
import sys, numpy as np, torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 4, 1)
        with torch.no_grad():
            self.a.weight.uniform_(0.4, 0.6)
            self.a.bias.fill_(0.2)
    def forward(self, x):
        e = torch.exp(self.a(x))
        return e, self.b(1 / (e - 1))
torch.manual_seed(0)
m, x = Net().eval(), torch.rand(1, 3, 12, 12) * 1.6
out = sys.argv[1]
torch.onnx.export(m, (x,), out + "/limits.onnx", input_names=["x"], output_names=["e", "r"])
np.save(out + "/in/x.npy", x.numpy())
with torch.no_grad():
    e, r = m(x)
np.save(out + "/ref_e.npy", e.numpy())
np.save(out + "/ref_r.npy", r.numpy())
"""
for _, results in export_and_run("limits", LIMITS, ("limits",), "er"):
    (e, ref_e), (rr, ref_r) = results["e"], results["r"]
    check(float(np.max(ref_e)) > 65504, f"limits: exp reaches only {float(np.max(ref_e))}, within fp16")
    # The convolution runs in fp16 (inputs and weights rounded): exp amplifies its ~1e-3 error by up to ~17.
    check(np.all(np.isfinite(e)) and np.allclose(e, ref_e, rtol=2e-2), f"limits: exp output {np.max(np.abs(e / ref_e - 1))} off")
    check(np.all(np.isfinite(rr)) and np.allclose(rr, ref_r, atol=1e-3, rtol=2e-2),
          f"limits: second convolution max error {float(np.max(np.abs(rr - ref_r)))}, finite {bool(np.all(np.isfinite(rr)))}")
    print(f"limits: exp up to {float(np.max(e)):.3g}, second convolution max error {float(np.max(np.abs(rr - ref_r))):.2e}")
print("failures:", len(failures))
sys.exit(1 if failures else 0)
