"""`npusim sweep` and `npusim plot` from an architect's side: specs written as a user writes them (a folder of their
own, their own config file, units), checked against direct `npusim op` runs of the same configs, killed half way
and resumed, with invalid configs and failing runs recorded while the sweep goes on.

Environment: NPUSIM (the binary under test)."""
import csv
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

NPUSIM = os.environ["NPUSIM"]
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


def npusim(*args, cwd=None, timeout=600):
    return subprocess.run([NPUSIM, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def rows(folder):
    out = []
    for line in (folder / "results.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a torn line
            pass
    return out


def reports(folder):
    """key -> the run's saved report (reports.jsonl: one {"key", "report"} object a line)."""
    out = {}
    for line in (folder / "reports.jsonl").read_text().splitlines():
        try:
            j = json.loads(line)
        except json.JSONDecodeError:  # a line torn by a kill, as npusim's own readers skip it
            continue
        out[j["key"]] = j["report"]
    return out


def csv_rows(folder):
    with open(folder / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


MATMUL_SPEC = textwrap.dedent("""\
    name: user_sweep
    base: my_chip.yaml
    axes:
      grid:
        hbm.pin_rate: [1.6Gbps, 3.2Gbps]
      zip:
        cores.aic: [12, 24]
        cores.aiv: [24, 48]
    workloads:
      - name: mm
        op: matmul
        params: {M: 512, N: 512, K: 512}
      - op: add
        params: {shape: 1024x1024}
    metrics:
      - cycles
      - kernel.cycles
      - tflops: op.flops / (kernel.time_us * 1e6)
      - hbm_fraction: memory.hbm_avg_GBps / chip.peak_hbm_GBps
      - ub: config.buffers.ub.size
""")

MY_CHIP = """\
    extends: 910b
    name: my_chip
    l2:
      capacity: 96MiB
"""


def test_grid_and_zip_points_match_direct_runs(tmp_path):
    write(tmp_path / "my_chip.yaml", MY_CHIP)
    write(tmp_path / "spec.yaml", MATMUL_SPEC)
    p = npusim("sweep", "spec.yaml", "-j", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "sweep-user_sweep"
    r = rows(out)
    # grid (2 values) x zip (2 rows) = 4 points, x 2 workloads
    assert len(r) == 8 and {x["status"] for x in r} == {"ok"}
    assert sorted({(x["axes"]["hbm.pin_rate"], x["axes"]["cores.aic"], x["axes"]["cores.aiv"]) for x in r}) == [
        ("1.6Gbps", "12", "24"), ("1.6Gbps", "24", "48"), ("3.2Gbps", "12", "24"), ("3.2Gbps", "24", "48")]
    assert {x["workload"] for x in r} == {"mm", "add"}  # an unnamed workload is named after its op
    # Each row's metrics are the numbers a direct run of the same config prints.
    for x in r:
        if x["point"] != 1:
            continue
        op = ["matmul", "-p", "M=512", "-p", "N=512", "-p", "K=512"] if x["workload"] == "mm" else ["add", "-p", "shape=1024x1024"]
        d = npusim("op", *op, "--config", tmp_path / "my_chip.yaml", "--set", "hbm.pin_rate=1.6Gbps",
                   "--set", "cores.aic=24", "--set", "cores.aiv=48", "--json", cwd=tmp_path)
        rep = json.loads(d.stdout)
        assert x["metrics"]["cycles"] == rep["cycles"]
        assert x["metrics"]["kernel.cycles"] == rep["kernel"]["cycles"]
        info = json.loads(npusim("info", "--config", tmp_path / "my_chip.yaml", "--set", "hbm.pin_rate=1.6Gbps",
                                 "--set", "cores.aic=24", "--set", "cores.aiv=48", "--json").stdout)
        assert x["metrics"]["hbm_fraction"] == pytest.approx(rep["memory"]["hbm_avg_GBps"] / info["peak_hbm_GBps"], rel=1e-12)
        assert x["metrics"]["ub"] == info["buffers"]["ub_bytes"]
        if x["workload"] == "mm":
            assert x["metrics"]["tflops"] == pytest.approx(rep["op"]["flops"] / (rep["kernel"]["time_us"] * 1e6), rel=1e-12)
        else:
            assert x["metrics"]["tflops"] is None  # add reports no flops: the metric is empty, not an error
        # The saved report is the run's whole --json output (timing-only runs are deterministic).
        saved = reports(out)[x["key"]]
        saved.pop("sim"), rep.pop("sim")
        assert saved == rep
    # Same config, same hash; the config hash covers the resolved values (my_chip's L2 differs from 910b's).
    assert len({x["config_hash"] for x in r}) == 4
    assert len({x["config_hash"] for x in r if x["point"] == 0}) == 1
    # The CSV has the same rows in point order, axes and metrics as columns.
    c = csv_rows(out)
    assert [(int(x["point"]), x["workload"]) for x in c] == [(i, w) for i in range(4) for w in ("mm", "add")]
    assert list(c[0].keys())[:7] == ["point", "workload", "status", "config_hash", "hbm.pin_rate", "cores.aic", "cores.aiv"]
    # A faster HBM never makes the bandwidth-bound add slower (property of the model, not a fixed number).
    by = {(x["axes"]["hbm.pin_rate"], x["axes"]["cores.aic"], x["workload"]): x["metrics"]["kernel.cycles"] for x in r}
    assert by[("3.2Gbps", "24", "add")] < by[("1.6Gbps", "24", "add")]


def test_rerun_skips_finished_runs_and_new_metrics_come_from_saved_reports(tmp_path):
    write(tmp_path / "my_chip.yaml", MY_CHIP)
    spec = write(tmp_path / "spec.yaml", MATMUL_SPEC)
    assert npusim("sweep", spec, "-j", "2", "-o", tmp_path / "out", cwd=tmp_path).returncode == 0
    before = (tmp_path / "out" / "reports.jsonl").read_bytes()
    # A metric added to the spec is read from the saved reports: nothing runs again.
    spec.write_text(spec.read_text() + "  - l2_hits: memory.l2_hit_rate\n")
    p = npusim("sweep", spec, "-j", "2", "-o", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "8 finished earlier" in p.stderr and "0 to run" in p.stderr
    assert (tmp_path / "out" / "reports.jsonl").read_bytes() == before
    r = rows(tmp_path / "out")
    assert len(r) == 8 and all(isinstance(x["metrics"]["l2_hits"], float) for x in r)
    # A new axis value adds points; only those run.
    spec.write_text(spec.read_text().replace("[1.6Gbps, 3.2Gbps]", "[1.6Gbps, 3.2Gbps, 2.4Gbps]"))
    p = npusim("sweep", spec, "-j", "2", "-o", tmp_path / "out", cwd=tmp_path)
    assert "8 finished earlier" in p.stderr and "4 to run" in p.stderr, p.stderr
    assert len(rows(tmp_path / "out")) == 12
    status = npusim("sweep", spec, "--status", "-o", tmp_path / "out", cwd=tmp_path)
    assert "12 runs: 12 ok, 0 failed, 0 timeout, 0 invalid, 0 not run" in status.stdout


def test_invalid_configs_and_failing_runs_are_recorded_and_the_sweep_goes_on(tmp_path):
    write(tmp_path / "spec.yaml", """\
        name: mixed
        axes:
          grid:
            buffers.ub.size: [192KiB, 1000B, 256KiB]
        workloads:
          - name: good
            op: add
            params: {shape: 256x256}
          - name: bad
            op: matmul
            params: {M: 16, N: 16}
    """)
    p = npusim("sweep", "spec.yaml", "-j", "2", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = {(x["point"], x["workload"]): x for x in rows(tmp_path / "sweep-mixed")}
    assert len(r) == 6
    # 1000 B is not a multiple of the UB's 32 B alignment: recorded as invalid with the loader's message, not run.
    assert r[(1, "good")]["status"] == "invalid" and "buffers.ub.size" in r[(1, "good")]["error"]
    assert r[(0, "good")]["status"] == "ok" and r[(2, "good")]["status"] == "ok"
    # The matmul without K fails at every valid point with npusim's own message; the others still ran.
    assert r[(0, "bad")]["status"] == "failed" and "K" in r[(0, "bad")]["error"]
    assert "2 failed" in p.stderr
    assert [x["status"] for x in csv_rows(tmp_path / "sweep-mixed")] == ["ok", "failed", "invalid", "invalid", "ok", "failed"]
    # A rerun does not redo failures unless asked.
    p = npusim("sweep", "spec.yaml", cwd=tmp_path)
    assert "0 to run" in p.stderr
    p = npusim("sweep", "spec.yaml", "--retry-failed", cwd=tmp_path)
    assert "2 to run" in p.stderr


def slow_spec(tmp_path):
    # 12 runs of about 0.15 s each, one at a time.
    return write(tmp_path / "slow.yaml", """\
        name: slow
        axes:
          grid:
            hbm.pin_rate: [1.6Gbps, 2.4Gbps, 3.2Gbps]
            l2.capacity: [48MiB, 96MiB, 144MiB, 192MiB]
        workloads:
          - op: matmul
            params: {M: 2048, N: 2048, K: 2048}
        metrics: [kernel.cycles]
    """)


def wait_rows(folder, n, proc, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        if (folder / "results.jsonl").exists() and len(rows(folder)) >= n:
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("the sweep made no progress")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_sweep_killed_half_way_resumes_without_redoing_finished_runs(tmp_path, sig):
    spec = slow_spec(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.Popen([NPUSIM, "sweep", spec, "-j", "1", "-o", out], stderr=subprocess.PIPE, text=True)
    wait_rows(out, 3, proc)
    proc.send_signal(sig)
    err = proc.communicate(timeout=60)[1]
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "interrupted" in err and "run the same command to resume" in err
    finished = {x["key"]: x for x in rows(out)}
    assert 3 <= len(finished) < 12
    saved = (out / "reports.jsonl").read_bytes()
    assert set(reports(out)) == set(finished)  # a killed run left no report behind
    time.sleep(0.01)
    p = npusim("sweep", spec, "-j", "2", "-o", out)
    assert p.returncode == 0, p.stderr
    assert f"{len(finished)} finished earlier" in p.stderr and f"{12 - len(finished)} to run" in p.stderr
    final = rows(out)
    assert len(final) == 12 and len({x["key"] for x in final}) == 12
    # The runs finished before the kill were not run again: same reports, same rows.
    assert (out / "reports.jsonl").read_bytes().startswith(saved) and len(reports(out)) == 12
    for x in final:
        if x["key"] in finished:
            assert x["metrics"] == finished[x["key"]]["metrics"] and x["wall_s"] == finished[x["key"]]["wall_s"]
    # No process of the killed sweep is left running.
    time.sleep(0.2)
    assert subprocess.run(["pgrep", "-f", "op matmul -p M=2048.*l2.capacity"], capture_output=True).stdout.strip() == b""


def test_timeout_records_the_run_and_moves_on(tmp_path):
    write(tmp_path / "spec.yaml", """\
        axes:
          grid:
            cores.aic: [24]
        workloads:
          - name: slow
            op: matmul
            params: {M: 4096, N: 4096, K: 4096}
          - name: quick
            op: add
            params: {shape: 64x64}
    """)
    p = npusim("sweep", "spec.yaml", "--timeout", "0.05", "-j", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = {x["workload"]: x for x in rows(tmp_path / "sweep-spec")}
    assert r["slow"]["status"] == "timeout" and "--timeout" in r["slow"]["error"]
    assert r["quick"]["status"] in ("ok", "timeout")  # a loaded machine may time out the quick one too


def test_random_axes_are_reproducible_and_derived_keys_are_exact(tmp_path):
    write(tmp_path / "spec.yaml", """\
        name: rnd
        axes:
          random:
            seed: 7
            count: 5
            keys:
              cores.aic: {min: 4, max: 24}
              hbm.pin_rate: {min: 1Gbps, max: 4Gbps, log: true}
              l2.capacity: {choices: [48MiB, 96MiB]}
        derived:
          cores.aiv: cores.aic * 2
          buffers.ub.size: floor(196608 * 24 / cores.aic / 65536) * 65536
        workloads:
          - op: add
            params: {shape: 64x64}
    """)
    a = npusim("sweep", "spec.yaml", "--dry-run", cwd=tmp_path)
    b = npusim("sweep", "spec.yaml", "--dry-run", cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and a.stdout.count("point ") == 5
    (tmp_path / "spec.yaml").write_text((tmp_path / "spec.yaml").read_text().replace("seed: 7", "seed: 8"))
    assert npusim("sweep", "spec.yaml", "--dry-run", cwd=tmp_path).stdout != a.stdout
    (tmp_path / "spec.yaml").write_text((tmp_path / "spec.yaml").read_text().replace("seed: 8", "seed: 7"))
    assert npusim("sweep", "spec.yaml", "-j", "2", cwd=tmp_path).returncode == 0
    for x in rows(tmp_path / "sweep-rnd"):
        aic = int(x["axes"]["cores.aic"])
        assert 4 <= aic <= 24
        assert 1e9 <= x["values"]["hbm.pin_rate"] <= 4e9
        assert x["axes"]["l2.capacity"] in ("48MiB", "96MiB")
        assert x["derived"]["cores.aiv"] == str(2 * aic)
        assert int(x["derived"]["buffers.ub.size"]) == (196608 * 24 // aic // 65536) * 65536
        assert x["status"] == "ok"
        # The derived keys reached the run: the chip it reports has them.
        assert x["chip"]["cores"]["aiv"] == 2 * aic and x["chip"]["buffers"]["ub_bytes"] == int(x["derived"]["buffers.ub.size"])


@pytest.mark.parametrize("text, message", [
    ("axes: {grid: {cores.aik: [1, 2]}}\nworkloads: [{op: add}]", "spec.yaml:1: 'cores.aik' is not a config key"),
    ("axes:\n  zip:\n    cores.aic: [1, 2]\n    cores.aiv: [2]\nworkloads: [{op: add}]",
     "spec.yaml:4: axes.zip.cores.aiv has 1 values but cores.aic has 2"),
    ("axes: {grid: {cores.aic: [12]}}", "the spec has no workloads"),
    ("workloads: [{op: add, model: x.onnx}]", "needs exactly one of op: NAME, kernel: NAME|FILE or model: FILE.onnx"),
    ("workloads: [{model: missing.onnx}]", "no file"),
    ("workloads: [{op: add, parms: {shape: 8}}]", "unknown key 'parms'"),
    ("workloads: [{op: add}]\nmetrics: [{t: 'op.flops / '}]", "metrics.t: expression 'op.flops / ': a value is missing"),
    ("derived: {cores.aiv: cores.aix * 2}\nworkloads: [{op: add}]", "'cores.aix' is not a config key"),
    ("workloads: [{op: add, args: [--set, l2.capacity=1MiB]}]", "--set is set by the sweep itself"),
    ("axes: {random: {count: 3, keys: {cores.aic: {min: 9, max: 2}}}}\nworkloads: [{op: add}]", "min is above max"),
    ("name: [a\n", "YAML syntax error"),
])
def test_bad_specs_are_named_errors(tmp_path, text, message):
    (tmp_path / "spec.yaml").write_text(text)
    p = npusim("sweep", "spec.yaml", cwd=tmp_path)
    assert p.returncode == 1 and message in p.stderr, p.stderr
    assert not (tmp_path / "sweep-spec").exists()


def test_bad_command_lines_are_refused(tmp_path):
    p = npusim("sweep", tmp_path / "nope.yaml")
    assert p.returncode == 1 and "cannot read the sweep spec" in p.stderr
    write(tmp_path / "s.yaml", "workloads: [{op: add}]\n")
    p = npusim("sweep", tmp_path / "s.yaml", "--partition", "x")
    assert p.returncode == 1 and "--partition applies to --slurm sweeps" in p.stderr
    p = npusim("sweep", tmp_path / "s.yaml", "-j", "0")
    assert p.returncode == 2


def test_plot_draws_every_view_and_names_bad_arguments(tmp_path):
    write(tmp_path / "my_chip.yaml", MY_CHIP)
    write(tmp_path / "spec.yaml", MATMUL_SPEC + "plots:\n  pareto: [[min:kernel.cycles, max:tflops]]\n")
    assert npusim("sweep", "spec.yaml", "-j", "2", cwd=tmp_path).returncode == 0
    p = npusim("plot", "sweep-user_sweep", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    plots = tmp_path / "sweep-user_sweep" / "plots"
    names = {f.name for f in plots.iterdir()}
    for n in ("roofline.png", "pipes.png", "metric_kernel_cycles_vs_hbm_pin_rate.png",
              "pareto_kernel_cycles_tflops.png", "report.html"):
        assert n in names
    svg = (plots / "roofline.svg").read_text()
    assert "operational intensity [FLOP per HBM byte]" in svg and "achieved TFLOPS" in svg
    assert "hbm.pin_rate [Gbps]" in (plots / "metric_kernel_cycles_vs_hbm_pin_rate.svg").read_text()
    p = npusim("plot", "sweep-user_sweep", "--metric", "nope", cwd=tmp_path)
    assert p.returncode == 1 and "'nope' is not an axis or a metric" in p.stderr
    p = npusim("plot", tmp_path / "empty", cwd=tmp_path)
    assert p.returncode == 1 and "no results.jsonl" in p.stderr


def chromium(tmp_path):
    """Debian's chromium, headless, driven through Debian's chromedriver (nothing downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=1280,1600", f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        opts.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def image(png):
    """A screenshot as an (h, w, 3) int array."""
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_html_report_renders_in_a_real_browser_with_its_plots_and_axis_labels(tmp_path):
    from selenium.webdriver.common.by import By

    write(tmp_path / "my_chip.yaml", MY_CHIP)
    write(tmp_path / "spec.yaml", MATMUL_SPEC)
    assert npusim("sweep", "spec.yaml", "-j", "2", cwd=tmp_path).returncode == 0
    assert npusim("plot", "sweep-user_sweep", cwd=tmp_path).returncode == 0
    plots = tmp_path / "sweep-user_sweep" / "plots"
    browser = chromium(tmp_path)
    try:
        browser.get((plots / "report.html").as_uri())
        assert "npusim sweep user_sweep" in browser.title
        figures = browser.find_elements(By.CSS_SELECTOR, "figure")
        assert len(figures) == len(list(plots.glob("*.svg"))) >= 10
        for fig in figures:
            browser.execute_script("arguments[0].scrollIntoView()", fig)
            svg = fig.find_element(By.CSS_SELECTOR, "svg")
            assert svg.size["width"] > 300 and svg.size["height"] > 200, fig.get_attribute("id")
            # The plot as the browser drew it: not blank, and with the colours of lines, markers or bars.
            shot = image(svg.screenshot_as_png)
            inked = (shot.sum(axis=2) < 600).mean()
            assert inked > 0.02, (fig.get_attribute("id"), inked)
            saturated = shot[(shot.max(axis=2) - shot.min(axis=2)) > 60]  # coloured, not grey
            assert len({tuple(p) for p in saturated}) > 10, fig.get_attribute("id")
        # The axes' labels are drawn: found as text in the page and inked where the browser put them.
        labels = {t.text: t for t in browser.find_elements(By.CSS_SELECTOR, "figure svg text")}
        for label in ("operational intensity [FLOP per HBM byte]", "achieved TFLOPS", "hbm.pin_rate [Gbps]",
                      "kernel.cycles", "busy fraction per pipe (stacked)"):
            assert label in labels, label
            el = labels[label]
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
            shot = image(el.screenshot_as_png)
            dark = int((shot.sum(axis=2) < 300).sum())
            assert dark > 20, (label, dark)
        # The runs table lists every run.
        assert len(browser.find_elements(By.CSS_SELECTOR, "table tr")) == 1 + 8
    finally:
        browser.quit()


def test_users_own_kernel_and_model_with_dims_run_from_another_folder(tmp_path):
    # The user's Ascend C kernel (the SDK's add example, copied out of the repository) and an ONNX model with a
    # symbolic batch dim, in the user's folder; the sweep is started from elsewhere: relative paths in a workload
    # (its file, its args) are the spec's.
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    src = SOURCE_DIR / "examples" / "kernels" / "add_double_buffer"
    user = tmp_path / "my_work"
    user.mkdir()
    for f in ("add_custom.cpp", "tiling.json"):
        (user / f).write_text((src / f).read_text())
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), user / "tiny.onnx")
    write(user / "spec.yaml", """\
        name: mine
        axes:
          grid:
            hbm.pin_rate: [1.6Gbps, 3.2Gbps]
        workloads:
          - name: add
            kernel: add_custom.cpp
            args: [--block-dim, "8", --arg, "x=random:fp16:8x16384", --arg, "y=random:fp16:8x16384",
                   --arg, "z=out:fp16:8x16384", --tiling, "totalLength=131072,tileNum=8", --tiling-schema, tiling.json]
          - name: tiny_b8
            model: tiny.onnx
            dims: {batch: 8}
          - name: tiny_b256
            model: tiny.onnx
            dims: {batch: 256}
        metrics: [cycles, kernel.cycles]
    """)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = npusim("sweep", user / "spec.yaml", "-j", "1", cwd=elsewhere)
    assert p.returncode == 0, p.stderr
    r = {(x["point"], x["workload"]): x for x in rows(elsewhere / "sweep-mine")}
    assert len(r) == 6 and all(x["status"] == "ok" for x in r.values()), [x["error"] for x in r.values()]
    d = npusim("kernel", "add_custom.cpp", "--block-dim", "8", "--arg", "x=random:fp16:8x16384", "--arg",
               "y=random:fp16:8x16384", "--arg", "z=out:fp16:8x16384", "--tiling", "totalLength=131072,tileNum=8",
               "--tiling-schema", "tiling.json", "--set", "hbm.pin_rate=1.6Gbps", "--json", cwd=user)
    assert r[(0, "add")]["metrics"]["kernel.cycles"] == json.loads(d.stdout)["kernel"]["cycles"]
    d = npusim("run", "tiny.onnx", "--dim", "batch=256", "--set", "hbm.pin_rate=3.2Gbps", "--json", cwd=user)
    assert r[(1, "tiny_b256")]["metrics"]["cycles"] == json.loads(d.stdout)["cycles"]
    assert r[(1, "tiny_b256")]["metrics"]["cycles"] > r[(1, "tiny_b8")]["metrics"]["cycles"]


def test_a_runs_non_utf8_message_is_recorded_not_fatal(tmp_path):
    # A user's kernel source in Latin-1 that does not compile: the compiler echoes its bytes into the error.
    (tmp_path / "latin1.cpp").write_bytes(b'#include "kernel_operator.h"\n// caf\xe9\n'
                                          b'extern "C" __global__ __aicore__ void k(GM_ADDR x) {}\n#error caf\xe9 \xff\n')
    write(tmp_path / "spec.yaml", """\
        workloads:
          - kernel: latin1.cpp
            args: [--block-dim, "1", --arg, "x=zeros:fp16:16"]
          - op: add
            params: {shape: 64x64}
    """)
    p = npusim("sweep", "spec.yaml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    r = {x["workload"]: x for x in rows(tmp_path / "sweep-spec")}
    assert r["latin1"]["status"] == "failed" and "does not compile" in r["latin1"]["error"]
    assert "\ufffd" in r["latin1"]["error"] and r["add"]["status"] == "ok"
    assert (tmp_path / "sweep-spec" / "logs" / f"{r['latin1']['key']}.err").read_bytes().count(b"\xe9") >= 1


def test_torn_last_lines_are_skipped_and_ended(tmp_path):
    write(tmp_path / "spec.yaml", """\
        axes:
          grid:
            l2.capacity: [48MiB, 96MiB, 192MiB]
        workloads:
          - op: add
            params: {shape: 64x64}
    """)
    assert npusim("sweep", "spec.yaml", cwd=tmp_path).returncode == 0
    out = tmp_path / "sweep-spec"
    lines = (out / "results.jsonl").read_text().splitlines()
    # A kill while writing: the last row and the last report are cut short.
    (out / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    reps = (out / "reports.jsonl").read_text()
    (out / "reports.jsonl").write_text(reps[: len(reps) - 40])
    p = npusim("sweep", "spec.yaml", cwd=tmp_path)
    assert p.returncode == 0 and "2 finished earlier" in p.stderr and "1 to run" in p.stderr, p.stderr
    assert {x["status"] for x in rows(out)} == {"ok"} and len(rows(out)) == 3
    # The torn report line was ended: the rerun's report is a line of its own and readable.
    assert len(reports(out)) == 3


@pytest.mark.parametrize("text, message", [
    ("axes: {zip: {}}\nworkloads: [{op: add}]", "axes.zip has no axes"),
    ("axes: {random: {count: 2, keys: {cores.aic: {min: 1, max: 4, log: maybe}}}}\nworkloads: [{op: add}]",
     "axes.random.keys.cores.aic.log:"),
    ("axes:\n  grid:\n" + "".join(f"    {k}: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" for k in (
        "cores.aic", "cores.aiv", "l2.slices", "l2.ways", "hbm.stacks", "vector.max_repeat", "queues.v")) +
     "workloads: [{op: add}]", "axes.grid gives more than 1,000,000 points"),
])
def test_more_bad_specs(tmp_path, text, message):
    (tmp_path / "spec.yaml").write_text(text)
    p = npusim("sweep", "spec.yaml", "--dry-run", cwd=tmp_path, timeout=60)
    assert p.returncode == 1 and message in p.stderr, p.stderr


def test_log_uniform_integers_reach_both_ends(tmp_path):
    write(tmp_path / "spec.yaml", """\
        axes:
          random:
            seed: 3
            count: 60
            keys:
              queues.v: {min: 1, max: 2, log: true}
        workloads: [{op: add}]
    """)
    p = npusim("sweep", "spec.yaml", "--dry-run", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "queues.v=1 " in p.stdout and "queues.v=2 " in p.stdout
