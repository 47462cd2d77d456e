"""The operator library as Python functions: each call runs the library op's kernel on the process's simulated
device (npusim.device()) and returns its output as the kind of array its first input is (numpy, torch or
npusim.Tensor). The call's report (cycles, pipes, tiling: the keys of `npusim op --json`) is
npusim.device().last_report. Shapes and dtypes are checked by the op itself; a call it refuses raises
npusim.InputError naming the op and the parameter.

    o = npusim.ops.flash_attention(q, k, v, causal=True)     # q: B x N x S x D (layout="BNSD") or B x S x N x D
    y = npusim.ops.matmul(a, b, bias=c, act="gelu")
    y = npusim.ops.layer_norm(x, gamma, beta, eps=1e-5)
    y = npusim.ops.call("reduce_sum", x, axis=1)             # any library op by name (npusim.list_ops())
"""

from __future__ import annotations

from ._tensors import to_numpy


def _dev():
    from . import device

    return device()


def _shape(x):
    return "x".join(str(int(d)) for d in to_numpy(x).shape) if to_numpy(x).ndim else "1"


def call(name: str, *tensors, **params):
    """Library op `name` on the tensors with its -p parameters as keywords; returns the list of its outputs."""
    return _dev().op(name, *tensors, **params)


def _one(name, *tensors, **params):
    return call(name, *tensors, **params)[0]


# --- attention ----------------------------------------------------------------------------------------------------

def flash_attention(q, k, v, causal: bool = False, mask=None, scale: float | None = None, layout: str = "BNSD"):
    """softmax(scale q k^T + mask) v with the online softmax in fp32 (FlashAttention).

    layout BNSD: q is B x N x S x D, k and v B x KVN x SK x D (KVN divides N: grouped-query heads); BSND: B x S x N
    x D. mask: additive, broadcastable as B|1 x N|1 x S|1 x SK (or S x SK), in q's dtype. scale: 1/sqrt(D) by
    default."""
    layout = layout.upper()
    if layout not in ("BNSD", "BSND"):
        raise ValueError(f"flash_attention: layout {layout!r} is not BNSD or BSND")
    qa, ka = to_numpy(q), to_numpy(k)
    if qa.ndim != 4 or ka.ndim != 4:
        raise ValueError(f"flash_attention: q and k must be 4-D ({layout}), not {list(qa.shape)} and {list(ka.shape)}")
    if layout == "BNSD":
        B, N, S, D = qa.shape
        KVN, SK = ka.shape[1], ka.shape[2]
    else:
        B, S, N, D = qa.shape
        SK, KVN = ka.shape[1], ka.shape[2]
    p = dict(B=B, N=N, KVN=KVN, S=S, SK=SK, D=D, causal=bool(causal), layout=layout.lower())
    if scale is not None:
        p["scale"] = repr(float(scale))
    tensors = [q, k, v]
    if mask is not None:
        m = to_numpy(mask)
        if m.ndim == 2:
            m = m.reshape(1, 1, *m.shape)
        if m.ndim != 4 or m.shape[3] != SK:
            raise ValueError(f"flash_attention: the mask must be [B|1, N|1, S|1, SK] or [S, SK], not {list(to_numpy(mask).shape)}")
        p["mask"] = 1
        p["mask_shape"] = f"{m.shape[0]},{m.shape[1]},{m.shape[2]}"
        tensors.append(m)
    return call("flash_attention", *tensors, outputs_like=q, **p)[0]


# --- matmul -------------------------------------------------------------------------------------------------------

def matmul(a, b, bias=None, trans_a: bool = False, trans_b: bool = False, act: str = "none"):
    """act(op(a) op(b) + bias) on the Cube, fp32 accumulation; a: [B x] M x K, b: [B x] K x N (transposed with
    trans_*), bias: N; act none, relu, gelu, gelu_tanh. fp16 and bf16."""
    aa, ba = to_numpy(a), to_numpy(b)
    if aa.ndim not in (2, 3) or ba.ndim != aa.ndim:
        raise ValueError(f"matmul: a and b must both be 2-D or 3-D, not {list(aa.shape)} and {list(ba.shape)}")
    M, K = (aa.shape[-1], aa.shape[-2]) if trans_a else (aa.shape[-2], aa.shape[-1])
    N = ba.shape[-2] if trans_b else ba.shape[-1]
    p = dict(M=M, N=N, K=K, trans_a=trans_a, trans_b=trans_b, act=act)
    if aa.ndim == 3:
        p["B"] = aa.shape[0]
    tensors = [a, b]
    if bias is not None:
        p["bias"] = 1
        tensors.append(bias)
    return call("matmul", *tensors, **p)[0]


# --- row-wise -----------------------------------------------------------------------------------------------------

def softmax(x):
    """Softmax over the last dimension."""
    return _one("softmax", x, shape=_shape(x))


def log_softmax(x):
    """Log-softmax over the last dimension."""
    return _one("log_softmax", x, shape=_shape(x))


def layer_norm(x, gamma, beta, eps: float = 1e-5, stats: bool = False):
    """LayerNorm over the last dimension; with stats also the rows' mean and rstd (fp32): (y, mean, rstd)."""
    outs = call("layernorm", x, gamma, beta, shape=_shape(x), eps=repr(float(eps)), stats=bool(stats))
    return tuple(outs) if stats else outs[0]


def add_layer_norm(x, residual, gamma, beta, eps: float = 1e-5):
    """LayerNorm(x + residual) and the sum: (y, x + residual)."""
    outs = call("add_layernorm", x, residual, gamma, beta, shape=_shape(x), eps=repr(float(eps)))
    return tuple(outs)


def rms_norm(x, gamma, eps: float = 1e-6):
    """x / sqrt(mean(x^2) + eps) * gamma over the last dimension."""
    return _one("rmsnorm", x, gamma, shape=_shape(x), eps=repr(float(eps)))


def rope(x, cos, sin, layout: str = "bnsd", interleaved: bool = False):
    """Rotary embedding of x (... x S x D, or ... x S x N x D with layout="bsnd"); cos, sin: S x D."""
    if interleaved:
        return _one("rope_interleaved", x, cos, sin, shape=_shape(x))
    return _one("rope", x, cos, sin, shape=_shape(x), layout=layout.lower())


def swiglu(x):
    """silu(a) * b with [a, b] the two halves of the last dimension."""
    return _one("swiglu", x, shape=_shape(x))


# --- elementwise --------------------------------------------------------------------------------------------------

def _unary(name):
    def f(x):
        return _one(name, x, shape=_shape(x))

    f.__name__ = name
    f.__doc__ = f"The library's {name} kernel, elementwise."
    return f


relu = _unary("relu")
gelu = _unary("gelu")
gelu_tanh = _unary("gelu_tanh")
silu = _unary("silu")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
abs = _unary("abs")  # noqa: A001 - the op's name
neg = _unary("neg")
reciprocal = _unary("reciprocal")
sigmoid = _unary("sigmoid")
tanh = _unary("tanh")
erf = _unary("erf")


def _binary(name):
    def f(a, b):
        return _one(name, a, b, shape=_shape(a), shape_b=_shape(b))

    f.__name__ = name
    f.__doc__ = f"a {name} b, b broadcast over a's leading dimensions."
    return f


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")


def fused_elementwise(expr: str, *xs, shape=None):
    """One expression over up to 8 inputs in fp32 per tile, e.g. fused_elementwise("mul(silu(x0),x1)", a, b);
    inputs broadcast over the trailing dimensions of `shape` (default: the first input's)."""
    shape = shape or to_numpy(xs[0]).shape
    p = {"expr": expr, "shape": "x".join(str(int(d)) for d in shape)}
    for i, x in enumerate(xs):
        p[f"shape_x{i}"] = _shape(x)
    return _one("fused_elementwise", *xs, **p)


def cast(x, to: str):
    """x converted to fp16, bf16 or fp32 (round to nearest even)."""
    return _one("cast", x, shape=_shape(x), to=to)


def _reduce(name):
    def f(x, axis: int = -1):
        nd = to_numpy(x).ndim
        return _one(name, x, shape=_shape(x), axis=axis % nd)

    f.__name__ = name
    f.__doc__ = f"{name} along one axis (removed)."
    return f


reduce_sum = _reduce("reduce_sum")
reduce_mean = _reduce("reduce_mean")
reduce_max = _reduce("reduce_max")


def transpose(x, perm=None):
    """Permutes dims (default: swap the last two); the last dim stays last or swaps with the one before."""
    p = {"shape": _shape(x)}
    if perm is not None:
        p["perm"] = ",".join(str(int(i)) for i in perm)
    return _one("transpose", x, **p)

