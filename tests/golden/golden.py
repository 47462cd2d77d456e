#!/usr/bin/env python3
"""Golden reports: the `--json` of every sample kernel, every op family, the memory traces and the example models,
recorded once and compared byte for byte afterwards (the wall-clock keys left out; floats that differ in their last
bits only, as another Debian release's compiler or libm may round, pass with a note). Issue 18 restructures the stack
under the rule "every result identical"; this is that rule as a test. Timing-only runs are deterministic, so any
difference is a change of behaviour: either a bug, or a model change to record again on purpose (--record) and say
so in the commit.

  golden.py NPUSIM [--record]      compare against tests/golden/baseline/ (or write it)
  golden.py NPUSIM --only NAME     one case

The example models are exported by examples/models/make_models.py (small size) with the venv's PyTorch each time.
"""
import argparse
import difflib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BASELINE = HERE / "baseline"

# name -> npusim arguments (--json is added). One representative call per op family and per sample kernel, on the
# split 910b and, for the families with a coupled-chip path, the coupled 910.
CASES = {
    "kernel_vector_add": ["kernel", "vector_add"],
    "kernel_vector_add_1buf": ["kernel", "vector_add", "-p", "buffer_num=1", "-p", "blocks=8"],
    "kernel_vector_peak": ["kernel", "vector_peak"],
    "kernel_cube_peak": ["kernel", "cube_peak"],
    "kernel_matmul_tile": ["kernel", "matmul_tile", "-p", "K=1024"],
    "kernel_hbm_stream": ["kernel", "hbm_stream", "-p", "bytes=16777216"],
    "kernel_hbm_stream_random": ["kernel", "hbm_stream", "-p", "bytes=4194304", "-p", "pattern=random", "-p", "read_ratio=70"],
    "kernel_l2_stream": ["kernel", "l2_stream", "-p", "working_set=8388608"],
    "kernel_latency_probe": ["kernel", "latency_probe"],
    "kernel_pipeline_demo": ["kernel", "pipeline_demo"],
    "kernel_vector_add_910": ["kernel", "vector_add", "--config", "910"],
    "op_add_broadcast": ["op", "add", "-p", "shape=1024x1000", "-p", "shape_b=1000"],
    "op_matmul": ["op", "matmul", "-p", "M=1024", "-p", "N=1024", "-p", "K=1024"],
    "op_matmul_epilogue": ["op", "matmul", "-p", "M=300", "-p", "N=200", "-p", "K=77", "-p", "bias=1", "-p", "act=gelu"],
    "op_matmul_batched_910": ["op", "matmul", "-p", "B=4", "-p", "M=256", "-p", "N=256", "-p", "K=256", "--config", "910"],
    "op_flash_attention": ["op", "flash_attention", "-p", "B=1", "-p", "N=8", "-p", "KVN=2", "-p", "S=1000", "-p", "D=128",
                           "-p", "causal=1"],
    "op_flash_attention_910": ["op", "flash_attention", "-p", "B=1", "-p", "N=4", "-p", "S=512", "-p", "D=64", "--config", "910"],
    "op_softmax": ["op", "softmax", "-p", "shape=512x4096"],
    "op_log_softmax": ["op", "log_softmax", "-p", "shape=256x1000"],
    "op_layernorm": ["op", "layernorm", "-p", "shape=2048x1024"],
    "op_add_layernorm": ["op", "add_layernorm", "-p", "shape=512x768"],
    "op_rmsnorm": ["op", "rmsnorm", "-p", "shape=1024x4096"],
    "op_swiglu": ["op", "swiglu", "-p", "shape=512x5632"],
    "op_rope": ["op", "rope", "-p", "shape=4x512x128"],
    "op_rope_interleaved": ["op", "rope_interleaved", "-p", "shape=2x256x64"],
    "op_gelu_tanh": ["op", "gelu_tanh", "-p", "shape=1024x1024", "--dtype", "bf16"],
    "op_cast": ["op", "cast", "-p", "shape=1024x1024", "-p", "to=fp32"],
    "op_reduce_sum": ["op", "reduce_sum", "-p", "shape=64x128x256", "-p", "axis=1"],
    "op_transpose": ["op", "transpose", "-p", "shape=8x512x256"],
    "op_slice": ["op", "slice", "-p", "shape=64x512", "-p", "starts=0,10", "-p", "ends=64,500", "-p", "steps=2,1"],
    "op_concat": ["op", "concat", "-p", "shapes=128x64,128x96", "-p", "axis=1"],
    "op_split": ["op", "split", "-p", "shape=128x160", "-p", "axis=1", "-p", "sizes=64,96"],
    "op_expand": ["op", "expand", "-p", "shape=1x512", "-p", "to=256x512"],
    "op_fused_elementwise": ["op", "fused_elementwise", "-p", "expr=mul(silu(x0),x1)", "-p", "shape=512x1024"],
    "op_softmax_310p": ["op", "softmax", "-p", "shape=256x1024", "--config", "310p"],
    # The row ops' other paths: rows too long for a tile (chunked, two passes), LayerNorm statistics, BSND RoPE,
    # fp32 and bf16.
    "op_softmax_long": ["op", "softmax", "-p", "shape=8x40000"],
    "op_log_softmax_long_fp32": ["op", "log_softmax", "-p", "shape=4x20000", "--dtype", "fp32"],
    "op_layernorm_chunk_stats": ["op", "layernorm", "-p", "shape=64x2048", "-p", "chunk=512", "-p", "stats=1"],
    "op_add_layernorm_long_bf16": ["op", "add_layernorm", "-p", "shape=16x8192", "--dtype", "bf16"],
    "op_layernorm_stats_fp16": ["op", "layernorm", "-p", "shape=128x1000", "-p", "stats=1"],
    "op_rmsnorm_fp32": ["op", "rmsnorm", "-p", "shape=256x1024", "--dtype", "fp32"],
    "op_rope_bsnd": ["op", "rope", "-p", "shape=2x64x8x128", "-p", "layout=bsnd"],
    # FlashAttention's other paths, split and coupled: masks (a table per batch, a key-padding row), SK != S, D = 256,
    # bf16, BSND.
    "op_flash_attention_mask": ["op", "flash_attention", "-p", "B=2", "-p", "N=4", "-p", "S=300", "-p", "SK=520", "-p", "D=64",
                                "-p", "mask=1", "-p", "mask_shape=2,1,300"],
    "op_flash_attention_padding_910": ["op", "flash_attention", "-p", "B=2", "-p", "N=2", "-p", "S=200", "-p", "D=128", "-p", "mask=1",
                                       "-p", "mask_shape=2,1,1", "-p", "causal=1", "--config", "910"],
    "op_flash_attention_d256_bf16": ["op", "flash_attention", "-p", "B=1", "-p", "N=2", "-p", "S=256", "-p", "D=256", "-p", "layout=bsnd",
                                     "--dtype", "bf16"],
    "op_flash_attention_mask_910": ["op", "flash_attention", "-p", "B=1", "-p", "N=2", "-p", "S=200", "-p", "SK=333", "-p", "D=64",
                                    "-p", "mask=1", "--config", "910"],
    "memtrace_random_read": ["memtrace", "traces/samples/random_read_64B.trace", "--no-l2"],
    "memtrace_mixed": ["memtrace", "traces/samples/mixed_rw_64B.trace"],
}
MODELS = ["gpt2", "llama", "bert"]


def normalise(report):
    """Leaves out what depends on the host (wall-clock time and rates) and on where files are."""
    sim = report.get("sim")
    if isinstance(sim, dict):
        for k in ("wall_seconds", "instructions_per_second", "requests_per_second"):
            sim.pop(k, None)
    model = report.get("model")
    if isinstance(model, dict) and "file" in model:
        model["file"] = os.path.basename(model["file"])
    return report


def run(npusim, args, cwd):
    p = subprocess.run([npusim, *args, "--json"], capture_output=True, text=True, cwd=cwd, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"npusim {' '.join(args)} failed:\n{p.stderr}")
    return json.dumps(normalise(json.loads(p.stdout)), indent=1, sort_keys=True) + "\n"


def close(a, b, rel=1e-9):
    """Equal, but for floats a last-bits difference (another compiler's or libm's rounding on another Debian release)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool) or isinstance(b, bool):
            return False
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    return a == b


def cases(models_dir):
    out = dict(CASES)
    for m in MODELS:
        out[f"model_{m}"] = ["run", str(models_dir / f"{m}.onnx")]
        out[f"model_{m}_unfused"] = ["run", str(models_dir / f"{m}.onnx"), "--no-fusion"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npusim")
    ap.add_argument("--record", action="store_true", help="write the baseline instead of comparing")
    ap.add_argument("--only", help="one case")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="golden_") as tmp:
        models = pathlib.Path(tmp) / "models"
        want_models = not a.only or a.only.startswith("model_")
        if want_models:
            subprocess.run([sys.executable, str(ROOT / "examples" / "models" / "make_models.py"), "--size", "small",
                            "--out", str(models)], check=True, capture_output=True)
        todo = {k: v for k, v in cases(models).items() if (not a.only or k == a.only) and (want_models or not k.startswith("model_"))}
        if a.record:
            BASELINE.mkdir(exist_ok=True)
        failed = []
        for name, args in todo.items():
            got = run(a.npusim, args, ROOT)
            path = BASELINE / f"{name}.json"
            if a.record:
                path.write_text(got)
                continue
            if not path.exists():
                failed.append(name)
                print(f"{name}: no baseline ({path}); record with --record")
                continue
            want = path.read_text()
            if got != want and close(json.loads(got), json.loads(want)):
                print(f"{name}: equal but for floating-point last bits (within 1e-9)")
            elif got != want:
                failed.append(name)
                diff = list(difflib.unified_diff(want.splitlines(), got.splitlines(), "baseline", "now", lineterm="", n=2))
                print(f"{name}: differs from the baseline (npusim {' '.join(args)}):")
                print("\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else ""))
        if a.record:
            print(f"recorded {len(todo)} reports in {BASELINE}")
            return 0
        print(f"{len(todo) - len(failed)} passed, {len(failed)} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
