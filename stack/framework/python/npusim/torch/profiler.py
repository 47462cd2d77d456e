"""torch_npu.profiler on the simulated device (docs/python.md, "Profiler").

    with torch_npu.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU],
                                    schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1),
                                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler("./prof")) as prof:
        model(x); prof.step()

writes ./prof/HOST_PID_TIMESTAMP_ascend_pt/ASCEND_PROFILER_OUTPUT/ with trace_view.json (Perfetto/Chrome: the host
ops on the simulated host timeline, the device's tasks per stream, a flow from each host op to its kernels),
kernel_details.csv and op_statistic.csv. Every time is simulated time, in microseconds, on the device's clock.
"""

from __future__ import annotations

import csv
import enum
import json
import os
import socket
import time

from torch.profiler import ProfilerAction
from torch.profiler import schedule as _torch_schedule

import npusim

PIPES = ("cube", "vector", "scalar", "mte1", "mte2", "mte3", "fixpipe")


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


class ProfilerLevel:
    Level0, Level1, Level2 = "Level0", "Level1", "Level2"


class AiCMetrics:
    PipeUtilization = "PipeUtilization"


class _ExperimentalConfig:
    """Accepted for torch_npu compatibility; the simulator always records the pipes."""

    def __init__(self, **kwargs):
        self.options = kwargs


def supported_activities():
    return [ProfilerActivity.CPU, ProfilerActivity.NPU]


def schedule(wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """torch.profiler.schedule: which steps record."""
    return _torch_schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None, analyse_flag: bool = True):
    """on_trace_ready writing DIR/WORKER_TIMESTAMP_ascend_pt/ASCEND_PROFILER_OUTPUT/ (torch_npu's layout)."""
    def handler(prof: "profile"):
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        out = os.path.join(dir_name, f"{worker}_{time.strftime('%Y%m%d%H%M%S')}{int(time.time() * 1000) % 1000:03d}_ascend_pt",
                           "ASCEND_PROFILER_OUTPUT")
        prof.export_ascend_profiler_output(out)
        prof.output_dirs.append(out)
    return handler


def _core_type(task) -> str:
    p = task.get("pipes", {})
    cube, vec = p.get("cube", 0) > 0 or p.get("fixpipe", 0) > 0, p.get("vector", 0) > 0
    return "MIX_AIC" if cube and vec else "AI_CORE" if cube else "AI_VECTOR_CORE"


class profile:
    """Records every device call made while a step records (all of them without a schedule)."""

    def __init__(self, activities=None, schedule=None, on_trace_ready=None, record_shapes=False, profile_memory=False,
                 with_stack=False, with_flops=False, with_modules=False, experimental_config=None):
        self.activities = set(activities or supported_activities())
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.output_dirs: list[str] = []
        self.records: list[dict] = []  # per device call: host op name, its tasks
        self._action = ProfilerAction.RECORD if schedule is None else schedule(0)
        self._device = None

    # --- recording ---------------------------------------------------------------------------------------------
    def _listen(self, report):
        if self._action not in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            return
        from . import current_host_op

        self.records.append({"host_op": current_host_op(report), "step": self.step_num, "tasks": report.get("tasks", []),
                             "overlap": report.get("overlap", {})})

    def start(self):
        self._device = npusim.device()
        self._device._listeners.append(self._listen)
        return self

    def stop(self):
        if self._device is not None and self._listen in self._device._listeners:
            self._device._listeners.remove(self._listen)
        if self.schedule is None or self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._ready()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self):
        """Ends a step: with a schedule, a step that ends an active window hands the trace to on_trace_ready."""
        prev = self._action
        self.step_num += 1
        if self.schedule is not None:
            self._action = self.schedule(self.step_num)
            if prev == ProfilerAction.RECORD_AND_SAVE:
                self._ready()

    def _ready(self):
        if self.on_trace_ready is not None and self.records:
            self.on_trace_ready(self)
            self.records = []

    # --- outputs -----------------------------------------------------------------------------------------------
    def kernels(self) -> list[dict]:
        """One row per kernel task recorded: name, type, core type, start, duration, wait, blocks, pipe ratios."""
        rows = []
        for r in self.records:
            for t in r["tasks"]:
                if t.get("type") != "kernel":
                    continue
                rows.append({"Device_id": 0, "Name": npusim._core.kernel_name(t["name"]), "Type": t["name"],
                             "Accelerator Core": _core_type(t), "Start Time(us)": t["start_us"],
                             "Duration(us)": t["dur_us"], "Wait Time(us)": t.get("wait_us", 0.0),
                             "Block Num": t["block_dim"], **{f"{p}_ratio": t["pipes"].get(p, 0.0) for p in PIPES},
                             "host_op": r["host_op"], "overlap": r["overlap"]})
        return rows

    def trace_events(self) -> list[dict]:
        ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "Host (simulated)"}},
              {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "Python ops"}},
              {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "NPU 0 (npusim)"}}]
        streams = set()
        flow = 0
        for r in self.records:
            tasks = r["tasks"]
            if not tasks:
                continue
            start = min(t["start_us"] - t.get("wait_us", 0.0) for t in tasks)
            end = max(t["start_us"] + t["dur_us"] for t in tasks)
            if ProfilerActivity.CPU in self.activities:
                ev.append({"ph": "X", "name": r["host_op"], "cat": "cpu_op", "pid": 0, "tid": 0, "ts": start,
                           "dur": max(end - start, 0.001), "args": {"step": r["step"]}})
            if ProfilerActivity.NPU not in self.activities:
                continue
            for t in tasks:
                streams.add(t["stream"])
                kernel = t.get("type") == "kernel"
                name = npusim._core.kernel_name(t["name"]) if kernel else t["name"]
                args = {"Type": t["name"], "Block Num": t["block_dim"], "cycles": t["cycles"],
                        **{f"{p}_ratio": v for p, v in t.get("pipes", {}).items()}}
                if kernel:
                    args["overlap"] = r["overlap"]
                ev.append({"ph": "X", "name": name, "cat": "kernel" if kernel else t.get("type", "task"), "pid": 1,
                           "tid": t["stream"], "ts": t["start_us"], "dur": max(t["dur_us"], 0.001), "args": args})
                if kernel and ProfilerActivity.CPU in self.activities:
                    flow += 1
                    ev.append({"ph": "s", "id": flow, "name": "launch", "cat": "async_npu", "pid": 0, "tid": 0,
                               "ts": start})
                    ev.append({"ph": "f", "bp": "e", "id": flow, "name": "launch", "cat": "async_npu", "pid": 1,
                               "tid": t["stream"], "ts": t["start_us"]})
        for s in sorted(streams):
            ev.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": s, "args": {"name": f"Stream {s}"}})
        return ev

    def export_chrome_trace(self, path: str):
        with open(path, "w") as f:
            json.dump({"traceEvents": self.trace_events(), "displayTimeUnit": "ns"}, f)

    def export_ascend_profiler_output(self, out_dir: str):
        os.makedirs(out_dir, exist_ok=True)
        self.export_chrome_trace(os.path.join(out_dir, "trace_view.json"))
        rows = self.kernels()
        cols = ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
                "Block Num"] + [f"{p}_ratio" for p in PIPES]
        with open(os.path.join(out_dir, "kernel_details.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for r in rows:
                w.writerow([r[c] for c in cols])
        stats: dict = {}
        for r in rows:
            s = stats.setdefault((r["Type"], r["Accelerator Core"]), [])
            s.append(r["Duration(us)"])
        total = sum(sum(v) for v in stats.values()) or 1.0
        with open(os.path.join(out_dir, "op_statistic.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                        "Max Time(us)", "Ratio(%)"])
            for (op, core), d in sorted(stats.items(), key=lambda kv: -sum(kv[1])):
                w.writerow([0, op, core, len(d), sum(d), min(d), sum(d) / len(d), max(d), 100.0 * sum(d) / total])
