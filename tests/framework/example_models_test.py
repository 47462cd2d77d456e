#!/usr/bin/env python3
"""The example models (examples/models/make_models.py: GPT-2 decoder block, LLaMA block, BERT encoder layer, written
in PyTorch 2.x and exported with torch.onnx.export's defaults: the torch.export-based exporter, opset 18 or newer,
weights as external data) run end to end through `npusim run` in functional mode at the small size and match
PyTorch's outputs; with fusion they take fewer cycles and less peak device memory than with --no-fusion, and their
attention is one FlashAttention task in the task list and the trace (BERT's with its padding mask, whose padded
tokens change the outputs, so a mask the kernel misread would not match). The GELUs run in MatMul epilogues: GPT-2's
hand-written tanh form through fuse_gelu, BERT's nn.functional.gelu exported as ONNX's Gelu-20 op (one Gelu kernel
with --no-fusion). The same models exported at opset 18 and with the TorchScript exporter (dynamo=False, opset 17)
run the same kernels as the default export.

Tolerance: the models are float32 and their MatMuls and attention run on the Cube in fp16 (CANN's
allow_fp32_to_fp16, docs/graph.md), so activations and weights are rounded to 11 significant bits before each
product: np.allclose with atol 5e-3 and rtol 1e-2 (the errors seen are about 1e-4 of the outputs' range).
Usage: example_models_test.py PATH/TO/npusim"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

NPUSIM = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
MAKE = os.path.join(HERE, "..", "..", "examples", "models", "make_models.py")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(model, d, name, extra):
    out = os.path.join(d, f"{name}_out{'_unfused' if '--no-fusion' in extra else ''}")
    os.makedirs(out, exist_ok=True)
    p = subprocess.run([NPUSIM, "run", model, "--functional", "--inputs", os.path.join(d, f"{name}_in"), "--outputs", out,
                        "--json", *extra], capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stderr
    return json.loads(p.stdout), np.load(os.path.join(out, "y.npy")), ""


# The fusion passes each example model is built to exercise (BERT's GELU is one op in the export: nothing to fuse).
EXPECTED_PASSES = {"gpt2": ["fuse_attention", "fuse_gelu", "fuse_add_layernorm", "fuse_matmul_epilogue"],
                   "llama": ["fuse_attention", "fuse_rope", "fuse_rmsnorm", "fuse_elementwise"],
                   "bert": ["fuse_attention", "fuse_add_layernorm", "fuse_matmul_epilogue"]}

default_kernels = {}
with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([sys.executable, MAKE, "--size", "small", "--reference", "--out", d], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        sys.exit(1)
    for name in ("gpt2", "llama", "bert"):
        model = os.path.join(d, f"{name}.onnx")
        ref = np.load(os.path.join(d, f"{name}_ref", "y.npy"))
        trace = os.path.join(d, f"{name}_trace.json")
        fused, y, err = run(model, d, name, ["--trace", trace])
        check(fused is not None, f"{name}: fused run failed: {err}")
        unfused, y2, err = run(model, d, name, ["--no-fusion"])
        check(unfused is not None, f"{name}: unfused run failed: {err}")
        if fused is None or unfused is None:
            continue
        for label, got in (("fused", y), ("unfused", y2)):
            e = float(np.max(np.abs(got - ref)))
            check(got.shape == ref.shape and np.allclose(got, ref, atol=5e-3, rtol=1e-2),
                  f"{name} {label}: max abs error {e} against PyTorch (output range {float(np.max(np.abs(ref)))})")
        check(fused["model"]["opset"] >= 18 and os.path.exists(model + ".data"),
              f"{name}: not what torch 2.x's exporter writes (opset {fused['model']['opset']}, external data "
              f"{os.path.exists(model + '.data')})")
        kernels = [t["name"] for t in fused["tasks"] if t["type"] == "kernel"]
        check(kernels.count("FlashAttention") == 1 and "Softmax" not in kernels,
              f"{name}: the attention is not one FlashAttention task: {kernels}")
        if name in ("gpt2", "bert"):
            check("Gelu" not in kernels, f"{name}: the GELU is not in a MatMul epilogue: {kernels}")
        if name == "bert":
            unfused_kernels = [t["name"] for t in unfused["tasks"] if t["type"] == "kernel"]
            check(unfused_kernels.count("Gelu") == 1, f"bert: Gelu-20 is not one kernel unfused: {unfused_kernels}")
        with open(trace) as f:
            slices = {e.get("name") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
        check("FlashAttention" in slices, f"{name}: no FlashAttention slice in the trace")
        fg, ug = fused["graph"], unfused["graph"]
        missing = [w for w in EXPECTED_PASSES[name] if w not in fg["passes"]]
        check(not missing, f"{name}: passes {missing} did not fire ({fg['passes']})")
        check(fused["cycles"] < unfused["cycles"], f"{name}: fused {fused['cycles']} cycles, unfused {unfused['cycles']}")
        check(fg["peak_device_bytes"] < ug["peak_device_bytes"],
              f"{name}: fused peak {fg['peak_device_bytes']} B, unfused {ug['peak_device_bytes']} B")
        check(fg["kernels"] < ug["kernels"], f"{name}: fused {fg['kernels']} kernels, unfused {ug['kernels']}")
        default_kernels[name] = kernels
        print(f"{name}: fused {fused['cycles']} cycles, {fg['kernels']} kernels, {fg['peak_device_bytes']} B peak "
              f"(passes {fg['passes']}); unfused {unfused['cycles']} cycles, {ug['kernels']} kernels, "
              f"{ug['peak_device_bytes']} B; max abs error {float(np.max(np.abs(y - ref))):.2e}")
    # Other exports of the same models: what fuses must not depend on the exporter or the opset.
    for label, flags in (("opset 18", ["--opset", "18"]), ("torchscript", ["--torchscript"])):
        sub = os.path.join(d, label.replace(" ", "_"))
        p = subprocess.run([sys.executable, MAKE, "--size", "small", "--out", sub, *flags], capture_output=True, text=True)
        check(p.returncode == 0, f"{label} export failed: {p.stderr[-2000:]}")
        if p.returncode != 0:
            continue
        for name, want in default_kernels.items():
            r = subprocess.run([NPUSIM, "run", os.path.join(sub, f"{name}.onnx"), "--json"], capture_output=True, text=True)
            check(r.returncode == 0, f"{name} ({label}): run failed: {r.stderr}")
            if r.returncode != 0:
                continue
            got = [t["name"] for t in json.loads(r.stdout)["tasks"] if t["type"] == "kernel"]
            check(got == want, f"{name} ({label}): kernels {got}, the default export runs {want}")
            print(f"{name} ({label}): the same {len(got)} kernels")
print("failures:", len(failures))
sys.exit(1 if failures else 0)
