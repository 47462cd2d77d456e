"""The example sweeps of configs/sweeps/ run as a user runs them (docs/exploration.md) and produce their plots; their
results keep the properties the model must have (a wider Vector unit never slows the vector-bound FlashAttention,
no MatMul passes its chip's roofs, a bigger L2 never lowers the LLaMA block's hit rate).

Environment: NPUSIM (the binary under test). The LLaMA example reads build/models/llama.onnx, which this test makes
with examples/models/make_models.py when it is missing, as the spec's comment tells a user to."""
import csv
import os
import pathlib
import subprocess
import sys

NPUSIM = os.environ["NPUSIM"]
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
SWEEPS = SOURCE_DIR / "configs" / "sweeps"


def sweep_and_plot(name, tmp_path):
    out = tmp_path / name
    p = subprocess.run([NPUSIM, "sweep", SWEEPS / f"{name}.yaml", "-j", "2", "-o", out], capture_output=True, text=True,
                       timeout=1200)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([NPUSIM, "plot", out], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert (out / "plots" / "report.html").stat().st_size > 10000
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    return out, rows


def test_flash_attention_over_ub_size_and_vector_width(tmp_path):
    out, rows = sweep_and_plot("fa_ub_vector", tmp_path)
    assert len(rows) == 9
    for ub in ("128KiB", "192KiB", "256KiB"):
        by_width = {int(r["vector.bytes_per_repeat"]): int(r["kernel.cycles"]) for r in rows if r["buffers.ub.size"] == ub}
        assert by_width[512] <= by_width[256] < by_width[128], (ub, by_width)
    assert all(0 < float(r["cube_fraction"]) < 1 for r in rows)
    for f in ("metric_kernel_cycles_vs_vector_bytes_per_repeat.png", "pipes.png", "roofline.png",
              "pareto_kernel_time_us_buffers_ub_size.png"):
        assert (out / "plots" / f).exists(), f


def test_matmul_roofline_over_hbm_bandwidth_and_cores(tmp_path):
    out, rows = sweep_and_plot("matmul_roofline", tmp_path)
    assert len(rows) == 27
    for r in rows:
        assert int(r["cores.aiv"]) == 2 * int(r["cores.aic"])  # derived
        assert 0 < float(r["cube_fraction"]) <= 1 and 0 < float(r["hbm_fraction"]) <= 1
    # The skinny GEMM is bandwidth-bound: at every core count, quadrupling HBM bandwidth speeds it up.
    for aic in ("8", "16", "24"):
        t = {r["hbm.pin_rate"]: float(r["kernel.time_us"]) for r in rows if r["workload"] == "gemv_like" and r["cores.aic"] == aic}
        assert t["6.4Gbps"] < t["1.6Gbps"], (aic, t)
    # The big square GEMM is compute-bound: three times the cube cores, at least twice the TFLOPS.
    t4 = {(r["hbm.pin_rate"], r["cores.aic"]): float(r["tflops"]) for r in rows if r["workload"] == "square_4k"}
    assert all(t4[(p, "24")] > 2 * t4[(p, "8")] for p in ("1.6Gbps", "3.2Gbps", "6.4Gbps"))
    assert (out / "plots" / "roofline.png").exists()


def test_llama_block_over_l2_size(tmp_path):
    model = SOURCE_DIR / "build" / "models" / "llama.onnx"
    if not model.exists():
        p = subprocess.run([sys.executable, SOURCE_DIR / "examples" / "models" / "make_models.py", "--size", "medium",
                            "--dtype", "float16", "--models", "llama", "--out", model.parent],
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr
    out, rows = sweep_and_plot("llama_l2", tmp_path)
    assert len(rows) == 7
    order = sorted(rows, key=lambda r: int(r["point"]))
    hits = [float(r["memory.l2_hit_rate"]) for r in order]
    reads = [int(r["memory.hbm_read_bytes"]) for r in order]
    assert hits == sorted(hits) and hits[-1] > hits[0]
    assert reads == sorted(reads, reverse=True) and reads[0] > reads[-1]
    assert (out / "plots" / "metric_memory_l2_hit_rate_vs_l2_capacity.png").exists()
