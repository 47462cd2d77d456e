#!/usr/bin/env python3
"""The five-layer check of the stack, from PyTorch, against the simulator (docs/python.md, "verify_stack.py").

  1. framework adaptor: a query tensor moved with .npu() is on npu:0;
  2. operator library: FlashAttention on the simulated device against PyTorch's own CPU SDPA (fp32 reference of
     the same fp16 inputs), max |error| / max(1, |reference|) < 1e-3, at B=4, N=32, S=2048, D=64, causal, fp16
     (the plain max |error| and PyTorch's own fp16 SDPA's are printed beside it);
  3. graph engine: a hand-written MatMul -> Softmax -> MatMul attention compiled with torch.compile(backend="npusim"),
     profiled with torch_npu.profiler: the trace contains the FlashAttention kernel the graph engine fused it into;
  4. runtime: the profile's FlashAttention kernel overlaps its copies (MTE2) with compute (Cube, Vector), and a saved
     npu-smi-like status file holds the memory in use and the AI cores' utilisation;
  5. device: torch.npu.get_device_name(0) names the simulated chip.

Prints each check with its measured value; exits 1 if one fails.

  verify_stack.py [--config 910b] [--out DIR] [--small]

--small runs check 2 at B=1, N=2, S=256 (a quick look; the full size takes a minute or two of host time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

import npusim
import npusim.torch as torch_npu
from npusim.torch.profiler import ProfilerActivity


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="910b")
    ap.add_argument("--out", default="verify_stack_out")
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    npusim.Device(config=a.config)
    os.makedirs(a.out, exist_ok=True)
    results = []
    log = open(os.path.join(a.out, "verify_stack.txt"), "w")  # the same lines, for a CI log to show

    def say(line):
        print(line, flush=True)
        print(line, file=log, flush=True)

    def check(name, ok, value):
        results.append(ok)
        say(f"[{'PASS' if ok else 'FAIL'}] {name}: {value}")

    B, N, S, D = (1, 2, 256, 64) if a.small else (4, 32, 2048, 64)
    g = torch.Generator().manual_seed(2026)
    q, k, v = (torch.randn(B, N, S, D, generator=g, dtype=torch.float32).to(torch.float16) for _ in range(3))

    # 1. the adaptor
    qn = q.npu()
    check("1 framework adaptor: Q on the NPU", str(qn.device) == "npu:0", f"q.npu().device = {qn.device}")

    # 2. the library's FlashAttention against PyTorch's CPU SDPA
    t0 = time.time()
    o = F.scaled_dot_product_attention(qn, k.npu(), v.npu(), is_causal=True)
    wall = time.time() - t0
    rep = npusim.device().last_report
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch16 = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # PyTorch's own CPU SDPA in fp16
    diff = (o.cpu().float() - ref).abs()
    err = diff.max().item()
    # The error on the output's scale: |err| / max(1, |ref|). An fp16 output is only as exact as its spacing (2^-9
    # between 2 and 4), so outputs above 1 are compared relative to their size; PyTorch's own fp16 SDPA is printed
    # beside it against the same fp32 reference.
    scaled = (diff / ref.abs().clamp(min=1.0)).max().item()
    err16 = (torch16.float() - ref).abs().max().item()
    fa = [t for t in rep["tasks"] if t["type"] == "kernel"]
    check("2 operator library: FlashAttention vs torch SDPA (CPU)", scaled < 1e-3 and bool(fa),
          f"B={B} N={N} S={S} D={D} causal fp16, against torch's fp32 SDPA of the same inputs: max |err| / max(1, |ref|)"
          f" = {scaled:.2e} (< 1e-3); max |err| = {err:.2e} (torch's own fp16 SDPA: {err16:.2e}); kernel "
          f"{fa[0]['name'] if fa else '-'} {rep['kernel']['cycles']} cycles, {rep['kernel']['time_us']:.1f} us "
          f"simulated, {wall:.1f} s host")

    # 3. the graph engine fuses hand-written attention; the profile shows the fused kernel
    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            return torch.matmul(torch.softmax(s, dim=-1), v)

    qs, ks, vs = (t[:1, :2, :256].contiguous() for t in (q, k, v))
    compiled = torch.compile(Attention(), backend="npusim", dynamic=False)
    prof_dir = os.path.join(a.out, "prof")
    with torch_npu.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(prof_dir)) as prof:
        y = compiled(qs, ks, vs)
    yref = Attention()(qs.float(), ks.float(), vs.float())
    yerr = (y.float() - yref).abs().max().item()
    out_dir = prof.output_dirs[-1] if prof.output_dirs else None
    names = []
    trace = None
    if out_dir:
        trace = json.load(open(os.path.join(out_dir, "trace_view.json")))
        names = sorted({e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel"})
    graph = torch_npu.compile.last_graph().model.graph
    check("3 graph engine: MatMul->Softmax->MatMul fused into FlashAttention",
          any("FlashAttention" in n for n in names) and graph["passes"].get("fuse_attention", 0) >= 1 and yerr < 1e-2,
          f"passes {graph['passes']}; kernels in {out_dir and os.path.relpath(os.path.join(out_dir, 'trace_view.json'))}: "
          f"{names}; max |err| vs torch = {yerr:.2e}")

    # 4. the runtime: copy/compute overlap in the profiled kernel, and a saved status file
    overlap = {}
    if trace:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel" and "FlashAttention" in e["name"]:
                overlap = e["args"].get("overlap", {})
    copy_compute = max([v for key, v in overlap.items() if "mte2" in key and ("cube" in key or "vector" in key)] or [0.0])
    status_path = os.path.join(a.out, "npu_smi.json")
    status = npusim.smi(print_table=True, save=status_path)
    saved = json.load(open(status_path))
    check("4 runtime: copies overlap compute, status saved",
          copy_compute > 0.1 and saved["hbm_capacity_bytes"] > 0 and saved["hbm_peak_used_bytes"] > 0 and saved["aicore_util"] is not None,
          f"MTE2 overlapping Cube/Vector in FlashAttention: {copy_compute:.2f} of the shorter pipe's busy time; "
          f"{status_path}: HBM {saved['hbm_used_bytes']} B in use now, {saved['hbm_peak_used_bytes']} B at the peak, of {saved['hbm_capacity_bytes']} B; AICore "
          f"{100 * (status['aicore_util'] or 0):.1f} % over the last call")

    # 5. the device
    name = torch.npu.get_device_name(0)
    check("5 device: name", npusim.device().name in name, f"torch.npu.get_device_name(0) = {name!r}")

    r = torch_npu.report()
    say(f"adaptor: routed {sum(r['routed'].values())} aten calls, {sum(r['fallbacks'].values())} CPU fallbacks "
        f"{r['fallbacks'] or ''}")
    say("verify_stack: " + ("all checks passed" if all(results) else f"{results.count(False)} check(s) failed"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
