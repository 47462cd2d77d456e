"""Traces at scale (docs/runtime.md, "Trace levels"): what each --trace-level shows, the core and time windows of
instruction slices, --trace-limit, gzip output, and the seed FlashAttention's default trace under 50 MB. Every
trace is also read by npusim-trace-check, the project's checker of the rules Perfetto's JSON importer applies.

Environment: NPUSIM (the binary under test), NPUSIM_TRACE_CHECK (the checker)."""
import gzip
import json
import os
import re
import subprocess

import pytest

NPUSIM = os.environ["NPUSIM"]
CHECK = os.environ["NPUSIM_TRACE_CHECK"]
# A FlashAttention on the 910b config: a mixed kernel, each block on a cube core and its two vector cores.
FA = ["op", "flash_attention", "-p", "B=1", "-p", "N=8", "-p", "S=512", "-p", "D=64", "-p", "causal=1", "--dtype", "fp16"]
SEED_FA = ["op", "flash_attention", "-p", "B=4", "-p", "N=32", "-p", "S=2048", "-p", "D=64", "-p", "causal=1",
           "--dtype", "fp16"]
CORE = re.compile(r"^(aic|aiv|core|vec)\d+$")
PIPES = {"S", "MTE1", "MTE2", "MTE3", "M", "V", "FIX"}


def run(args, trace, *extra):
    p = subprocess.run([NPUSIM, *args, "--json", "--trace", str(trace), *extra], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def checked(path):
    p = subprocess.run([CHECK, str(path)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


class Trace:
    """The parts of a trace the tests look at: process and track names, slices by track, flows."""

    def __init__(self, path):
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as f:
            self.events = json.load(f)["traceEvents"]
        self.process = {e["pid"]: e["args"]["name"] for e in self.events
                        if e["ph"] == "M" and e["name"] == "process_name"}
        self.track = {(e["pid"], e["tid"]): e["args"]["name"] for e in self.events
                      if e["ph"] == "M" and e["name"] == "thread_name"}
        self.slices = [e for e in self.events if e["ph"] == "X"]

    def on(self, pid, tid):
        return self.process[pid], self.track[(pid, tid)]

    def cores_with(self, tracks):
        """Core processes that have slices on any of `tracks`."""
        return {self.process[e["pid"]] for e in self.slices
                if CORE.match(self.process[e["pid"]]) and self.track[(e["pid"], e["tid"])] in tracks}

    def instr(self):
        return [e for e in self.slices if e.get("cat") == "instr"]


def kernel_tasks(report):
    return [t for t in report["tasks"] if t["type"] == "kernel"]


def test_task_level_has_no_core_tracks_and_flows_end_on_the_task(tmp_path):
    report, _ = run(FA, tmp_path / "t.json", "--trace-level", "task")
    checked(tmp_path / "t.json")
    t = Trace(tmp_path / "t.json")
    assert not [p for p in t.process.values() if CORE.match(p)]
    ends = [e for e in t.events if e["ph"] == "f"]
    assert len(ends) == len(kernel_tasks(report)) > 0
    assert all(t.process[e["pid"]] == "Runtime/TS" for e in ends)


def test_block_level_shows_every_block_of_every_kernel_once(tmp_path):
    report, _ = run(FA, tmp_path / "t.json", "--trace-level", "block")
    checked(tmp_path / "t.json")
    t = Trace(tmp_path / "t.json")
    cores = {p for p in t.process.values() if CORE.match(p)}
    assert cores, "no core process"
    assert {t.track[k] for k in t.track if CORE.match(t.process[k[0]])} == {"blocks"}
    blocks = [e for e in t.slices if e.get("cat") == "block"]
    for task in kernel_tasks(report):
        mine = [e for e in blocks if e["name"] == task["name"]]
        # Each block index appears on at least one core (a mixed block runs on a cube core and its vector cores).
        assert {e["args"]["block"] for e in mine} == set(range(task["block_dim"]))
    # The launch flows end on a block slice.
    ends = [e for e in t.events if e["ph"] == "f"]
    assert ends and all(t.on(e["pid"], e["tid"])[1] == "blocks" for e in ends)


def test_instr_level_traces_the_first_core_group_by_default_and_all_cores_on_request(tmp_path):
    run(FA, tmp_path / "first.json")
    run(FA, tmp_path / "all.json", "--trace-cores", "all")
    run(FA, tmp_path / "some.json", "--trace-cores", "aic1-2,aiv5")
    first, every, some = (Trace(tmp_path / f) for f in ("first.json", "all.json", "some.json"))
    for f in ("first.json", "all.json", "some.json"):
        checked(tmp_path / f)
    ran = every.cores_with({"blocks"})
    assert len(ran) > 3
    assert first.cores_with(PIPES) == {"aic0", "aiv0", "aiv1"}
    assert every.cores_with(PIPES) == ran
    assert some.cores_with(PIPES) == {"aic1", "aic2", "aiv5"}
    # Every core that ran still shows its blocks.
    assert first.cores_with({"blocks"}) == some.cores_with({"blocks"}) == ran
    # The default keeps exactly the first group's slices of the full trace.
    group = {"aic0", "aiv0", "aiv1"}
    full = sorted((*every.on(e["pid"], e["tid"]), e["ts"], e["dur"], e["name"])
                  for e in every.instr() if every.process[e["pid"]] in group)
    mine = sorted((*first.on(e["pid"], e["tid"]), e["ts"], e["dur"], e["name"]) for e in first.instr())
    assert mine == full


def test_time_window_keeps_the_instructions_that_overlap_it(tmp_path):
    report, _ = run(FA, tmp_path / "full.json")
    kernel = kernel_tasks(report)[0]
    start = kernel["start_us"] + kernel["dur_us"] / 3
    end = kernel["start_us"] + kernel["dur_us"] / 2
    run(FA, tmp_path / "w.json", "--trace-window", f"{start}:{end}")
    checked(tmp_path / "w.json")
    full, window = Trace(tmp_path / "full.json"), Trace(tmp_path / "w.json")
    assert 0 < len(window.instr()) < len(full.instr())
    # Slices are merged runs of instructions: each kept one overlaps the window (1 ns of rounding either side).
    assert all(e["ts"] <= end + 1e-3 and e["ts"] + e["dur"] >= start - 1e-3 for e in window.instr())
    # and the slices wholly inside the window are the full trace's.
    inside = lambda t: sorted((*t.on(e["pid"], e["tid"]), e["ts"], e["dur"], e["name"]) for e in t.instr()
                              if e["ts"] >= start + 1e-3 and e["ts"] + e["dur"] <= end - 1e-3)
    assert inside(window) == inside(full) and inside(full)


def test_limit_keeps_the_first_slices_and_says_how_many_were_left_out(tmp_path):
    # The limit counts instruction slices and flag events (set_flag, wait_flag instants) together.
    def kept(t):
        return len(t.instr()) + sum(e["ph"] == "i" and e["name"] in ("set_flag", "wait_flag") for e in t.events)

    run(FA, tmp_path / "full.json")
    total = kept(Trace(tmp_path / "full.json"))
    _, stderr = run(FA, tmp_path / "l.json", "--trace-limit", "50")
    checked(tmp_path / "l.json")
    t = Trace(tmp_path / "l.json")
    assert kept(t) == 50
    note = [e for e in t.events if e["ph"] == "i" and e["name"] == "trace truncated"]
    assert len(note) == 1 and list(note[0]["args"].values()) == [total - 50]
    assert f"kept the first 50 instruction slices and flag events (--trace-limit) and left out {total - 50}" in stderr


def test_gzip_trace_is_the_plain_trace_compressed(tmp_path):
    run(FA, tmp_path / "t.json")
    run(FA, tmp_path / "t.json.gz")
    raw = (tmp_path / "t.json.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == (tmp_path / "t.json").read_bytes()
    assert len(raw) * 5 < (tmp_path / "t.json").stat().st_size
    assert checked(tmp_path / "t.json.gz") == checked(tmp_path / "t.json").replace("t.json", "t.json.gz")
    # A cut-short file is a problem the checker names, not a crash.
    (tmp_path / "cut.json.gz").write_bytes(raw[: len(raw) // 2])
    p = subprocess.run([CHECK, str(tmp_path / "cut.json.gz")], capture_output=True, text=True)
    assert p.returncode == 1 and "not valid gzip" in p.stdout, p.stdout


def test_checker_finds_what_perfetto_would_drop(tmp_path):
    bad = {"traceEvents": [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": ""}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "a", "ts": 0, "dur": 10},
        {"ph": "X", "pid": 1, "tid": 1, "name": "b", "ts": 5, "dur": 10},
        {"ph": "X", "pid": -1, "tid": 1, "name": "c", "ts": 0, "dur": 1},
    ]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    p = subprocess.run([CHECK, str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert p.returncode == 1
    for problem in ("process_name needs a non-empty args.name", "overlaps 'a' without nesting",
                    "pid and tid must be integers from 0 to 2^32-1"):
        assert problem in p.stdout, p.stdout


@pytest.mark.skipif(os.environ.get("NPUSIM_SANITIZED") == "1", reason="minutes under the sanitizers")
def test_seed_flash_attention_default_trace_is_under_50_MB(tmp_path):
    run(SEED_FA, tmp_path / "seed.json")
    size = (tmp_path / "seed.json").stat().st_size
    assert size < 50e6, f"{size / 1e6:.1f} MB"
    out = checked(tmp_path / "seed.json")
    t = Trace(tmp_path / "seed.json")
    assert t.cores_with(PIPES) == {"aic0", "aiv0", "aiv1"}
    assert len(t.cores_with({"blocks"})) == 72  # every core of the 910b ran blocks
    assert "ok" in out


def test_flags_show_why_a_pipe_waits(tmp_path):
    # Issue 24 item 4. vector_add with one buffer: V waits for MTE2's copy-in (MTE2->V) and MTE2 for V to free the
    # buffer (V->MTE2). Each set_flag is an instant on the setting pipe's track when it fires; each wait that stalled
    # is an instant on the waiting pipe's track when it ends, naming the flag, the pipe it waited for and the cycles.
    trace = tmp_path / "va.json"
    run(["kernel", "vector_add", "-p", "n=65536", "-p", "tile=8192", "-p", "buffer_num=1"], trace)
    checked(trace)
    t = Trace(trace)
    instants = [e for e in t.events if e["ph"] == "i"]
    sets = {e["args"]["set"]: e for e in instants if e["name"] == "set_flag"}
    waits = [e for e in instants if e["name"] == "wait_flag"]
    assert sets and waits
    for w in waits:
        core, track = t.on(w["pid"], w["tid"])
        src, dst = w["args"]["flag"].split(" ")[0].split("->")
        assert track == dst and w["args"]["waits_for"] == src and w["args"]["waited_cycles"] > 0
        s = sets[w["args"]["set"]]  # the set it took: on the source pipe's track, fired no later than the wait ended
        assert t.on(s["pid"], s["tid"]) == (core, src) and s["args"]["flag"] == w["args"]["flag"]
        assert s["ts"] <= w["ts"] + 1e-9
    flags = {w["args"]["flag"].split(" ")[0] for w in waits}
    assert {"MTE2->V", "V->MTE2"} <= flags, flags
    # V's first stall ends when the first copy-in's data has landed: where MTE2's first DataCopy slice ends.
    v_wait = min((w for w in waits if w["args"]["flag"].startswith("MTE2->V")), key=lambda e: e["ts"])
    copy = min((e for e in t.instr() if t.on(e["pid"], e["tid"])[1] == "MTE2"), key=lambda e: e["ts"])
    assert abs(v_wait["ts"] - (copy["ts"] + copy["dur"])) < 0.01, (v_wait, copy)
