"""HuggingFace `transformers` models on npusim (issue 20 item 2; docs/graph.md, "Models from transformers"): GPT-2,
BERT, LLaMA, Qwen2, ViT and the Whisper encoder, built from configs in examples/models/make_hf.py with random weights,
exported with torch.onnx.export's defaults and run with `npusim run --functional`, and compiled with
torch.compile(backend="npusim"). Each must match PyTorch on the CPU (the reference: the same model in fp32; npusim
runs the matmuls in fp16, as CANN's allow_fp32_to_fp16 does, so the tolerance is 5e-3 absolute on outputs of size
O(1), as for the other models), and fuse its attention into FlashAttention, one per layer.

The op list of every export is recorded below: an export that brings an op not listed fails here (so a new
transformers or torch release that changes the graphs is looked at, not silently absorbed), and every listed op is
one the graph engine folds or lowers; the ONNX path has no CPU fallback, so an op it cannot run is an error naming
the node, which this test would report.

Environment: PYTHONPATH has BUILD/python (ctest sets it), NPUSIM the npusim binary.
"""

import collections
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "models"))
import make_hf  # noqa: E402

NPUSIM = os.environ.get("NPUSIM", "npusim")
ATOL = 5e-3

# The op types of each small export (transformers and torch as pinned in requirements.txt).
OPS = {
    "gpt2": {"Add", "Gather", "Gemm", "IsNaN", "LayerNormalization", "MatMul", "Mul", "Pow", "Reshape",
             "Softmax", "Split", "Tanh", "Transpose", "Where"},
    "bert": {"Add", "And", "Cast", "Gather", "GatherElements", "GatherND", "Gelu", "IsNaN", "LayerNormalization",
             "MatMul", "Mul", "Reshape", "Softmax", "Transpose", "Where"},
    "llama": {"Add", "And", "Cast", "Concat", "Expand", "Gather", "GatherND", "IsNaN", "MatMul", "Mul", "Neg", "Pow",
              "Reciprocal", "ReduceMean", "Reshape", "Sigmoid", "Slice", "Softmax", "Sqrt", "Transpose", "Unsqueeze",
              "Where"},
    "qwen2": {"Add", "Concat", "Expand", "Gather", "IsNaN", "MatMul", "Mul", "Neg", "Pow", "Reciprocal", "ReduceMean",
              "Reshape", "Sigmoid", "Slice", "Softmax", "Sqrt", "Transpose", "Unsqueeze", "Where"},
    "vit": {"Add", "Concat", "Conv", "Gelu", "IsNaN", "LayerNormalization", "MatMul", "Mul", "Reshape", "Softmax",
            "Transpose", "Where"},
    "whisper": {"Add", "Conv", "Gelu", "LayerNormalization", "MatMul", "Mul", "Reshape", "Softmax", "Transpose"},
}


# Ops newer than opset 17 that import rewrites into the op the engine runs (docs/graph.md, "Opsets 18 to 21").
ADAPTED = {"Gelu": "npusim.Gelu"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf")
    return {name: make_hf.export(name, "small", str(out), reference=True) for name in make_hf.MODELS}


def supported_ops():
    """The ONNX op types the graph engine folds or lowers (npusim-onnx-ops-doc's table, from the op table)."""
    doc = os.path.join(os.path.dirname(NPUSIM), "npusim-onnx-ops-doc")
    text = subprocess.run([doc], capture_output=True, text=True, check=True).stdout
    ops = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]  # | op | inputs | attributes read | folded | lowered to |
        if len(cells) != 7 or cells[1] in ("op", "---"):
            continue
        if cells[4] == "yes" or not cells[5].startswith("not run"):
            ops.update(x.strip() for x in cells[1].split(","))
    return ops


@pytest.mark.parametrize("name", make_hf.MODELS)
def test_export_ops_are_the_recorded_ones_and_all_supported(exported, name):
    ops = {n.op_type for n in onnx.load(exported[name]).graph.node}
    assert ops == OPS[name], f"{name}: ops added {sorted(ops - OPS[name])}, gone {sorted(OPS[name] - ops)}"
    missing = {op for op in ops if ADAPTED.get(op, op) not in supported_ops()}
    assert not missing, f"{name}: ops npusim neither folds nor runs: {sorted(missing)}"


@pytest.mark.parametrize("name", make_hf.MODELS)
def test_onnx_export_runs_fuses_and_matches_pytorch(exported, name, tmp_path):
    path = exported[name]
    base = os.path.dirname(path)
    p = subprocess.run([NPUSIM, "run", path, "--functional", "--inputs", os.path.join(base, f"{name}_in"),
                        "--outputs", str(tmp_path), "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    y = np.load(tmp_path / "y.npy").astype(np.float64)
    ref = np.load(os.path.join(base, f"{name}_ref", "y.npy")).astype(np.float64)
    assert y.shape == ref.shape
    err = np.abs(y - ref).max()
    assert err <= ATOL, f"{name}: max abs error {err} (outputs up to {np.abs(ref).max():.2f})"
    kernels = collections.Counter(s["kernel"] for s in report["graph"]["steps"])
    assert kernels["FlashAttention"] == 2, f"{name}: {dict(kernels)}"  # one per layer
    assert report["graph"]["passes"]["fuse_attention"] == 2


def test_a_padded_bert_batch_matches_with_its_mask_built_on_the_device(exported, tmp_path):
    """BERT's padding mask comes from the attention_mask input at run time (Cast, GatherND, And, Where on the
    device): padding other tokens changes the output as PyTorch's does."""
    model, inputs = make_hf.wrapped("bert", "small")
    mask = inputs["attention_mask"].clone()
    mask[:, 3:9] = 0
    d = tmp_path / "in"
    d.mkdir()
    np.save(d / "input_ids.npy", inputs["input_ids"].numpy())
    np.save(d / "attention_mask.npy", mask.numpy())
    p = subprocess.run([NPUSIM, "run", exported["bert"], "--functional", "--inputs", str(d), "--outputs",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    with torch.no_grad():
        ref = model(inputs["input_ids"], mask).numpy()
    y = np.load(tmp_path / "out" / "y.npy")
    assert np.abs(y - ref).max() <= ATOL


@pytest.mark.parametrize("name", make_hf.MODELS)
def test_torch_compile_runs_fuses_and_matches_pytorch(name):
    import npusim.torch as torch_npu

    model, inputs = make_hf.wrapped(name, "small")
    with torch.no_grad():
        ref = model(*inputs.values())
        y = torch.compile(model, backend="npusim", dynamic=False)(*inputs.values())
    y = y[0] if isinstance(y, tuple) else y
    err = (y.float() - ref).abs().max().item()
    assert err <= ATOL, f"{name}: max abs error {err}"
    g = torch_npu.compile.last_graph().model.graph
    assert g["passes"].get("fuse_attention") == 2, g["passes"]
