"""npusim.torch: a torch_npu-compatible adaptor on the simulated device (docs/python.md, "The PyTorch adaptor").

    import torch, npusim.torch                 # PrivateUse1 becomes "npu"; torch.npu is the simulated device
    x = torch.randn(4, 1024, dtype=torch.float16).npu()
    print(x.device)                            # npu:0
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)   # FlashAttention on the NPU
    npusim.torch.report()                      # what ran on the NPU, and every CPU fallback, counted

An npu tensor is a __torch_dispatch__ wrapper around a host tensor (the simulated device's memory is the host's).
Every aten op on it is either routed to a library op, whose kernel runs on the simulated device in functional mode
(the value comes from the simulator, the time accumulates on the device's timeline), or is a view (no data moves),
or is computed on the CPU and counted as a fallback: never silently (set_fallback("error") makes it an error).
`import npusim.torch as torch_npu`, or install_as_torch_npu(), for code written for Ascend's torch_npu.
"""

from __future__ import annotations

import collections
import contextlib
import sys
import types
import warnings

import torch
from torch.utils._pytree import tree_map

import npusim

from . import _routes

_NPU = None  # torch.device("npu", 0), once PrivateUse1 is renamed (_setup)


# --- the device module: torch.npu --------------------------------------------------------------------------------

def _dev():
    return npusim.device()


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index not in (None, 0):
        raise RuntimeError(f"npu:{index}: the simulator has one device, npu:0")


def synchronize(device=None) -> None:
    """Waits for the device: every routed op waits for its tasks, so the device is already idle."""
    _dev().synchronize()


def get_device_name(device=None) -> str:
    return f"Ascend {_dev().name} (npusim)"


def memory_allocated(device=None) -> int:
    return int(_dev().status()["hbm_used_bytes"])


def max_memory_allocated(device=None) -> int:
    return int(_dev().status()["hbm_peak_used_bytes"])


def _make_device_module():
    m = types.ModuleType("torch.npu")
    for f in (is_available, device_count, current_device, set_device, synchronize, get_device_name,
              memory_allocated, max_memory_allocated):
        setattr(m, f.__name__, f)
    m.is_initialized = lambda: True
    m._is_in_bad_fork = lambda: False
    # npu tensors draw random numbers on the host, from the CPU generator that torch.manual_seed seeds (and which
    # calls these: they must not call it back).
    m.manual_seed = lambda seed: None
    m.manual_seed_all = lambda seed: None
    m.seed = lambda: None
    m.seed_all = lambda: None
    m.initial_seed = torch.initial_seed
    m.get_rng_state = lambda device=None: torch.get_rng_state()
    m.set_rng_state = lambda state, device=None: torch.set_rng_state(state)
    m.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]
    m.is_bf16_supported = lambda: True
    m.current_stream = lambda device=None: None
    return m


# --- the npu tensor ----------------------------------------------------------------------------------------------

class NpuTensor(torch.Tensor):
    """A tensor on npu:0: a wrapper whose data is the host tensor `_npusim_host`."""

    @staticmethod
    def __new__(cls, host: torch.Tensor):
        r = torch.Tensor._make_wrapper_subclass(cls, host.size(), strides=host.stride(), storage_offset=host.storage_offset(),
                                                dtype=host.dtype, device=_NPU, requires_grad=host.requires_grad)
        r._npusim_host = host
        return r

    def __repr__(self, *, tensor_contents=None):
        text = repr(self._npusim_host.detach())
        return text[:-1] + ", device='npu:0')" if text.endswith(")") else text

    __torch_function__ = torch._C._disabled_torch_function_impl  # everything reaches __torch_dispatch__

    @classmethod
    def __torch_dispatch__(cls, func, types_, args=(), kwargs=None):
        return _dispatch(func, args, kwargs or {})


def _unwrap(x):
    if isinstance(x, NpuTensor):
        return x._npusim_host
    if isinstance(x, torch.device) and x.type == "npu":
        return torch.device("cpu")
    return x


def _wrap(x):
    if isinstance(x, torch.Tensor) and not isinstance(x, NpuTensor) and x.device.type == "cpu":
        return NpuTensor(x)
    return x


_TO_CPU = {torch.ops.aten._to_copy.default}


def _dispatch(func, args, kwargs):
    # Moving off the device: _to_copy to the CPU gives a plain tensor (a dtype change on the device is routed).
    if func in _TO_CPU:
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type != "npu" or not isinstance(args[0], NpuTensor):
            return func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
    if func is torch.ops.aten.copy_.default:
        dst, src = args[0], args[1]
        _unwrap(dst).copy_(_unwrap(src))
        return dst
    host_args, host_kwargs = tree_map(_unwrap, args), tree_map(_unwrap, kwargs)
    route = _routes.ATEN.get(func)
    if route is not None:
        with host_op(f"aten::{func.overloadpacket.__name__}"):
            out = route(*host_args, **host_kwargs)
        if out is not NotImplemented:
            _stats.routed[str(func.overloadpacket.__name__)] += 1
            return tree_map(_wrap, out)
    # A composite op (linear, layer_norm... reached whole from inside a route): its decomposition, op by op.
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        out = func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
    name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
    if _routes.is_view_or_meta(func):
        _stats.views[name] += 1
    else:
        _fallback(str(func))
    return tree_map(_wrap, func(*host_args, **host_kwargs))


# --- the host op a device call comes from (for the profiler) -----------------------------------------------------

_host_ops: list = []


@contextlib.contextmanager
def host_op(name: str):
    _host_ops.append(name)
    try:
        yield
    finally:
        _host_ops.pop()


def current_host_op(report=None) -> str:
    if _host_ops:
        return _host_ops[-1]
    if report is not None and "op" in report:
        return f"npusim.ops.{report['op']['name']}"
    return "npusim.run" if report is not None and "graph" in report else "npusim"


# --- accounting --------------------------------------------------------------------------------------------------

class _Stats:
    def __init__(self):
        self.routed = collections.Counter()     # aten op -> calls run by a library kernel on the device
        self.views = collections.Counter()      # aten op -> calls that only change metadata or make tensors
        self.fallbacks = collections.Counter()  # aten op -> calls computed on the CPU
        self.mode = "count"


_stats = _Stats()
_warned: set = set()


def _fallback(name: str):
    if _stats.mode == "error":
        raise NotImplementedError(
            f"npusim.torch: aten op {name} has no route to an NPU kernel (set_fallback('count') computes it on the "
            f"CPU and counts it; docs/python.md lists the routed ops)")
    _stats.fallbacks[name] += 1
    if _stats.mode == "warn" or name not in _warned:
        _warned.add(name)
        warnings.warn(f"npusim.torch: {name} runs on the CPU (no NPU kernel routes it); npusim.torch.report() "
                      f"counts the fallbacks", FallbackWarning, stacklevel=4)


class FallbackWarning(UserWarning):
    """An aten op on npu tensors computed on the CPU (once per op; npusim.torch.report() counts every call)."""


def set_fallback(mode: str) -> None:
    """What an aten op without an NPU route does: 'count' (default: CPU, counted, warned once per op), 'warn'
    (warned every call) or 'error' (NotImplementedError naming the op)."""
    if mode not in ("count", "warn", "error"):
        raise ValueError(f"set_fallback: {mode!r} is not count, warn or error")
    _stats.mode = mode


def report() -> dict:
    """What ran where since the adaptor was loaded (or reset()): routed (aten op -> calls on NPU kernels), host
    (views, tensor creation and host copies: no kernel), fallbacks (aten op -> calls on the CPU), and the device's report of everything it ran."""
    return {"routed": dict(_stats.routed), "host": dict(_stats.views), "fallbacks": dict(_stats.fallbacks),
            "fallback_reasons": dict(_routes._reasons), "device": npusim.device().report()}


def reset() -> None:
    _stats.routed.clear()
    _stats.views.clear()
    _stats.fallbacks.clear()
    _routes._reasons.clear()
    _warned.clear()


# --- set-up --------------------------------------------------------------------------------------------------------

_lib = None


def _empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return NpuTensor(torch.empty(size, dtype=dtype, memory_format=memory_format or torch.contiguous_format))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return NpuTensor(torch.empty_strided(size, stride, dtype=dtype))


def _sdpa_kernel(*args, **kwargs):
    # Never runs: an npu tensor's Python dispatch key comes first. Its presence makes the dispatcher keep
    # scaled_dot_product_attention whole for npu tensors instead of decomposing it.
    raise RuntimeError("npusim.torch: scaled_dot_product_attention reached the PrivateUse1 kernel")


def _setup():
    global _lib, _NPU
    if _lib is not None:
        return
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    if torch._C._get_privateuse1_backend_name() not in ("privateuseone", "npu"):
        raise RuntimeError(f"npusim.torch: PrivateUse1 is already {torch._C._get_privateuse1_backend_name()!r}; "
                           f"npusim.torch needs it as 'npu'")
    module = _make_device_module()
    _setup_privateuseone_for_python_backend(rename="npu", backend_module=module)
    _NPU = torch.device("npu", 0)
    _lib = torch.library.Library("aten", "IMPL")
    _lib.impl("empty.memory_format", _empty_memory_format, "PrivateUse1")
    _lib.impl("empty_strided", _empty_strided, "PrivateUse1")
    _lib.impl("scaled_dot_product_attention", _sdpa_kernel, "PrivateUse1")
    from . import compile as _compile  # noqa: F401  registers torch.compile(backend="npusim")


_setup()

def npu_fusion_attention(*args, **kwargs):
    with host_op("npu_fusion_attention"):
        return _routes.npu_fusion_attention(*args, **kwargs)


npu_fusion_attention.__doc__ = _routes.npu_fusion_attention.__doc__
from . import profiler  # noqa: E402
from . import npu as npu  # noqa: E402,F401


def install_as_torch_npu() -> types.ModuleType:
    """Makes `import torch_npu` (and torch_npu.profiler) import this adaptor, for code written for Ascend."""
    me = sys.modules[__name__]
    sys.modules["torch_npu"] = me
    sys.modules["torch_npu.profiler"] = profiler
    sys.modules["torch_npu.npu"] = npu
    return me


@contextlib.contextmanager
def fallback_mode(mode: str):
    """with npusim.torch.fallback_mode("error"): ... (set_fallback for a block)."""
    old = _stats.mode
    set_fallback(mode)
    try:
        yield
    finally:
        _stats.mode = old
