"""Host arrays crossing into the simulator: numpy arrays, torch tensors and npusim.Tensor, to (shape, dtype, bytes)
and back. The device's dtypes are fp16, bf16 and fp32, and, for a model's integer and bool inputs and outputs, int32
and int8 (docs/python.md)."""

from __future__ import annotations

import numpy as np

try:  # bfloat16 for numpy (a dependency of onnx, pinned in requirements.txt)
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    _BF16 = None

_NP_TO_DEVICE = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32"}
if _BF16 is not None:
    _NP_TO_DEVICE[_BF16] = "bf16"
_NP_TO_DEVICE.update({np.dtype(np.int32): "int32", np.dtype(np.int8): "int8"})
_DEVICE_TO_NP = {v: k for k, v in _NP_TO_DEVICE.items()}


def to_storage(a: np.ndarray, spec: dict) -> np.ndarray:
    """A model input's integer or bool array as the device stores it (int32, or int8 0/1), checked to fit; float
    arrays as they are."""
    if spec.get("type") == "float64" and a.dtype == np.float64:  # crosses as float32 (rounded to nearest)
        return a.astype(np.float32)
    if spec["dtype"] not in ("int32", "int8") or a.dtype.kind not in "biu":
        return a
    if spec["dtype"] == "int8":
        return (a != 0).astype(np.int8)
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise ValueError(f"input '{spec['name']}': values outside int32 (the device holds {spec['type']} as int32)")
    return a.astype(np.int32)


def from_storage(a: np.ndarray, spec: dict) -> np.ndarray:
    """A model output the device stores as int32 or int8 in the model's own type (int64, bool...)."""
    if spec.get("type") == "bool":
        return a != 0
    if spec.get("type") in ("int64", "int16", "int8", "uint8", "uint32", "uint64") and a.dtype.kind == "i":
        return a.astype(spec["type"])
    if spec.get("type") == "float64" and a.dtype == np.float32:  # float64 crosses as float32
        return a.astype(np.float64)
    return a


def _torch():
    import sys

    return sys.modules.get("torch")


def is_torch(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def device_dtype(x) -> str:
    """The device dtype name of a numpy array or torch tensor; TypeError for any other dtype."""
    if is_torch(x):
        t = _torch()
        names = {t.float16: "fp16", t.bfloat16: "bf16", t.float32: "fp32", t.int32: "int32", t.int8: "int8"}
        if x.dtype not in names:
            raise TypeError(f"npusim runs fp16, bf16, fp32, int32 and int8 tensors, not {x.dtype}")
        return names[x.dtype]
    a = np.asarray(x)
    if a.dtype not in _NP_TO_DEVICE:
        raise TypeError(f"npusim runs float16, bfloat16, float32, int32 and int8 arrays, not {a.dtype}")
    return _NP_TO_DEVICE[a.dtype]


def to_numpy(x) -> np.ndarray:
    """A C-contiguous numpy view or copy of x (a torch bf16 tensor becomes an ml_dtypes.bfloat16 array)."""
    if isinstance(x, Tensor):
        return x.numpy()
    if is_torch(x):
        t = _torch()
        inner = getattr(x, "_npusim_host", None)  # an npu tensor of npusim.torch: its host data
        x = inner if inner is not None else x
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        x = x.contiguous()
        if x.dtype == t.bfloat16:
            return x.view(t.int16).numpy().view(_BF16)
        return x.numpy()
    return np.ascontiguousarray(x)


def spec(x):
    """(shape, dtype, data) for the native module."""
    a = to_numpy(x)
    return (list(a.shape), device_dtype(a), a.reshape(-1).view(np.uint8) if a.size else b"")


def from_bytes(data: bytes, shape, dtype: str) -> np.ndarray:
    return np.frombuffer(data, dtype=_DEVICE_TO_NP[dtype]).reshape(shape).copy()


def like(result: np.ndarray, template):
    """result as the kind of array template is (a torch tensor for a torch input, else numpy)."""
    if is_torch(template):
        t = _torch()
        if result.dtype == _BF16:
            out = t.from_numpy(result.view(np.int16).copy()).view(t.bfloat16)
        else:
            out = t.from_numpy(result)
        return out
    if isinstance(template, Tensor):
        return Tensor(result)
    return result


class Tensor:
    """A tensor of the simulated device: its values live in host memory (the device's memory is the host's in the
    simulator), and every op on it runs on the simulated device. From and to numpy and torch."""

    def __init__(self, data):
        self._a = to_numpy(data)
        device_dtype(self._a)

    @property
    def shape(self):
        return self._a.shape

    @property
    def dtype(self) -> str:
        return device_dtype(self._a)

    def numpy(self) -> np.ndarray:
        return self._a

    def torch(self):
        return like(self._a, _torch().empty(0))

    def __repr__(self):
        return f"npusim.Tensor(shape={list(self.shape)}, dtype={self.dtype})"
