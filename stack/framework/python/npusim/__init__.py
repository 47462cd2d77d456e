"""npusim from Python: the simulated Da Vinci-style NPU and its software stack (docs/python.md).

    import npusim
    dev = npusim.Device(config="910b")                  # the process's simulated device
    o = npusim.ops.flash_attention(q, k, v, causal=True)  # numpy or torch in, the same kind out
    print(dev.last_report["kernel"]["cycles"])           # the keys of `npusim op --json`
    r = dev.run("model.onnx", inputs={"x": x})           # a whole model through the graph engine
    npusim.smi()                                         # what `npu-smi info` shows

One device per process: SystemC elaborates one chip per process, so the first Device (or the first op, which makes
the default one) fixes the config for the life of the process; the device's timeline goes on from call to call.
"""

from __future__ import annotations

import atexit
import json
import os
import threading

from . import _core
from ._core import DeviceError, InputError
from ._tensors import Tensor, from_bytes, from_storage, like, spec, to_numpy, to_storage

__all__ = ["Device", "DeviceError", "InputError", "Model", "Report", "RunResult", "Tensor", "device", "list_ops",
           "ops", "run", "smi"]
__version__ = "0.1.0"


class Report(dict):
    """A report: the JSON object `--json` prints, as a dict whose keys also read as attributes (r.cycles)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    @staticmethod
    def parse(text: str) -> "Report":
        return json.loads(text, object_hook=Report)


class RunResult:
    """A model run: `outputs` (name -> array, in the model's order; None in timing-only mode) and its `report`."""

    def __init__(self, outputs, report: Report):
        self.outputs = outputs
        self.report = report

    def __getitem__(self, name):
        return self.outputs[name]

    def __repr__(self):
        return f"RunResult(outputs={list(self.outputs or [])}, cycles={self.report.get('cycles')})"


class GenerateResult:
    """An LLM's prefill and decode steps (Device.generate): `tokens` [batch, decode + 1] (int64; None in timing-only
    mode), `logits` [decode + 1, batch, vocab] (float32; None in timing-only mode) and the `report`, whose `decode`
    section has TTFT, TPOT and the rest (docs/metrics.md)."""

    def __init__(self, tokens, logits, report: Report):
        self.tokens = tokens
        self.logits = logits
        self.report = report

    def __repr__(self):
        d = self.report.get("decode", {})
        return f"GenerateResult(ttft_us={d.get('ttft_us')}, tpot_us={d.get('tpot_us')})"


class Model:
    """A model compiled for the device: imported, fused, lowered, every step planned (Device.compile)."""

    def __init__(self, native, device: "Device"):
        self._m = native
        self.device = device

    @property
    def inputs(self):
        return self._m.inputs

    @property
    def outputs(self):
        return self._m.outputs

    @property
    def graph(self) -> Report:
        """nodes before and after fusion, the passes that fired, the kernels."""
        return Report.parse(self._m.graph_report())

    def __call__(self, *args, **kwargs):
        return self.device.run(self, *args, **kwargs)


_lock = threading.RLock()
_current: "Device | None" = None


class Device:
    """The simulated device of this process.

    config: a built-in name (910b, 910, 310p, tiny) or a YAML file; set: overrides, {"l2.capacity": "96MiB"} or a
    list of "key=value"; functional: compute values (else timing only: outputs are None); trace / summary: a
    Chrome/Perfetto trace (gzip-compressed when its name ends in .gz) and an op summary CSV of everything the
    device ran, written when it closes (close(), or at exit); trace_level: "task", "block" or "instr" and
    trace_cores: the cores whose pipes an instr trace shows ("aic0,aiv0-3", "all"; default the first core group),
    as the CLI's --trace-level and --trace-cores. Making a Device with the settings of the one that exists returns
    it; other settings are an error.
    """

    def __new__(cls, config: str | None = None, set=None, functional: bool = True, trace: str | None = None,
                summary: str | None = None, trace_level: str = "instr", trace_cores: str | None = None):
        global _current
        config = config or os.environ.get("NPUSIM_CONFIG", "910b")
        sets = _sets(set)
        key = (config, tuple(sets), bool(functional), trace or "", summary or "", trace_level, trace_cores or "")
        with _lock:
            if _current is not None:
                if _current._key == key:
                    return _current
                raise RuntimeError(
                    f"npusim: this process already simulates a device ({_current._key[0]}, set={list(_current._key[1])}, "
                    f"functional={_current._key[2]}); SystemC elaborates one chip per process, so a device with "
                    f"other settings needs another process (docs/python.md)")
            self = super().__new__(cls)
            self._key = key
            self._s = _core.Session(config, sets, bool(functional), trace or "", summary or "", trace_level,
                                    trace_cores or "")
            self.name = self._s.chip_name()
            self.config = config
            self.functional = bool(functional)
            self.trace_path = trace
            self.last_report: Report | None = None
            self.history: list[Report] = []  # one report per call (the profiler reads it)
            self._models: dict = {}
            self._listeners = []
            _current = self
            return self

    def __init__(self, *args, **kwargs):  # all done in __new__ (the device is a per-process singleton)
        pass

    def __repr__(self):
        return f"npusim.Device(name={self.name!r}, functional={self.functional})"

    # --- calls --------------------------------------------------------------------------------------------------
    def _record(self, text: str) -> Report:
        r = Report.parse(text)
        self.last_report = r
        self.history.append(r)
        for f in self._listeners:
            f(r)
        return r

    def op(self, name: str, *tensors, outputs_like=None, warmup: int = 0, **params):
        """Runs library op `name` on the tensors (numpy, torch or npusim.Tensor), its other parameters as keyword
        arguments (the -p parameters of `npusim op`, e.g. causal=1). Returns the list of outputs, as the kind of
        array the first input is (or outputs_like); None items in timing-only mode. The report is last_report.
        warmup=N launches the op N times first on the same device buffers (warm caches, as a benchmark loop) and
        reports only the last launch, as `npusim op --warmup N` does."""
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup={warmup!r} is not a non-negative integer")
        p = {k: _param(v) for k, v in params.items() if v is not None}
        with _lock:
            outs, text = self._s.run_op(name, p, [spec(t) for t in tensors], warmup)
            r = self._record(text)
        template = outputs_like if outputs_like is not None else (tensors[0] if tensors else None)
        descs = r["op"]["outputs"]
        if not self.functional:
            return [None] * len(descs)
        result = []
        for data, d in zip(outs, descs):
            shape = [int(x) for x in d["shape"].split("x")]
            result.append(like(from_bytes(data, shape, d["dtype"]), template))
        return result

    def compile(self, model, dims: dict | None = None, fusion: bool = True, streams: int = 4) -> Model:
        """An ONNX model (a path, an onnx.ModelProto or its bytes) compiled for this device."""
        dims = {k: int(v) for k, v in (dims or {}).items()}
        with _lock:
            if isinstance(model, Model):
                return model
            if isinstance(model, (str, os.PathLike)):
                native = self._s.compile_file(os.fspath(model), dims, fusion, streams)
            else:
                data = model if isinstance(model, (bytes, bytearray)) else model.SerializeToString()
                native = self._s.compile_bytes(bytes(data), "in-memory model", dims, fusion, streams)
        return Model(native, self)

    def run(self, model, inputs=None, dims: dict | None = None, fusion: bool = True, streams: int = 4) -> RunResult:
        """Runs a model (a Model, a path, an onnx.ModelProto or its bytes) once: inputs by name (a dict) or in order
        (a list). Outputs come back as numpy arrays, or torch tensors when the inputs are torch tensors."""
        m = self.compile(model, dims, fusion, streams)
        specs = m.inputs
        if inputs is None:
            if self.functional and specs:
                raise InputError(f"{m._m.name}: the model takes inputs {[s['name'] for s in specs]}, none given")
            inputs = []
        if isinstance(inputs, dict):
            missing = [s["name"] for s in specs if s["name"] not in inputs]
            extra = [k for k in inputs if k not in {s["name"] for s in specs}]
            if missing or extra:
                raise InputError(f"{m._m.name}: inputs missing {missing}, unknown {extra} "
                                 f"(the model takes {[s['name'] for s in specs]})")
            inputs = [inputs[s["name"]] for s in specs]
        inputs = list(inputs)
        if self.functional and len(inputs) != len(specs):
            raise InputError(f"{m._m.name}: the model takes {len(specs)} inputs, {len(inputs)} given")
        arrays = []
        for s, x in zip(specs, inputs):
            a = to_storage(to_numpy(x), s)
            want = s["dtype"]
            got = spec(a)[1]
            if list(a.shape) != [int(d) for d in s["shape"]] and not (a.shape == () and s["shape"] == [1]):
                raise InputError(f"input '{s['name']}': expected shape {s['shape']}, got {list(a.shape)}")
            if got != want:
                raise InputError(f"input '{s['name']}': expected {want}, got {got}")
            arrays.append(a.reshape(-1).view("uint8"))
        with _lock:
            outs, text = self._s.run(m._m, arrays if self.functional else [])
            r = self._record(text)
        outputs = None
        if self.functional:
            template = inputs[0] if inputs else None
            outputs = {}
            for data, s in zip(outs, m.outputs):
                a = from_storage(from_bytes(data, [int(d) for d in s["shape"]], s["dtype"]), s)
                outputs[s["name"]] = like(a, template)
        return RunResult(outputs, r)

    def generate(self, model, decode: int = 16, prompt=None, prompt_len: int = 128, batch: int = 1, page: int = 128,
                 replay: bool = True) -> GenerateResult:
        """An LLM (a LLaMA, Mistral or Qwen2 directory as transformers' save_pretrained writes it, or its config.json)
        prefilled and decoded greedily for `decode` steps with a paged KV cache, as `npusim run MODEL --decode N`
        (docs/llm.md). `prompt`: token ids [batch, prompt length] (numpy or torch; its shape sets batch and
        prompt_len), else seeded random ids of prompt_len for batch sequences. Functional devices read the weights
        from the directory's *.safetensors (seeded random weights without them)."""
        import numpy as np

        ids = []
        if prompt is not None:
            a = np.asarray(to_numpy(prompt))
            if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
                raise InputError(f"prompt: token ids [batch, prompt length] expected, got {a.dtype} {list(a.shape)}")
            batch, prompt_len = int(a.shape[0]), int(a.shape[1])
            if a.size and (a.min() < -2**31 or a.max() >= 2**31):
                raise InputError("prompt: a token id is outside int32")
            ids = [int(x) for x in a.reshape(-1)]
        with _lock:
            tokens, logits, text = self._s.generate(os.fspath(model), int(batch), int(prompt_len), int(decode),
                                                    int(page), ids, bool(replay))
            r = self._record(text)
        if not self.functional:
            return GenerateResult(None, None, r)
        vocab = r["decode"]["model"]["vocab"]
        out = np.frombuffer(logits, dtype=np.float32).reshape(len(tokens[0]) if tokens else 0, batch, vocab)
        return GenerateResult(np.asarray(tokens, dtype=np.int64), out, r)

    # --- state --------------------------------------------------------------------------------------------------
    def report(self) -> Report:
        """The report of everything the device ran so far."""
        with _lock:
            return Report.parse(self._s.report())

    def status(self) -> Report:
        """What `npu-smi info` shows (see npusim.smi)."""
        with _lock:
            return Report.parse(self._s.status())

    def stats(self) -> Report:
        """Every component's statistics so far, nested by place: stats().chip.aiv0.mte2.bytes (docs/metrics.md,
        "Statistics"). Counters only grow: subtract two snapshots to count what happened between them."""
        with _lock:
            return Report.parse(self._s.stats())

    def synchronize(self):
        """Every call waits for its tasks, so the device is idle between calls: nothing to wait for."""

    def close(self) -> Report:
        """Ends the device (its end-of-run checks), writes the trace and the op summary; returns the whole report.
        No calls after it; the process cannot make another device."""
        with _lock:
            if self._s.finished():
                return Report()
            return Report.parse(self._s.finish())

    @property
    def closed(self) -> bool:
        return self._s.finished()


def _sets(s) -> list[str]:
    if s is None:
        return []
    if isinstance(s, dict):
        return [f"{k}={_param(v)}" for k, v in s.items()]
    return [str(x) for x in s]


def _param(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return "x".join(str(int(x)) for x in v)
    return str(v)


def device() -> Device:
    """The process's device: the one made, or a default one (config $NPUSIM_CONFIG or 910b, functional)."""
    with _lock:
        return _current if _current is not None else Device()


def run(model, inputs=None, **kwargs) -> RunResult:
    """device().run(...)."""
    return device().run(model, inputs, **kwargs)


def list_ops():
    """[(name, summary, {parameter: default})] of the operator library; a required parameter's default is None, and a
    default in parentheses is a rule in words (e.g. "(1/sqrt(D))"), as `npusim op --help` shows them."""
    return [tuple(x) for x in _core.list_ops()]


@atexit.register
def _close_at_exit():
    d = _current
    if d is not None and not d.closed:
        try:
            d.close()
        except Exception as e:  # an error at exit is reported, not raised into the interpreter's shutdown
            import sys

            print(f"npusim: closing the device at exit: {e}", file=sys.stderr)


from . import ops  # noqa: E402  (ops uses Device)
from .smi import smi  # noqa: E402
