"""Soak (issue 21, item 5): hundreds of mixed ops, kernels and models, in one Python process and in many CLI
processes. Results stay identical from the first repetition to the last, and host memory stays flat: a long
session keeps a bounded record per device task (docs/runtime.md, "Memory of a long session") and nothing that
grows with the instructions it simulated or the kernels it launched; CLI processes use the same memory on every
repetition. A leak within one process shows in the sanitizer suite, which runs the CLI half under ASan and UBSan,
whose LeakSanitizer fails any process that leaks (the Python module is not built there).

Environment: NPUSIM (the binary under test); NPUSIM_SANITIZED=1 in the sanitizer suite (fewer repetitions);
NPUSIM_NO_PYTHON=1 when the build has no Python module."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

NPUSIM = os.environ["NPUSIM"]
SANITIZED = os.environ.get("NPUSIM_SANITIZED") == "1"
HOST_TIME = ("wall_seconds", "instructions_per_second", "requests_per_second")
# What a long session may keep per device task: its record (name, times, per block and core the pipes' busy
# cycles, instructions and bytes, the pipe-pair overlaps), about 1.1 KB on tiny; the bound leaves room for the
# allocator's rounding. Anything kept per instruction or per launch's closure breaks it by far.
MAX_BYTES_PER_TASK = 2048


def mlp_bytes(rng):
    """A user's model written with onnx.helper: MatMul -> Add -> Gelu (erf form) -> LayerNormalization."""
    w = numpy_helper.from_array(rng.standard_normal((256, 64)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    g = numpy_helper.from_array(np.ones(64, np.float32), "g")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("LayerNormalization", ["r", "g"], ["y"], axis=-1, epsilon=1e-5)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64])], initializer=[w, b, g])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


PY_SOAK = textwrap.dedent("""\
    import json, sys
    import numpy as np, npusim
    sys.path.insert(0, sys.argv[2])
    from soak_test import mlp_bytes

    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

    rng = np.random.default_rng(3)
    dev = npusim.Device(config="tiny")
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((128, 256), (256, 128)))
    x = rng.standard_normal((32, 256)).astype(np.float32)
    q = rng.standard_normal((1, 2, 256, 64)).astype(np.float16)
    model = mlp_bytes(rng)
    calls = [lambda: npusim.ops.matmul(a, b), lambda: npusim.ops.softmax(x),
             lambda: npusim.ops.layer_norm(x, np.ones(256, np.float32), np.zeros(256, np.float32)),
             lambda: npusim.ops.flash_attention(q, q, q, causal=True), lambda: npusim.ops.add(x, x),
             lambda: npusim.ops.gelu(x), lambda: dev.run(model, {"x": x}).outputs["y"]]
    rounds, warm = int(sys.argv[1]), 20
    first, cycles = None, None
    for r in range(rounds):
        outs = [np.asarray(c()) for c in calls]
        now = [h["cycles"] for h in dev.history]
        dev.history.clear()  # the Python side's list of reports, kept by design; the device's own state is measured
        if first is None:
            first, cycles = outs, now
        else:
            assert all(np.array_equal(o, f) for o, f in zip(outs, first)), f"round {r}: outputs changed"
            # A call's span is counted in whole cycles from times in ns, and the device's clock phase against the
            # host's timeline moves from call to call: the same work measures the same within one cycle.
            assert all(abs(n - c) <= 1 for n, c in zip(now, cycles)), f"round {r}: cycles {now} vs {cycles}"
        if r == warm:
            start = (rss(), npusim.smi(print_table=False)["tasks"])
    end = (rss(), npusim.smi(print_table=False)["tasks"])
    print(json.dumps({"rss": [start[0], end[0]], "tasks": [start[1], end[1]], "calls": rounds * len(calls)}))
    """)


@pytest.mark.skipif(os.environ.get("NPUSIM_NO_PYTHON") == "1", reason="this build has no Python module")
def test_one_python_process_stays_identical_and_flat(tmp_path):
    (tmp_path / "soak.py").write_text(PY_SOAK)
    p = subprocess.run([sys.executable, tmp_path / "soak.py", "220", str(pathlib.Path(__file__).parent)],
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout.splitlines()[-1])
    grown, tasks = r["rss"][1] - r["rss"][0], r["tasks"][1] - r["tasks"][0]
    assert r["calls"] >= 1500 and tasks > 4000
    print(f"{grown / tasks:.0f} B per task over {tasks} tasks")
    assert grown < MAX_BYTES_PER_TASK * tasks, f"{grown / tasks:.0f} B per task over {tasks} tasks"


def cli_workloads(d):
    rng = np.random.default_rng(5)
    (d / "mlp.onnx").write_bytes(mlp_bytes(rng))
    (d / "in").mkdir()
    np.save(d / "in" / "x.npy", rng.standard_normal((32, 256)).astype(np.float32))
    tiny = ["--config", "tiny"]
    return {
        "matmul": ["op", "matmul", "-p", "M=256", "-p", "N=256", "-p", "K=256", *tiny, "--check"],
        "flash_attention": ["op", "flash_attention", "-p", "B=1", "-p", "N=2", "-p", "S=256", "-p", "D=64",
                            "-p", "causal=1", *tiny, "--check"],
        "layernorm": ["op", "layernorm", "-p", "shape=64x512", *tiny, "--check"],
        "vector_add": ["kernel", "vector_add", "-p", "n=65536", "-p", "tile=2048", *tiny, "--check"],
        "pipeline_demo": ["kernel", "pipeline_demo", "-p", "streams=2", "-p", "chunks=4", "-p", "bytes=65536", "--check"],
        "model": ["run", d / "mlp.onnx", *tiny, "--functional", "--inputs", d / "in"],
        "memtrace": ["memtrace", pathlib.Path(__file__).parents[2] / "traces/samples/mixed_rw_64B.trace", *tiny],
    }


def run_measured(args, scratch):
    """Runs npusim ARGS --json; returns (its report less host time, its peak resident memory in bytes)."""
    out_path, err_path = scratch / "stdout", scratch / "stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen([NPUSIM, *map(str, args), "--json"], stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)  # reaped here, for its resource usage
        p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, err_path.read_text()[-3000:]
    report = json.loads(out_path.read_text())
    for k in HOST_TIME:
        report.get("sim", {}).pop(k, None)
    return json.dumps(report, sort_keys=True), usage.ru_maxrss * 1024


def test_many_cli_processes_stay_identical_and_flat(tmp_path):
    workloads = cli_workloads(tmp_path)
    reps = 6 if SANITIZED else 16
    first, peaks = {}, {name: [] for name in workloads}
    for rep in range(reps):
        for name, args in workloads.items():
            text, peak = run_measured(args, tmp_path)
            assert first.setdefault(name, text) == text, f"{name}, repetition {rep}: the report changed"
            peaks[name].append(peak)
    # Every repetition of a workload peaks where its first did (within 5 % and 4 MB: the allocator and the
    # kernel's page accounting).
    for name, mem in peaks.items():
        assert max(mem) <= mem[0] * 1.05 + (4 << 20), f"{name}: peak resident memory {mem}"
    assert len(workloads) * reps >= (42 if SANITIZED else 100)
