"""The npusim Python package and its PyTorch adaptor (docs/python.md), tested as a user uses them.

The process's device is the default one (910b, functional); tests that need another device, or a fresh one, run a
script in a subprocess (SystemC elaborates one chip per process). References: numpy in fp32 from the same inputs
(formulas), PyTorch's own CPU implementations, and the CLI (`npusim op/run --json`) for report equality.

Environment: PYTHONPATH has BUILD/python (ctest sets it), NPUSIM the npusim binary.
"""

import csv
import glob
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import npusim
import npusim.torch as torch_npu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "models"))
import make_models  # noqa: E402  (the example GPT-2 and LLaMA blocks, written as their references write them)

NPUSIM = os.environ.get("NPUSIM", "npusim")
RNG = np.random.default_rng(16)


def run_script(code: str, *args, check=True):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                       env=dict(os.environ), timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"script failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def randn(*shape, dtype=np.float16):
    return RNG.standard_normal(shape).astype(np.float32).astype(dtype)


def attention_ref(q, k, v, causal=False, mask=None, scale=None):
    """softmax(scale q k^T + mask) v in fp32 (numpy), k/v heads repeated for grouped-query attention."""
    q, k, v = (x.astype(np.float32) for x in (q, k, v))
    if k.shape[1] != q.shape[1]:
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
        v = np.repeat(v, q.shape[1] // v.shape[1], axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        s = s + np.triu(np.full(s.shape[-2:], -np.inf, dtype=np.float32), 1)
    if mask is not None:
        s = s + mask.astype(np.float32)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# --- the package ------------------------------------------------------------------------------------------------

def test_device_is_the_process_device_and_another_config_is_refused():
    dev = npusim.device()
    assert npusim.Device(config=dev.config) is dev
    with pytest.raises(RuntimeError, match="one chip per process"):
        npusim.Device(config="tiny")


def test_flash_attention_matches_the_formula_in_both_layouts_with_gqa_and_masks():
    q, k, v = randn(2, 4, 128, 64), randn(2, 2, 160, 64), randn(2, 2, 160, 64)
    o = npusim.ops.flash_attention(q, k, v)
    assert o.shape == (2, 4, 128, 64) and o.dtype == np.float16
    np.testing.assert_allclose(o.astype(np.float32), attention_ref(q, k, v), atol=2e-3)
    r = npusim.device().last_report
    assert [t["name"] for t in r["tasks"] if t["type"] == "kernel"] == ["flash_attention"]
    assert r["op"]["name"] == "flash_attention" and r["kernel"]["cycles"] > 0
    # BSND, causal
    qb, kb, vb = (x.transpose(0, 2, 1, 3).copy() for x in (q, k[:, :, :128], v[:, :, :128]))
    ob = npusim.ops.flash_attention(qb, kb, vb, causal=True, layout="BSND")
    ref = attention_ref(q, k[:, :, :128], v[:, :, :128], causal=True).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(ob.astype(np.float32), ref, atol=2e-3)
    # a broadcast additive mask
    mask = np.where(RNG.random((1, 1, 128, 160)) < 0.2, -np.inf, 0).astype(np.float16)
    om = npusim.ops.flash_attention(q, k, v, mask=mask, scale=0.1)
    np.testing.assert_allclose(om.astype(np.float32), attention_ref(q, k, v, mask=mask, scale=0.1), atol=2e-3)


def test_library_ops_match_numpy():
    # Tolerances: fp16 outputs carry one rounding (2^-11 relative: rtol 1e-3) beyond the kernels' fp32 arithmetic.
    a, b = randn(96, 64), randn(64, 80)
    np.testing.assert_allclose(npusim.ops.matmul(a, b).astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=2e-3, atol=1e-2)
    x = randn(8, 256)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(-1, keepdims=True))
    np.testing.assert_allclose(npusim.ops.softmax(x).astype(np.float32), e / e.sum(-1, keepdims=True), atol=1e-3)
    g, bt = randn(256), randn(256)
    xf = x.astype(np.float32)
    ln = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-5) * g.astype(np.float32) + bt
    np.testing.assert_allclose(npusim.ops.layer_norm(x, g, bt).astype(np.float32), ln, atol=1e-2)
    rms = xf / np.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6) * g.astype(np.float32)
    np.testing.assert_allclose(npusim.ops.rms_norm(x, g).astype(np.float32), rms, atol=1e-2)
    np.testing.assert_allclose(npusim.ops.silu(x).astype(np.float32), xf / (1 + np.exp(-xf)), atol=2e-3, rtol=1e-3)
    y = randn(256)
    np.testing.assert_allclose(npusim.ops.add(x, y).astype(np.float32), xf + y.astype(np.float32), atol=2e-3, rtol=1e-3)
    f = npusim.ops.fused_elementwise("mul(silu(x0),x1)", x, y)
    np.testing.assert_allclose(f.astype(np.float32), xf / (1 + np.exp(-xf)) * y.astype(np.float32), atol=3e-3, rtol=1e-3)


def test_op_warmup_reports_the_last_launch_with_warm_caches():
    # As `npusim op --warmup`: the same values, one kernel task in the report, every input line already in the L2.
    x, y = randn(256, 1024), randn(256, 1024)
    dev = npusim.device()
    cold = dev.op("add", x, y, shape="256x1024", shape_b="256x1024")[0]
    cold_report = dev.last_report
    warm = dev.op("add", x, y, shape="256x1024", shape_b="256x1024", warmup=2)[0]
    r = dev.last_report
    np.testing.assert_array_equal(warm, cold)
    assert [t["type"] for t in r["tasks"]] == ["kernel"]
    assert r["memory"]["l2_hit_rate"] == 1.0 and r["kernel"]["cycles"] < cold_report["kernel"]["cycles"]
    with pytest.raises(ValueError, match="warmup=-1 is not a non-negative integer"):
        dev.op("add", x, y, shape="256x1024", shape_b="256x1024", warmup=-1)
    with pytest.raises(npusim.InputError, match="warmup=101 is more than 100 launches"):
        dev.op("add", x, y, shape="256x1024", shape_b="256x1024", warmup=101)


def test_torch_tensors_in_give_torch_tensors_out_and_npusim_tensors_round_trip():
    x = torch.randn(4, 128, dtype=torch.float16)
    y = npusim.ops.gelu(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float16
    torch.testing.assert_close(y.float(), F.gelu(x.float()), atol=2e-3, rtol=1e-3)
    xb = torch.randn(4, 128, dtype=torch.bfloat16)
    assert npusim.ops.relu(xb).dtype == torch.bfloat16
    t = npusim.Tensor(x)
    out = npusim.ops.relu(t)
    assert isinstance(out, npusim.Tensor) and out.shape == (4, 128)
    torch.testing.assert_close(out.torch(), torch.relu(x))


def test_list_ops_gives_each_parameter_with_its_default():
    ops = {name: params for name, _, params in npusim.list_ops()}
    assert ops["matmul"] == {"M": None, "N": None, "K": None, "B": "1", "trans_a": "0", "trans_b": "0", "bias": "0",
                             "act": "none"}
    assert ops["flash_attention"]["KVN"] == "N" and ops["flash_attention"]["scale"] == "(1/sqrt(D))"


def test_bad_calls_are_named_errors():
    with pytest.raises(npusim.InputError, match="no op named 'nope'.*flash_attention"):
        npusim.ops.call("nope", randn(4))
    with pytest.raises(npusim.InputError, match="flash_attention"):
        npusim.ops.call("flash_attention", randn(1, 2, 64, 64), randn(1, 2, 64, 64), B=1, N=2, S=64, D=64)
    with pytest.raises(npusim.InputError, match="matmul"):
        npusim.ops.matmul(randn(64, 32), randn(48, 16))  # K differs
    with pytest.raises(TypeError, match="float16, bfloat16, float32, int32 and int8 arrays, not int64"):
        npusim.ops.relu(np.zeros(8, dtype=np.int64))
    with pytest.raises(npusim.InputError, match="op relu: input 0 is int32; it takes fp16, bf16 and fp32"):
        npusim.ops.relu(np.zeros(8, dtype=np.int32))
    # the device goes on after a refused call
    assert npusim.ops.relu(randn(16)).shape == (16,)


def test_reports_are_objects_with_the_json_keys():
    npusim.ops.exp(randn(1024))
    r = npusim.device().last_report
    for key in ("config", "cycles", "time_us", "tasks", "overlap", "memory", "sim", "op", "kernel"):
        assert key in r, key
    assert r.cycles == r["cycles"] and r.memory["gm_read_bytes"] >= 2048
    assert {"name", "op", "stream", "block_dim", "start_us", "dur_us", "cycles", "pipes"} <= set(r["tasks"][0])
    whole = npusim.device().report()
    assert len(whole["tasks"]) >= len(r["tasks"]) and whole["time_us"] >= r["time_us"]


def _summed_over_cores(stats, pipe, key):
    return sum(c[pipe][key] for name, c in stats.chip.items() if isinstance(c, dict) and "blocks" in c and pipe in c)


def test_stats_count_what_each_call_moved():
    x = randn(3, 4096)
    before = npusim.device().stats()
    npusim.ops.relu(x)
    after = npusim.device().stats()
    r = npusim.device().last_report
    # relu reads its input once into UB (MTE2) and writes its output once back (MTE3): x.nbytes each way.
    assert _summed_over_cores(after, "mte2", "bytes") - _summed_over_cores(before, "mte2", "bytes") == x.nbytes
    assert _summed_over_cores(after, "mte3", "bytes") - _summed_over_cores(before, "mte3", "bytes") == x.nbytes
    # The report's memory section is the same counters over the call.
    assert after.chip.gm.read_bytes - before.chip.gm.read_bytes == r.memory["gm_read_bytes"] == x.nbytes
    assert after.chip.hbm.read_bytes - before.chip.hbm.read_bytes == r.memory["hbm_read_bytes"]
    blocks = sum(c["blocks"] for c in after.chip.values() if isinstance(c, dict) and "blocks" in c)
    kernel = next(t for t in r.tasks if t["type"] == "kernel")
    assert blocks - sum(c["blocks"] for c in before.chip.values() if isinstance(c, dict) and "blocks" in c) == \
        kernel["block_dim"]


def test_the_device_timeline_goes_on_from_call_to_call():
    npusim.ops.relu(randn(4096))
    first = npusim.device().last_report["tasks"][0]["start_us"]
    npusim.ops.relu(randn(4096))
    second = npusim.device().last_report["tasks"][0]["start_us"]
    assert second > first


def test_smi_shows_device_utilisation_and_memory(tmp_path, capsys):
    npusim.ops.flash_attention(randn(1, 2, 256, 64), randn(1, 2, 256, 64), randn(1, 2, 256, 64), causal=True)
    s = npusim.smi(save=str(tmp_path / "smi.json"))
    out = capsys.readouterr().out
    assert "AICore(%)" in out and "HBM-Usage(MB)" in out and s["name"] in out
    assert 0 < s["aicore_util"] <= 1 and s["hbm_capacity_bytes"] > 0 and s["hbm_peak_used_bytes"] > 0
    assert json.load(open(tmp_path / "smi.json"))["tasks"] == s["tasks"]


def _attention_onnx(path, S=128, D=64, N=2):
    """A hand-written MatMul -> Softmax -> MatMul attention with its projections as initializers."""
    w = numpy_helper.from_array(RNG.standard_normal((N * D, N * D)).astype(np.float16) * np.float16(0.05), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["p"]),
        helper.make_node("Reshape", ["p", "hs"], ["ph"]),
        helper.make_node("Transpose", ["ph"], ["q"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Mul", ["s", "c"], ["ss"]),
        helper.make_node("Softmax", ["ss"], ["pr"], axis=-1),
        helper.make_node("MatMul", ["pr", "q"], ["o"]),
    ]
    g = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, S, N * D])],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT16, [1, N, S, D])],
                          [w, numpy_helper.from_array(np.array([1, S, N, D], np.int64), "hs"),
                           numpy_helper.from_array(np.array(1 / math.sqrt(D), np.float16), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return m


def test_an_onnx_model_runs_from_a_file_and_from_memory_and_fuses(tmp_path):
    m = _attention_onnx(str(tmp_path / "attn.onnx"))
    x = randn(1, 128, 128)
    r = npusim.run(str(tmp_path / "attn.onnx"), {"x": x})
    assert r.report["graph"]["passes"]["fuse_attention"] == 1
    assert [s["kernel"] for s in r.report["graph"]["steps"]] == ["MatMul", "FlashAttention"]
    w = numpy_helper.to_array(m.graph.initializer[0]).astype(np.float32)
    q = (x.astype(np.float32) @ w).astype(np.float16).reshape(1, 128, 2, 64).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(r["o"].astype(np.float32), attention_ref(q, q, q), atol=3e-3)
    r2 = npusim.device().run(m, [x])  # an onnx.ModelProto
    np.testing.assert_array_equal(r2["o"], r["o"])
    with pytest.raises(npusim.InputError, match="inputs missing \\['x'\\]"):
        npusim.run(m, {"y": x})
    with pytest.raises(npusim.InputError, match="expected shape"):
        npusim.run(m, [randn(1, 64, 128)])


def test_cli_and_python_give_the_same_report(tmp_path):
    """A fresh device in each: `npusim run --json` and Device(functional=False).run give the same numbers; so do
    `npusim op --json` and the op called from Python (timing-only: the cycles do not depend on the values)."""
    path = str(tmp_path / "attn.onnx")
    _attention_onnx(path)
    cli = json.loads(subprocess.run([NPUSIM, "run", path, "--json"], capture_output=True, text=True, check=True).stdout)
    py = json.loads(run_script("""
        import json, sys, npusim
        d = npusim.Device(functional=False)
        print(json.dumps(d.run(sys.argv[1]).report))
    """, path).stdout)
    for r in (cli, py):
        r.pop("sim")
        r["model"].pop("file")
    assert py == cli
    cli_op = json.loads(subprocess.run([NPUSIM, "op", "matmul", "-p", "M=256", "-p", "N=192", "-p", "K=128", "--json"],
                                       capture_output=True, text=True, check=True).stdout)
    py_op = json.loads(run_script("""
        import json, numpy as np, npusim
        d = npusim.Device(functional=False)
        npusim.ops.matmul(np.zeros((256, 128), np.float16), np.zeros((128, 192), np.float16))
        print(json.dumps(d.last_report))
    """).stdout)
    for r in (cli_op, py_op):
        r.pop("sim")
        r["op"].pop("params")  # the CLI's are the -p strings given, Python's the ones derived from the shapes
    assert py_op == cli_op


def test_a_bad_config_is_a_named_error():
    p = run_script("import npusim; npusim.Device(config='910b', set={'cores.aic': 'many'})", check=False)
    assert p.returncode != 0 and "cores.aic" in p.stderr and "InputError" in p.stderr


def test_trace_and_summary_are_written_when_the_device_closes(tmp_path):
    trace, summary = tmp_path / "t.json", tmp_path / "s.csv"
    run_script("""
        import sys, numpy as np, npusim
        npusim.Device(trace=sys.argv[1], summary=sys.argv[2])
        npusim.ops.softmax(np.ones((64, 256), np.float16))
        npusim.ops.relu(np.ones((4096,), np.float16))
    """, str(trace), str(summary))
    events = json.load(open(trace))["traceEvents"]
    names = {e.get("name") for e in events}
    assert "softmax" in names and "relu" in names
    rows = list(csv.reader(open(summary)))
    assert rows[0][:4] == ["task_id", "stream", "name", "type"]
    assert [r[2] for r in rows[1:] if r[3] == "kernel"] == ["softmax", "relu"]


# --- the PyTorch adaptor ----------------------------------------------------------------------------------------

def test_npu_device_functions_and_tensor_placement():
    x = torch.randn(3, 5).npu()
    assert str(x.device) == "npu:0" and "device='npu:0'" in repr(x)
    assert torch.randn(2, 2).to("npu").device.type == "npu"
    assert torch.npu.is_available() and torch.npu.device_count() == 1
    assert "910b" in torch.npu.get_device_name(0)
    torch.npu.synchronize()
    assert torch.zeros(4, device="npu").device.type == "npu"
    assert x.cpu().device.type == "cpu"


def test_eager_aten_ops_are_routed_to_library_kernels():
    torch_npu.reset()
    x = torch.randn(16, 64, dtype=torch.float16)
    w = torch.randn(32, 64, dtype=torch.float16)
    b = torch.randn(32, dtype=torch.float16)
    xn = x.npu()
    torch.testing.assert_close(F.linear(xn, w.npu(), b.npu()).cpu().float(), F.linear(x.float(), w.float(), b.float()),
                               atol=2e-2, rtol=2e-3)
    torch.testing.assert_close(torch.softmax(xn, -1).cpu().float(), torch.softmax(x.float(), -1), atol=1e-3, rtol=0)
    torch.testing.assert_close(F.silu(xn).cpu().float(), F.silu(x.float()), atol=2e-3, rtol=0)
    torch.testing.assert_close((xn * 2 + 1).cpu(), x * 2 + 1)
    r = torch_npu.report()
    assert {"addmm", "_softmax", "silu", "mul", "add"} <= set(r["routed"]), r
    assert r["fallbacks"] == {}


def test_sdpa_routes_to_flash_attention_causal_masked_and_gqa():
    q, k, v = (torch.randn(1, 4, 128, 64, dtype=torch.float16) for _ in range(3))
    kv = torch.randn(1, 2, 128, 64, dtype=torch.float16)
    torch_npu.reset()
    for kwargs, keys in [({"is_causal": True}, (k, v)), ({}, (kv, kv)),
                         ({"attn_mask": torch.rand(128, 128) > 0.3}, (k, v))]:
        gqa = keys[0].shape[1] != q.shape[1]
        o = F.scaled_dot_product_attention(q.npu(), keys[0].npu(), keys[1].npu(), enable_gqa=gqa, **kwargs)
        ref = F.scaled_dot_product_attention(q.float(), keys[0].float(), keys[1].float(), enable_gqa=gqa,
                                             **{a: b for a, b in kwargs.items()})
        torch.testing.assert_close(o.cpu().float(), ref, atol=2e-3, rtol=0)
    r = torch_npu.report()
    assert r["routed"]["scaled_dot_product_attention"] == 3 and not r["fallbacks"]
    assert any(t["name"] == "flash_attention" for t in npusim.device().last_report["tasks"])


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
@pytest.mark.parametrize("sparse_mode", [0, 2, 3])
def test_npu_fusion_attention_layouts_and_sparse_modes(layout, sparse_mode):
    B, N, S, SK, D = 2, 2, 64, 96 if sparse_mode == 3 else 64, 64
    q = torch.randn(B, N, S, D, dtype=torch.float16)
    k, v = (torch.randn(B, N, SK, D, dtype=torch.float16) for _ in range(2))
    mask = None
    if sparse_mode == 0:
        mask = torch.rand(S, SK) < 0.25  # True: masked out (torch_npu's convention)
        ref_mask = ~mask
    elif sparse_mode == 2:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1)
        ref_mask = torch.ones(S, SK).tril().bool()
    else:
        ref_mask = torch.ones(S, SK).tril(SK - S).bool()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=ref_mask, scale=0.125)
    to = {"BNSD": lambda t: t, "BSND": lambda t: t.transpose(1, 2).contiguous(),
          "BSH": lambda t: t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1).contiguous(),
          "SBH": lambda t: t.permute(2, 0, 1, 3).reshape(t.shape[2], t.shape[0], -1).contiguous()}[layout]
    out = torch_npu.npu_fusion_attention(to(q).npu(), to(k).npu(), to(v).npu(), N, layout, atten_mask=mask,
                                         scale=0.125, sparse_mode=sparse_mode)
    assert len(out) == 7
    torch.testing.assert_close(out[0].cpu().float(), to(ref), atol=2e-3, rtol=0)


def _models():
    torch.manual_seed(5)
    return [
        ("TransformerEncoderLayer", torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)),
        ("GPT-2 block", make_models.GPT2Block(batch=2, seq=64, hidden=256, heads=4, mlp=1024)),
        ("LLaMA block", make_models.LlamaBlock(batch=2, seq=64, hidden=256, heads=4, kv_heads=2, mlp=688)),
    ]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["encoder", "gpt2", "llama"])
def test_models_run_eagerly_on_npu_and_match_pytorch(index):
    name, m = _models()[index]
    m = m.eval()
    x = torch.randn(2, 64, 256)
    torch_npu.reset()
    with torch.no_grad():
        ref = m(x)
        y = m.to("npu")(x.npu())
    assert y.device.type == "npu"
    # fp32 models: the Cube computes in fp16 (CANN's allow_fp32_to_fp16), the rest in fp32: 5e-3 absolute
    torch.testing.assert_close(y.cpu(), ref, atol=5e-3, rtol=0)
    r = torch_npu.report()
    assert sum(r["routed"].values()) >= 10
    # What is not routed is counted and named, never silent: the LLaMA block's bool mask (~) is the one case.
    assert set(r["fallbacks"]) <= {"aten.bitwise_not.default"}, r["fallbacks"]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["encoder", "gpt2", "llama"])
def test_models_compile_with_the_npusim_backend_fuse_and_match_pytorch(index):
    name, m = _models()[index]
    m = m.eval()
    x = torch.randn(2, 64, 256)
    with torch.no_grad():
        ref = m(x)
        y = torch.compile(m, backend="npusim", dynamic=False)(x)
    y = y[0] if isinstance(y, tuple) else y
    torch.testing.assert_close(y, ref, atol=5e-3, rtol=0)
    g = torch_npu.compile.last_graph().model.graph
    kernels = [s["kernel"] for s in npusim.device().last_report["graph"]["steps"]]
    assert "FlashAttention" in kernels, kernels
    assert any(k in kernels for k in ("LayerNorm", "AddLayerNorm", "RMSNorm")), kernels
    fused_elementwise = sum(g["passes"].get(p, 0) for p in ("fuse_elementwise", "fuse_matmul_epilogue", "fuse_gelu"))
    assert fused_elementwise >= 1, g["passes"]
    assert g["nodes_after"] < g["nodes_before"]


def test_an_unroutable_op_is_counted_or_an_error_naming_it():
    b = (torch.rand(8) > 0.5).npu()
    torch_npu.reset()
    with pytest.warns(torch_npu.FallbackWarning):
        torch.bitwise_not(b)
    assert torch_npu.report()["fallbacks"] == {"aten.bitwise_not.default": 1}
    with torch_npu.fallback_mode("error"):
        with pytest.raises(NotImplementedError, match="aten.bitwise_not.default"):
            torch.bitwise_not(b)


def test_profiler_writes_ascend_profiler_output(tmp_path):
    q, k, v = (torch.randn(1, 2, 128, 64, dtype=torch.float16).npu() for _ in range(3))
    prof_dir = tmp_path / "prof"
    with torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU,
                                                torch_npu.profiler.ProfilerActivity.NPU],
                                    schedule=torch_npu.profiler.schedule(wait=1, warmup=0, active=1),
                                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(prof_dir))) as prof:
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
            F.gelu(q)
            prof.step()
    outs = glob.glob(str(prof_dir / "*_ascend_pt" / "ASCEND_PROFILER_OUTPUT"))
    assert len(outs) == 1
    trace = json.load(open(os.path.join(outs[0], "trace_view.json")))["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert [e["name"] for e in kernels] == ["FlashAttention", "Gelu"]  # the one active step
    assert {e["ph"] for e in trace} >= {"X", "s", "f", "M"}
    host = [e for e in trace if e.get("cat") == "cpu_op"]
    assert [e["name"] for e in host] == ["aten::scaled_dot_product_attention", "aten::gelu"]
    rows = list(csv.reader(open(os.path.join(outs[0], "kernel_details.csv"))))
    assert rows[0][:8] == ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                           "Wait Time(us)", "Block Num"]
    assert rows[1][1] == "FlashAttention" and rows[1][3] == "MIX_AIC" and float(rows[1][5]) > 0
    stats = list(csv.reader(open(os.path.join(outs[0], "op_statistic.csv"))))
    assert stats[0][:4] == ["Device_id", "OP Type", "Core Type", "Count"] and len(stats) == 3
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    assert json.load(open(tmp_path / "t.json"))["traceEvents"]


def test_install_as_torch_npu():
    run_script("""
        import torch, npusim.torch
        npusim.torch.install_as_torch_npu()
        import torch_npu
        from torch_npu.profiler import ProfilerActivity
        x = torch.ones(2).npu()
        assert str(x.device) == "npu:0" and torch_npu.npu.device_count() == 1
    """)
