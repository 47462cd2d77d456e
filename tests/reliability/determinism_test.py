"""Determinism (issue 21, item 6): the same run gives byte-identical outputs, whatever the process around it.

Each workload runs twice, the second time from another working directory, with another time zone, temporary
directory and thread settings (the sweep also with another number of jobs), and everything it writes is compared byte for byte: the
--json report (less `sim.wall_seconds` and `sim.instructions_per_second`, the host's wall clock), the trace, the
op summary, the statistics and the output tensors. Across machines the golden reports (tests/golden) hold the same
--json to the recorded values on every machine CI runs on.

Environment: NPUSIM (the binary under test)."""
import csv
import json
import os
import pathlib
import subprocess
import textwrap

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NPUSIM = os.environ["NPUSIM"]
WALL_CLOCK = ("wall_seconds", "instructions_per_second", "requests_per_second")  # host time: may differ
# Another process around the same run: working directory, time zone, thread settings, allocator, temp directory.
# (npusim never calls setlocale, so its numbers are formatted in the C locale whatever LANG says.)
OTHER_ENV = {"TZ": "Asia/Kolkata", "OMP_NUM_THREADS": "3", "MALLOC_ARENA_MAX": "1"}


def run_twice(tmp_path, args, files=()):
    """Runs `npusim ARGS` in two directories (FILE placeholders are per run); returns both runs' outputs."""
    outs = []
    for i, extra_env in enumerate(({}, OTHER_ENV)):
        d = tmp_path / f"run{i}"
        d.mkdir()
        argv = [str(a).replace("{d}", str(d)) for a in args]
        env = {**os.environ, **extra_env, "TMPDIR": str(d)}
        p = subprocess.run([NPUSIM, *argv], capture_output=True, text=True, cwd=d, env=env, timeout=600)
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        for key in WALL_CLOCK:
            report["sim"].pop(key, None)
        for key in ("trace", "summary", "stats"):  # the paths given, which differ by directory
            report.pop(key, None)
        outs.append((json.dumps(report, sort_keys=True), {f: (d / f).read_bytes() for f in files}))
    return outs


def assert_identical(outs):
    (report0, files0), (report1, files1) = outs
    assert report0 == report1
    for name in files0:
        assert files0[name] == files1[name], f"{name} differs between runs"


def test_op_report_trace_summary_and_stats_are_identical(tmp_path):
    args = ["op", "flash_attention", "-p", "B=1", "-p", "N=8", "-p", "S=512", "-p", "D=64", "-p", "causal=1",
            "--dtype", "fp16", "--json", "--trace", "{d}/t.json", "--trace-cores", "all", "--summary", "{d}/s.csv",
            "--stats", "{d}/stats.json"]
    assert_identical(run_twice(tmp_path, args, ["t.json", "s.csv", "stats.json"]))


def test_multi_stream_kernel_is_identical(tmp_path):
    args = ["kernel", "pipeline_demo", "-p", "streams=3", "-p", "chunks=4", "--json", "--trace", "{d}/t.json.gz"]
    outs = run_twice(tmp_path, args, ["t.json.gz"])
    assert_identical(outs)


def test_functional_model_outputs_are_identical(tmp_path):
    # A user's small model: MatMul -> Add -> Relu -> Softmax, with weights, run on values from files.
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])], initializer=[w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "mlp.onnx")
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "x.npy", rng.standard_normal((16, 64)).astype(np.float32))
    args = ["run", tmp_path / "mlp.onnx", "--functional", "--inputs", tmp_path / "in", "--outputs", "{d}/out",
            "--json", "--trace", "{d}/t.json"]
    outs = run_twice(tmp_path, args, ["out/y.npy", "t.json"])
    assert_identical(outs)


def test_sweep_results_are_identical_with_one_or_two_jobs(tmp_path):
    spec = textwrap.dedent("""\
        name: det
        base: tiny
        axes:
          grid:
            hbm.pin_rate: [1.6Gbps, 3.2Gbps]
            l2.capacity: [512KiB, 1MiB]
        workloads:
          - op: matmul
            params: {M: 128, N: 128, K: 128}
          - op: softmax
            params: {shape: 64x256}
        metrics:
          - cycles
          - memory.hbm_read_bytes
          - memory.l2_hit_rate
        """)
    tables = []
    for jobs in ("1", "2"):
        d = tmp_path / f"j{jobs}"
        d.mkdir()
        (d / "spec.yaml").write_text(spec)
        env = {**os.environ, **(OTHER_ENV if jobs == "2" else {})}
        p = subprocess.run([NPUSIM, "sweep", "spec.yaml", "-j", jobs, "-q"], capture_output=True, text=True, cwd=d,
                           env=env, timeout=600)
        assert p.returncode == 0, p.stderr
        with open(d / "sweep-det" / "results.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            r.pop("wall_s")
        tables.append(rows)
    assert len(tables[0]) == 8 and {r["status"] for r in tables[0]} == {"ok"}
    assert tables[0] == tables[1]
