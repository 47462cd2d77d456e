#!/usr/bin/env python3
"""Writes the example models as ONNX with PyTorch 2.x (the venv's torch): a GPT-2-style decoder block, a LLaMA-style
block (RMSNorm, RoPE, grouped-query attention, SwiGLU) and a BERT-style encoder layer. Weights are random (seeded);
nothing is downloaded. Each model is written in PyTorch the way its reference implementation writes it, so the
exported graph has the shapes real exports have (hand-written norms, split QKV, repeat_kv, masked_fill, tanh GELU...),
and exported as a PyTorch 2.x user exports: torch.onnx.export with its defaults (the torch.export-based exporter,
opset 20 in PyTorch 2.13, the weights in NAME.onnx.data beside NAME.onnx).

  make_models.py [--size small|medium|realistic] [--dtype float32|float16] [--models gpt2,llama,bert] [--out DIR]
                 [--reference] [--opset N] [--torchscript]

--opset N passes opset_version=N to the exporter (its default: 20 in PyTorch 2.13); --torchscript exports with
the TorchScript-based exporter (dynamo=False, opset 17 unless --opset), as PyTorch 1.x and older 2.x code does.

--reference also writes, per model, seeded inputs NAME_in/x.npy (and BERT's attention_mask.npy, with batch i's
last i * seq / 4 tokens padded) and PyTorch's outputs NAME_ref/y.npy (float32 models only: the reference is the
float32 model). --dtype float16 exports in float32 and converts the ONNX graph (initializers, value types,
constants, casts) to float16, as deployment tools do.

Sizes (batch, sequence, hidden, heads, KV heads, MLP width):
  small:     gpt2 2x64, 256, 4 heads, MLP 1024;  llama 2x64, 256, 4 heads, 2 KV heads, MLP 688;
             bert 2x64, 256, 4 heads, MLP 1024
  medium:    gpt2 1x512, 768, 12 heads, MLP 3072 (GPT-2 small); llama 1x512, 1024, 16 heads, 4 KV heads, MLP 2816;
             bert 2x256, 768, 12 heads, MLP 3072 (BERT-base)
  realistic: gpt2 1x1024, 1024, 16 heads, MLP 4096 (GPT-2 medium); llama 1x2048, 4096, 32 heads, 8 KV heads,
             MLP 11008 (LLaMA-2-7B-like with GQA); bert 4x512, 1024, 16 heads, MLP 4096 (BERT-large)
"""
import argparse
import contextlib
import math
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper
from torch import nn

SIZES = {
    "small": {
        "gpt2": dict(batch=2, seq=64, hidden=256, heads=4, mlp=1024),
        "llama": dict(batch=2, seq=64, hidden=256, heads=4, kv_heads=2, mlp=688),
        "bert": dict(batch=2, seq=64, hidden=256, heads=4, mlp=1024),
    },
    "medium": {
        "gpt2": dict(batch=1, seq=512, hidden=768, heads=12, mlp=3072),
        "llama": dict(batch=1, seq=512, hidden=1024, heads=16, kv_heads=4, mlp=2816),
        "bert": dict(batch=2, seq=256, hidden=768, heads=12, mlp=3072),
    },
    "realistic": {
        "gpt2": dict(batch=1, seq=1024, hidden=1024, heads=16, mlp=4096),
        "llama": dict(batch=1, seq=2048, hidden=4096, heads=32, kv_heads=8, mlp=11008),
        "bert": dict(batch=4, seq=512, hidden=1024, heads=16, mlp=4096),
    },
}


def gelu_new(x):
    """GPT-2's GELU, the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    """Pre-LN decoder block: one fused QKV projection split in three, causal attention through a boolean mask
    buffer (torch.where with the dtype's minimum), tanh-GELU MLP, two residual adds."""

    def __init__(self, batch, seq, hidden, heads, mlp):
        super().__init__()
        self.h, self.nh, self.d = hidden, heads, hidden // heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden)
        self.c_fc = nn.Linear(hidden, mlp)
        self.mlp_proj = nn.Linear(mlp, hidden)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(self.h, dim=2)
        q = q.view(b, n, self.nh, self.d).transpose(1, 2)
        k = k.view(b, n, self.nh, self.d).transpose(1, 2)
        v = v.view(b, n, self.nh, self.d).transpose(1, 2)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d)
        w = torch.where(self.bias[:, :, :n, :n], w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = torch.softmax(w, dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(b, n, self.h)
        x = x + self.c_proj(o)
        return x + self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x))))


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaBlock(nn.Module):
    """LLaMA decoder layer: RMSNorm, Q/K/V projections without bias, RoPE (rotate_half form, cos/sin tables),
    grouped-query attention with K/V heads repeated (repeat_kv), causal masked_fill, SwiGLU MLP."""

    def __init__(self, batch, seq, hidden, heads, kv_heads, mlp):
        super().__init__()
        self.h, self.nh, self.kvh, self.d = hidden, heads, kv_heads, hidden // heads
        self.input_layernorm = RMSNorm(hidden)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.q_proj = nn.Linear(hidden, heads * self.d, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.gate_proj = nn.Linear(hidden, mlp, bias=False)
        self.up_proj = nn.Linear(hidden, mlp, bias=False)
        self.down_proj = nn.Linear(mlp, hidden, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.d, 2).float() / self.d))
        freqs = torch.outer(torch.arange(seq).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def repeat_kv(self, x):
        b, kvh, n, d = x.shape
        rep = self.nh // self.kvh
        return x[:, :, None, :, :].expand(b, kvh, rep, n, d).reshape(b, kvh * rep, n, d)

    def forward(self, x):
        b, n, _ = x.shape
        residual = x
        x = self.input_layernorm(x)
        q = self.q_proj(x).view(b, n, self.nh, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kvh, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kvh, self.d).transpose(1, 2)
        cos, sin = self.cos_cached[:n], self.sin_cached[:n]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.d)
        w = w.masked_fill(~self.causal[:n, :n], float("-inf"))
        w = torch.softmax(w, dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).reshape(b, n, self.h)
        x = residual + self.o_proj(o)
        residual = x
        x = self.post_attention_layernorm(x)
        x = self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))
        return residual + x


class BertLayer(nn.Module):
    """Post-LN encoder layer: separate Q/K/V projections with bias, bidirectional attention with a padding mask
    (attention_mask [batch, seq], 1 for a token and 0 for padding, extended to [batch, 1, 1, seq] of 0 / -10000 as
    BERT does), output projection + residual + LayerNorm, erf-GELU MLP + residual + LayerNorm."""

    extra_inputs = ("attention_mask",)

    def __init__(self, batch, seq, hidden, heads, mlp):
        super().__init__()
        self.h, self.nh, self.d = hidden, heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, mlp)
        self.output = nn.Linear(mlp, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)

    def heads(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.nh, self.d).permute(0, 2, 1, 3)

    def forward(self, x, attention_mask):
        b, n, _ = x.shape
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        # -10000 (original BERT) rather than the dtype's minimum: the graph is converted to float16 after export,
        # where (1 - 1) * min would be 0 * -inf.
        extended = (1.0 - attention_mask[:, None, None, :]) * -10000.0
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d) + extended
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, n, self.h)
        a = self.attn_norm(self.dense(ctx) + x)
        return self.out_norm(self.output(nn.functional.gelu(self.intermediate(a))) + a)


MODELS = {"gpt2": GPT2Block, "llama": LlamaBlock, "bert": BertLayer}


def to_float16(model):
    """float32 -> float16 throughout the graph: initializers, the types of inputs, outputs and intermediate
    values, Constant and ConstantOfShape tensors, and Casts to float."""
    g = model.graph

    def convert(t):
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))

    for t in g.initializer:
        convert(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                convert(a.t)
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    return model


def export(name, size, dtype, out, reference, opset=None, torchscript=False):
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed({"gpt2": 1, "llama": 2, "bert": 3}[name])
    cfg = SIZES[size][name]
    model = MODELS[name](**cfg).eval()
    x = torch.randn(cfg["batch"], cfg["seq"], cfg["hidden"])
    inputs = {"x": x}
    if "attention_mask" in getattr(model, "extra_inputs", ()):
        # Batch i has its last i * seq / 4 tokens padded (the first batch none).
        mask = torch.ones(cfg["batch"], cfg["seq"])
        for i in range(cfg["batch"]):
            pad = (i % 4) * cfg["seq"] // 4
            if pad:
                mask[i, -pad:] = 0.0
        inputs["attention_mask"] = mask
    path = os.path.join(out, f"{name}.onnx")
    with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):  # the exporter reports its steps on stdout
        kwargs = {"opset_version": opset} if opset else {}
        if torchscript:
            kwargs = {"dynamo": False, "opset_version": opset or 17}
        torch.onnx.export(model, tuple(inputs.values()), path, input_names=list(inputs), output_names=["y"], **kwargs)
    m = onnx.load(path)  # with NAME.onnx.data
    m.producer_name = "npusim examples/models/make_models.py, " + m.producer_name
    if dtype == "float16":
        m = to_float16(m)
    onnx.checker.check_model(m)
    data = f"{name}.onnx.data"
    if os.path.exists(path + ".data"):
        os.remove(path + ".data")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data, size_threshold=1024)
    size = os.path.getsize(path) + os.path.getsize(os.path.join(out, data))
    print(f"{path} (+ {data}): {sum(1 for _ in m.graph.node)} nodes, opset {m.opset_import[0].version}, {size / 1e6:.1f} MB, {cfg}")
    if reference:
        if dtype != "float32":
            sys.exit("make_models.py: --reference needs --dtype float32 (the reference is the float32 model)")
        for d in (f"{name}_in", f"{name}_ref"):
            os.makedirs(os.path.join(out, d), exist_ok=True)
        with torch.no_grad():
            y = model(*inputs.values())
        for k, v in inputs.items():
            np.save(os.path.join(out, f"{name}_in", f"{k}.npy"), v.numpy())
        np.save(os.path.join(out, f"{name}_ref", "y.npy"), y.numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--dtype", choices=["float32", "float16"], default="float32")
    ap.add_argument("--models", default="gpt2,llama,bert")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--opset", type=int)
    ap.add_argument("--torchscript", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.models.split(","):
        if name not in MODELS:
            sys.exit(f"make_models.py: unknown model '{name}' (gpt2, llama, bert)")
        export(name, a.size, a.dtype, a.out, a.reference, a.opset, a.torchscript)


if __name__ == "__main__":
    main()
