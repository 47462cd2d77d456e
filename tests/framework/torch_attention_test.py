"""Attention as PyTorch users write it (issue 24 items 1 and 2): nn.TransformerEncoderLayer with and without a
causal src_mask from nn.Transformer.generate_square_subsequent_mask, an nn.MultiheadAttention block, a hand-written
block masked with torch.triu, and a BART/OPT-style block whose batched matmuls run on [B*H, S, D] tensors. Each is
exported with torch.onnx.export (its defaults; the MultiheadAttention block also with the TorchScript exporter),
run with `npusim run --functional`, and must fuse its attention into one FlashAttention, causal where the mask is,
and match PyTorch (the reference: the same module in fp32 on the CPU; npusim runs the matmuls and the attention in
fp16, as CANN's allow_fp32_to_fp16 does, so the tolerance is 5e-3 absolute on outputs of size O(1), as for the
other models). Attention that cannot fuse must say why, per candidate: `graph.unfused` in --json and
`--explain-fusion`.

Environment: NPUSIM, the npusim binary (ctest sets it).
"""

import json
import os
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

NPUSIM = os.environ.get("NPUSIM", "npusim")
ATOL = 5e-3
B, S, E, H = 2, 64, 128, 4


class Encoder(nn.Module):
    """nn.TransformerEncoderLayer as its documentation shows it ([S, B, E]), with the causal mask or without."""

    def __init__(self, causal):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=256, dropout=0.0)
        self.causal = causal

    def forward(self, x):
        if not self.causal:
            return self.layer(x)
        return self.layer(x, src_mask=nn.Transformer.generate_square_subsequent_mask(x.shape[0]))


class Mha(nn.Module):
    """An nn.MultiheadAttention block (need_weights at its default, True; the weights are not returned)."""

    def __init__(self, embed=E, heads=H, weights=False):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed, heads, batch_first=True)
        self.weights = weights

    def forward(self, x):
        y, w = self.attn(x, x, x)
        return (y, w) if self.weights else y


class Triu(nn.Module):
    """Causal attention written by hand: a torch.triu mask filled with -inf."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(E, 3 * E)

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, S, 3, H, E // H).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / (E // H) ** 0.5
        s = s.masked_fill(torch.triu(torch.ones(S, S, dtype=torch.bool), 1), float("-inf"))
        return (s.softmax(-1) @ v).transpose(1, 2).reshape(B, S, E)


class BartStyle(nn.Module):
    """BART/OPT-style attention: heads folded into the batch ([B*H, S, D]) and torch.bmm."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(E, 3 * E)
        self.out = nn.Linear(E, E)

    def forward(self, x):
        d = E // H
        q, k, v = self.qkv(x).split(E, dim=-1)

        def heads(t):
            return t.view(B, S, H, d).transpose(1, 2).reshape(B * H, S, d)

        w = torch.bmm(heads(q) * d ** -0.5, heads(k).transpose(1, 2)).softmax(-1)
        o = torch.bmm(w, heads(v)).view(B, H, S, d).transpose(1, 2).reshape(B, S, E)
        return self.out(o)


def export(module, x, path, dynamo=True, outputs=("y",)):
    torch.manual_seed(0)
    module.eval()
    torch.onnx.export(module, (x,), str(path), input_names=["x"], output_names=list(outputs), dynamo=dynamo)
    with torch.no_grad():
        ref = module(x)
    return ref[0] if isinstance(ref, tuple) else ref


def run(model, tmp, *extra, functional=True):
    args = [NPUSIM, "run", str(model), "--json", *extra]
    if functional:
        (tmp / "in").mkdir(exist_ok=True)
        (tmp / "out").mkdir(exist_ok=True)
        args += ["--functional", "--inputs", str(tmp / "in"), "--outputs", str(tmp / "out")]
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def fa_steps(report):
    return [s for s in report["graph"]["steps"] if s["kernel"] == "FlashAttention"]


CASES = {
    "encoder": (lambda: Encoder(False), (S, B, E), False),
    "encoder_causal": (lambda: Encoder(True), (S, B, E), True),
    "multihead_attention": (Mha, (B, S, E), False),
    "triu_mask": (Triu, (B, S, E), True),
    "bart_style_bmm": (BartStyle, (B, S, E), False),
}


@pytest.mark.parametrize("name", CASES)
def test_fuses_into_flash_attention_and_matches_pytorch(name, tmp_path):
    make, shape, causal = CASES[name]
    torch.manual_seed(0)
    module = make()
    x = torch.randn(*shape)
    ref = export(module, x, tmp_path / "m.onnx").numpy()
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", x.numpy())
    report, _ = run(tmp_path / "m.onnx", tmp_path)
    g = report["graph"]
    assert g["passes"].get("fuse_attention") == 1, g["passes"]
    assert g["unfused"] == []
    (fa,) = fa_steps(report)
    assert fa["tiling"]["causal"] == (1.0 if causal else 0.0)
    assert fa["tiling"]["mask_rows"] == 0.0  # a causal mask is the kernel's flag, not an S x S table
    # The packed projection's select (Gather of one index) and the layout nodes are read through, not copied.
    kernels = [s["kernel"] for s in g["steps"]]
    assert "Gather" not in kernels and "Softmax" not in kernels, kernels
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.shape == ref.shape
    assert np.max(np.abs(y - ref)) < ATOL, np.max(np.abs(y - ref))


def test_the_torchscript_export_of_multihead_attention_fuses(tmp_path):
    # TorchScript (dynamo=False) computes the head split with Mod on constants: folded at import.
    torch.manual_seed(0)
    module = Mha()
    x = torch.randn(B, S, E)
    ref = export(module, x, tmp_path / "m.onnx", dynamo=False).numpy()
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", x.numpy())
    report, _ = run(tmp_path / "m.onnx", tmp_path)
    assert report["graph"]["passes"].get("fuse_attention") == 1
    assert np.max(np.abs(np.load(tmp_path / "out" / "y.npy") - ref)) < ATOL


def test_causal_recognition_skips_the_hidden_blocks(tmp_path):
    # At S = 1024 the causal kernel skips the key blocks above the diagonal: the causal encoder's attention takes
    # fewer cycles than the same layer without a mask, not more (an S x S mask table would add loads to every block).
    times = {}
    for causal in (False, True):
        torch.manual_seed(0)
        path = tmp_path / f"c{causal}.onnx"
        export(Encoder(causal), torch.randn(1024, B, E), path)
        report, _ = run(path, tmp_path, functional=False)
        (fa,) = fa_steps(report)
        assert fa["tiling"]["causal"] == (1.0 if causal else 0.0)
        times[causal] = [t for t in report["tasks"] if t["name"] == "FlashAttention"][0]
    dur = {c: t["cycles"] for c, t in times.items()}
    assert dur[True] < 0.75 * dur[False], dur


def test_attention_that_cannot_fuse_says_why(tmp_path):
    torch.manual_seed(0)
    cases = {
        # The attention weights are a model output: FlashAttention never writes them.
        "weights": (Mha(weights=True), ("y", "w"), "the probabilities 'softmax' are used elsewhere too"),
        # D = 25: the kernel takes head dims that are multiples of 16.
        "d25": (Mha(embed=100, heads=4), ("y",), "has head dim D=25"),
    }
    for name, (module, outputs, why) in cases.items():
        path = tmp_path / f"{name}.onnx"
        export(module, torch.randn(B, S, module.attn.embed_dim), path, outputs=outputs)
        report, stderr = run(path, tmp_path, "--explain-fusion", functional=False)
        g = report["graph"]
        assert "fuse_attention" not in g["passes"]
        (note,) = g["unfused"]
        assert note["pass"] == "fuse_attention" and note["node"] == "node_bmm_1", note
        assert why in note["reason"], note
        assert f"fuse_attention: node_bmm_1: not fused: {note['reason']}" in stderr
        # Text output (no --json): the same line on stdout, before the run's summary.
        p = subprocess.run([NPUSIM, "run", str(path), "--explain-fusion"], capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.startswith("fuse_attention: node_bmm_1: not fused: "), p.stdout


def test_tasks_name_the_graph_nodes_they_run(tmp_path):
    # Issue 24 item 3: each kernel task names the imported nodes it runs (in --json, the op summary and the trace),
    # graph.steps[] carries its task id, and the text output lists the kernels with their nodes.
    torch.manual_seed(0)
    path = tmp_path / "m.onnx"
    export(Mha(), torch.randn(B, S, E), path)
    summary, trace = tmp_path / "s.csv", tmp_path / "t.json"
    report, _ = run(path, tmp_path, "--summary", str(summary), "--trace", str(trace), "--trace-level", "task",
                    functional=False)
    tasks = {t["id"]: t for t in report["tasks"]}
    steps = report["graph"]["steps"]
    assert len({s["task"] for s in steps}) == len(steps)
    for s in steps:
        t = tasks[s["task"]]
        assert t["type"] == "kernel" and t["name"] == s["kernel"] and t["nodes"] == s["nodes"], (s, t)
        assert s["nodes"] and all(" " in n for n in s["nodes"])  # "OpType name"
    (fa,) = fa_steps(report)
    # The fused kernel stands for the chain it replaced and the layout nodes it reads through.
    for node in ("MatMul node_bmm", "Softmax node_softmax", "MatMul node_bmm_1", "Mul node_mul", "Gather node_select"):
        assert node in fa["nodes"], fa["nodes"]
    copies = [t for t in report["tasks"] if t["type"] == "memcpy"]
    assert copies and all(t["nodes"] == [] for t in copies)
    # The op summary's nodes column and the trace's task slices.
    import csv
    rows = list(csv.DictReader(line for line in open(summary) if not line.startswith("#")))
    by_id = {int(r["task_id"]): r for r in rows}
    assert by_id[fa["task"]]["nodes"] == "; ".join(fa["nodes"])
    events = json.load(open(trace))["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("task") == fa["task"]]
    assert slices and slices[0]["args"]["nodes"] == "; ".join(fa["nodes"])
    # Text output: one line per kernel with its task id, and the nodes before fusion after the arrow.
    p = subprocess.run([NPUSIM, "run", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.split()[:2] == [str(fa["task"]), "FlashAttention"]]
    assert line and "<- MatMul node_bmm_1, Softmax node_softmax" in line[0], p.stdout
