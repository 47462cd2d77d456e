"""The adaptor's routing table: aten ops (and F.scaled_dot_product_attention, torch_npu.npu_fusion_attention) to
library ops. A route takes host tensors and returns host tensors computed by library kernels on the simulated device,
or NotImplemented when the call is outside what the kernel takes (the caller then counts a CPU fallback with the
reason). docs/python.md has the table."""

from __future__ import annotations

import math

import torch

import npusim
from npusim import ops

aten = torch.ops.aten
FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_reasons: dict = {}  # aten op -> why the last call fell back (for report())


def _refuse(op: str, why: str):
    _reasons[op] = why
    return NotImplemented


def _host(x):
    return x._npusim_host if hasattr(x, "_npusim_host") else x


def _wrap(x):
    from . import NpuTensor

    return NpuTensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, NpuTensor) else x


def _cube(x):
    """fp32 goes to the Cube as fp16, cast on the device (CANN's default allow_fp32_to_fp16)."""
    return ops.cast(x, "fp16") if x.dtype == torch.float32 else x


def _back(y, dtype):
    return ops.cast(y, "fp32") if dtype == torch.float32 else y


def _guard(name):
    """A route whose op refuses the call (npusim.InputError) falls back with the op's message as the reason."""
    def deco(f):
        def g(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except npusim.InputError as e:
                return _refuse(name, str(e))
        g.__name__ = f.__name__
        return g
    return deco


# --- matmul ----------------------------------------------------------------------------------------------------

def _operand(x):
    """(tensor, transposed): a transposed view of a contiguous matrix goes to the Cube as it is, with trans set."""
    if x.dim() >= 2 and not x.is_contiguous() and x.transpose(-1, -2).is_contiguous():
        return x.transpose(-1, -2), True
    return x, False


def _product(name):
    """mm and bmm: [batched] matrix products on the Cube."""
    @_guard(name)
    def route(a, b):
        if a.dtype != b.dtype or a.dtype not in FLOATS:
            return _refuse(name, f"dtypes {a.dtype}, {b.dtype}")
        aa, ta = _operand(a)
        bb, tb = _operand(b)
        return _back(ops.matmul(_cube(aa), _cube(bb), trans_a=ta, trans_b=tb), a.dtype)
    return route


@_guard("addmm")
def addmm(bias, a, b, beta=1, alpha=1):
    n = b.shape[1]
    if beta != 1 or alpha != 1 or a.dtype != b.dtype or a.dtype not in FLOATS or bias.numel() != n or \
            (bias.dim() == 2 and bias.shape[0] != 1):
        return _refuse("addmm", "beta/alpha other than 1, or a bias that is not one row of N")
    aa, ta = _operand(a)
    bb, tb = _operand(b)
    y = ops.matmul(_cube(aa), _cube(bb), bias=_cube(bias.reshape(n).to(a.dtype)), trans_a=ta, trans_b=tb)
    return _back(y, a.dtype)


# --- row-wise --------------------------------------------------------------------------------------------------

@_guard("_softmax")
def softmax(x, dim, half_to_float=False):
    if dim % x.dim() != x.dim() - 1 or half_to_float or x.dtype not in FLOATS:
        return _refuse("_softmax", "softmax over a dimension other than the last")
    return ops.softmax(x)


@_guard("_log_softmax")
def log_softmax(x, dim, half_to_float=False):
    if dim % x.dim() != x.dim() - 1 or half_to_float or x.dtype not in FLOATS:
        return _refuse("_log_softmax", "log-softmax over a dimension other than the last")
    return ops.log_softmax(x)


@_guard("native_layer_norm")
def native_layer_norm(x, normalized_shape, weight, bias, eps):
    if len(normalized_shape) != 1 or x.dtype not in FLOATS:
        return _refuse("native_layer_norm", "normalisation over more than the last dimension")
    h = x.shape[-1]
    w = weight if weight is not None else torch.ones(h, dtype=x.dtype)
    b = bias if bias is not None else torch.zeros(h, dtype=x.dtype)
    y, mean, rstd = ops.layer_norm(x, w.to(x.dtype), b.to(x.dtype), eps=eps, stats=True)
    # mean and rstd as PyTorch gives them (its meta function: shape [..., 1], its dtype)
    want = aten.native_layer_norm.default(x.to("meta"), normalized_shape, None, None, eps)
    return y, mean.reshape(want[1].shape).to(want[1].dtype), rstd.reshape(want[2].shape).to(want[2].dtype)


# --- elementwise -----------------------------------------------------------------------------------------------

_UNARY = {aten.relu.default: "relu", aten.silu.default: "silu", aten.sigmoid.default: "sigmoid",
          aten.tanh.default: "tanh", aten.exp.default: "exp", aten.log.default: "log", aten.sqrt.default: "sqrt",
          aten.rsqrt.default: "rsqrt", aten.neg.default: "neg", aten.abs.default: "abs",
          aten.reciprocal.default: "reciprocal", aten.erf.default: "erf"}


def _unary(fn):
    @_guard(fn)
    def route(x):
        if x.dtype not in FLOATS:
            return _refuse(fn, f"dtype {x.dtype}")
        return ops.fused_elementwise(f"{fn}(x0)", x)
    return route


@_guard("gelu")
def gelu(x, approximate="none"):
    if x.dtype not in FLOATS:
        return _refuse("gelu", f"dtype {x.dtype}")
    return ops.gelu_tanh(x) if approximate == "tanh" else ops.gelu(x)


def _literal(v) -> str:
    v = float(v)
    return "inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)


def _elementwise(name, build, *operands):
    """One fused_elementwise kernel over the tensor operands (numbers and 0-d tensors become literals)."""
    tensors = [o for o in operands if isinstance(o, torch.Tensor) and o.dim() > 0]
    if not tensors:
        return _refuse(name, "no tensor operand")
    dtype = tensors[0].dtype
    for o in operands[1:]:
        if isinstance(o, torch.Tensor):
            dtype = torch.promote_types(dtype, o.dtype) if o.dim() > 0 else torch.result_type(torch.empty(1, dtype=dtype), o)
        elif isinstance(o, float) and not dtype.is_floating_point:
            dtype = torch.get_default_dtype()
    if dtype not in FLOATS or any(t.dtype not in FLOATS for t in tensors):
        return _refuse(name, f"dtype {dtype}")
    out_shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    if len(out_shape) == 0 or math.prod(out_shape) == 0:
        return _refuse(name, "an empty or 0-d result")
    names, inputs = [], []
    for o in operands:
        if isinstance(o, torch.Tensor) and o.dim() > 0:
            t = o
            if t.dtype != dtype:
                t = ops.cast(t, {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype])
            s = list(t.shape)
            while len(s) > 1 and s[0] == 1:
                s.pop(0)
            if s != list(out_shape[len(out_shape) - len(s):]):
                t = t.expand(out_shape)  # a broadcast other than over leading dims: materialised on the host
            names.append(f"x{len(inputs)}")
            inputs.append(t)
        else:
            names.append(_literal(o.item() if isinstance(o, torch.Tensor) else o))
    if len(inputs) > 8:
        return _refuse(name, "more than 8 tensor operands")
    return ops.fused_elementwise(build(*names), *inputs, shape=out_shape)


def _binary(name, fn):
    @_guard(name)
    def route(a, b, alpha=1):
        def build(x, y):
            return f"{fn}({x},{y})" if alpha == 1 else f"{fn}({x},mul({y},{_literal(alpha)}))"
        return _elementwise(name, build, a, b)
    return route


@_guard("div")
def div_mode(a, b, rounding_mode=None):
    if rounding_mode is not None:
        return _refuse("div", f"rounding_mode={rounding_mode}")
    return _elementwise("div", lambda x, y: f"div({x},{y})", a, b)


@_guard("pow")
def pow_scalar(x, e):
    forms = {2: "mul(x0,x0)", 1: "x0", 0.5: "sqrt(x0)", -1: "reciprocal(x0)", -0.5: "rsqrt(x0)", 3: "mul(x0,mul(x0,x0))"}
    if float(e) not in forms or x.dtype not in FLOATS:
        return _refuse("pow", f"exponent {e}")
    return ops.fused_elementwise(forms[float(e)], x)


@_guard("where")
def where(cond, a, b):
    if not isinstance(cond, torch.Tensor):
        return _refuse("where", "a condition that is not a tensor")
    c = cond.to(torch.result_type(a, b) if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) else torch.float32)
    return _elementwise("where", lambda x, y, z: f"where({x},{y},{z})", c, a, b)


@_guard("_to_copy")
def to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    names = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
    if dtype is None or dtype == x.dtype or x.dtype not in names or dtype not in names or x.numel() == 0 or x.dim() == 0:
        return NotImplemented  # a plain copy (or a dtype the device has no cast for): the host does it
    return ops.cast(x, names[dtype])


def _reduce(name, op):
    @_guard(name)
    def route(x, dim=None, keepdim=False, dtype=None):
        dims = [dim] if isinstance(dim, int) else list(dim or [])
        if len(dims) != 1 or dtype is not None or x.dtype not in FLOATS:
            return _refuse(name, "a reduction over other than one axis")
        axis = dims[0] % x.dim()
        y = op(x, axis=axis)
        if keepdim:
            shape = list(x.shape)
            shape[axis] = 1
            y = y.reshape(shape)
        return y
    return route


# --- attention -------------------------------------------------------------------------------------------------

def _additive(mask, dtype):
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
    return mask.to(dtype)


def _attention(q, k, v, causal, mask, scale, layout="BNSD"):
    dtype = q.dtype
    qd, kd, vd = (ops.cast(t, "fp16") if t.dtype == torch.float32 else t for t in (q, k, v))
    out = ops.flash_attention(qd, kd, vd, causal=causal, mask=mask, scale=scale, layout=layout)
    return ops.cast(out, "fp32") if dtype == torch.float32 else out


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    q, k, v = query, key, value
    why = None
    if dropout_p:
        why = "dropout_p > 0 (dropout is not in the kernel)"
    elif q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        why = "q, k, v that are not 4-D (B, N, S, D)"
    elif q.dtype not in FLOATS or k.dtype != q.dtype or v.dtype != q.dtype:
        why = f"dtypes {q.dtype}, {k.dtype}, {v.dtype}"
    elif k.shape[1] != q.shape[1] and not enable_gqa:
        why = "heads of k/v that differ from q's without enable_gqa"
    elif is_causal and attn_mask is not None:
        why = "both is_causal and attn_mask"
    elif v.shape[-1] != q.shape[-1]:
        why = "a value head size other than the query's"
    mask = None
    if why is None and attn_mask is not None:
        m = attn_mask
        m = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape)) if m.dim() < 4 else m
        full = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
        if m.dim() != 4 or m.shape[3] != full[3]:
            why = f"a mask of shape {list(attn_mask.shape)}"
        else:
            if any(m.shape[i] not in (1, full[i]) for i in range(3)):
                m = m.expand(full)
            mask = _additive(m, torch.float16 if q.dtype == torch.float32 else q.dtype).contiguous()
    if why is not None:
        _reasons["scaled_dot_product_attention"] = why
        return NotImplemented
    try:
        return _attention(q, k, v, bool(is_causal), mask, scale)
    except npusim.InputError as e:
        _reasons["scaled_dot_product_attention"] = str(e)
        return NotImplemented


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False):
    """torch_npu.npu_fusion_attention on the simulated device: input_layout BSH, SBH, BSND or BNSD; atten_mask
    True (1) where a score is masked out, [S, SK], [B, 1, S, SK] or [B, N, S, SK]; sparse_mode 0 (the mask as
    given), 2 (causal from the top left) or 3 (causal from the bottom right). Returns (attention_out,
    softmax_max, softmax_sum, softmax_out, seed, offset, numels) as torch_npu does; the kernel keeps the softmax
    statistics on chip, so softmax_max, softmax_sum and softmax_out are empty tensors (docs/python.md)."""
    from . import _stats

    q, k, v = _host(query), _host(key), _host(value)
    layout = input_layout.upper()
    if layout not in ("BSH", "SBH", "BSND", "BNSD"):
        raise ValueError(f"npu_fusion_attention: input_layout {input_layout!r} is not BSH, SBH, BSND or BNSD")
    if pse is not None or padding_mask is not None or prefix is not None or actual_seq_qlen is not None or \
            actual_seq_kvlen is not None:
        raise NotImplementedError("npu_fusion_attention: pse, padding_mask, prefix and actual_seq_* are not supported")
    if keep_prob != 1.0:
        raise NotImplementedError("npu_fusion_attention: keep_prob < 1 (dropout) is not in the kernel")
    if sparse_mode not in (0, 2, 3):
        raise NotImplementedError(f"npu_fusion_attention: sparse_mode {sparse_mode} (0, 2 and 3 are supported)")
    if sparse_mode == 0 and (pre_tockens != 2147483647 or next_tockens != 2147483647):
        raise NotImplementedError("npu_fusion_attention: band masks (pre_tockens/next_tockens) are not supported")
    n = int(head_num)
    # To BNSD views (the same bytes for BSND and BSH; SBH goes through explicit strides).
    if layout == "BNSD":
        B, N, S, D = q.shape
        SK, KVN = k.shape[2], k.shape[1]
    elif layout == "BSND":
        B, S, N, D = q.shape
        SK, KVN = k.shape[1], k.shape[2]
    elif layout == "BSH":
        B, S, H = q.shape
        N, D = n, H // n
        SK, KVN = k.shape[1], k.shape[2] // D
    else:  # SBH
        S, B, H = q.shape
        N, D = n, H // n
        SK, KVN = k.shape[0], k.shape[2] // D
    if N != n:
        raise ValueError(f"npu_fusion_attention: head_num {n} but the query has {N} heads")
    causal = sparse_mode == 2 or (sparse_mode == 3 and S == SK)
    mask = None
    if sparse_mode == 3 and S != SK:  # bottom-right causal: query i sees keys up to i + SK - S
        i = torch.arange(S).unsqueeze(1)
        j = torch.arange(SK).unsqueeze(0)
        keep = j <= i + (SK - S)
        mask = _additive(keep, torch.float16 if q.dtype == torch.float32 else q.dtype).reshape(1, 1, S, SK)
    elif sparse_mode == 0 and atten_mask is not None:
        m = _host(atten_mask).to(torch.bool)
        m = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))
        full = (B, N, S, SK)
        if any(m.shape[i] not in (1, full[i]) for i in range(4)) or m.shape[3] != SK:
            raise ValueError(f"npu_fusion_attention: atten_mask of shape {list(_host(atten_mask).shape)} for {full}")
        mask = _additive(~m, torch.float16 if q.dtype == torch.float32 else q.dtype).contiguous()
    dtype = q.dtype
    if layout in ("BNSD", "BSND", "BSH"):
        lay = "BNSD" if layout == "BNSD" else "BSND"
        if layout == "BSH":
            q, k, v = q.reshape(B, S, N, D), k.reshape(B, SK, KVN, D), v.reshape(B, SK, KVN, D)
        out = _attention(q, k, v, causal, mask, scale, layout=lay)
        if layout == "BSH":
            out = out.reshape(B, S, N * D)
    else:  # SBH: element (b, n, s, d) at s*B*H + b*H + n*D + d
        qd, kd, vd = (ops.cast(t, "fp16") if t.dtype == torch.float32 else t for t in (q, k, v))
        p = dict(B=B, N=N, KVN=KVN, S=S, SK=SK, D=D, causal=causal, scale=repr(float(scale)),
                 q_strides=f"{N * D},{D},{B * N * D}", k_strides=f"{KVN * D},{D},{B * KVN * D}",
                 v_strides=f"{KVN * D},{D},{B * KVN * D}", o_strides=f"{N * D},{D},{B * N * D}",
                 q_offset=0, k_offset=0, v_offset=0, o_offset=0)
        tensors = [qd, kd, vd]
        if mask is not None:
            p["mask"] = 1
            p["mask_shape"] = f"{mask.shape[0]},{mask.shape[1]},{mask.shape[2]}"
            tensors.append(mask)
        out = ops.call("flash_attention", *tensors, **p)[0].reshape(S, B, N * D)
        if dtype == torch.float32:
            out = ops.cast(out, "fp32")
    _stats.routed["npu_fusion_attention"] += 1
    empty = torch.empty(0, dtype=torch.float32)
    return _wrap(out), _wrap(empty), _wrap(empty.clone()), _wrap(empty.clone()), 0, 0, 0


# --- the tables --------------------------------------------------------------------------------------------------

ATEN = {
    aten.mm.default: _product("mm"),
    aten.addmm.default: addmm,
    aten.bmm.default: _product("bmm"),
    aten._softmax.default: softmax,
    aten._log_softmax.default: log_softmax,
    aten.native_layer_norm.default: native_layer_norm,
    aten.gelu.default: gelu,
    aten.add.Tensor: _binary("add", "add"),
    aten.sub.Tensor: _binary("sub", "sub"),
    aten.mul.Tensor: _binary("mul", "mul"),
    aten.div.Tensor: _binary("div", "div"),
    aten.div.Tensor_mode: div_mode,
    aten.maximum.default: _binary("maximum", "max"),
    aten.minimum.default: _binary("minimum", "min"),
    aten.pow.Tensor_Scalar: pow_scalar,
    aten.where.self: where,
    aten._to_copy.default: to_copy,
    aten.sum.dim_IntList: _reduce("sum", ops.reduce_sum),
    aten.mean.dim: _reduce("mean", ops.reduce_mean),
    aten.amax.default: _reduce("amax", ops.reduce_max),
}
ATEN.update({op: _unary(fn) for op, fn in _UNARY.items()})
ATEN[aten.add.Scalar] = ATEN[aten.add.Tensor]
ATEN[aten.mul.Scalar] = ATEN[aten.mul.Tensor]
ATEN[aten.sub.Scalar] = ATEN[aten.sub.Tensor]
ATEN[aten.div.Scalar] = ATEN[aten.div.Tensor]

# F.scaled_dot_product_attention is composite; npusim.torch registers a PrivateUse1 kernel for it so that the
# dispatcher hands the call itself (not its decomposition) to the npu tensor's __torch_dispatch__.
ATEN[aten.scaled_dot_product_attention.default] = _sdpa

# Ops that only change metadata, make tensors or move bytes on the host: no kernel, no fallback (listed apart).
_HOST_OPS = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select", "unsqueeze",
    "squeeze", "alias", "detach", "as_strided", "split", "split_with_sizes", "unbind", "chunk", "narrow", "diagonal",
    "empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros", "new_ones", "new_full",
    "empty", "zeros", "ones", "full", "arange", "fill_", "zero_", "clone", "contiguous", "_to_copy", "copy_",
    "lift_fresh", "lift_fresh_copy", "view_as", "expand_as", "_reshape_alias", "unfold", "set_", "resize_",
    "normal_", "uniform_", "random_", "bernoulli_", "_local_scalar_dense", "is_same_size", "stride", "size",
    "sym_size", "sym_stride", "sym_numel", "dim", "numel", "is_contiguous", "_has_compatible_shallow_copy_type",
    "detach_", "requires_grad_", "_copy_from", "_copy_from_and_resize", "equal", "item",
}


def is_view_or_meta(func) -> bool:
    name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
    return name in _HOST_OPS


# --- composites PyTorch's fast paths call as one op: rebuilt from routed ops on npu tensors ----------------------

@_guard("cat")
def cat(tensors, dim=0):
    tensors = [t for t in tensors if t.numel() > 0]
    if not tensors or len({t.dtype for t in tensors}) != 1 or tensors[0].dtype not in FLOATS or tensors[0].dim() == 0:
        return _refuse("cat", "empty, mixed-dtype or non-float tensors")
    if len(tensors) == 1:
        return tensors[0].clone()
    shapes = ",".join("x".join(str(d) for d in t.shape) for t in tensors)
    return ops.call("concat", *tensors, shapes=shapes, axis=dim % tensors[0].dim())[0]


@_guard("masked_fill")
def masked_fill(x, mask, value):
    if x.dtype not in FLOATS or mask.dtype != torch.bool:
        return _refuse("masked_fill", f"dtype {x.dtype} or a mask that is not bool")
    v = value.item() if isinstance(value, torch.Tensor) else value
    return _elementwise("masked_fill", lambda c, y: f"where({c},{_literal(v)},{y})", mask.to(x.dtype), x)


def _npu(*xs):
    return [_wrap(x) if isinstance(x, torch.Tensor) else x for x in xs]


def _mha(x, E, H, qkv_w, qkv_b, proj_w, proj_b, key=None, value=None):
    F = torch.nn.functional
    B, S, _ = x.shape
    if key is None:  # one projection, split in three (Split, not Gather, in an export)
        q, k, v = (t.reshape(B, S, H, E // H).transpose(1, 2) for t in F.linear(x, qkv_w, qkv_b).chunk(3, dim=-1))
    else:
        wq, wk, wv = qkv_w.chunk(3)
        bq, bk, bv = qkv_b.chunk(3) if qkv_b is not None else (None, None, None)
        SK = key.shape[1]
        q = F.linear(x, wq, bq).view(B, S, H, E // H).transpose(1, 2)
        k = F.linear(key, wk, bk).view(B, SK, H, E // H).transpose(1, 2)
        v = F.linear(value, wv, bv).view(B, SK, H, E // H).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, v)
    return F.linear(a.transpose(1, 2).reshape(B, S, E), proj_w, proj_b)


def encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps,
                  norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2,
                  ffn_bias_2, mask=None, mask_type=None):
    """aten._transformer_encoder_layer_fwd (nn.TransformerEncoderLayer's inference fast path) in plain torch ops:
    what the adaptor runs for npu tensors (each op routed) and what the compile backend exports."""
    if mask is not None or src.dim() != 3:
        raise NotImplementedError("npusim: the TransformerEncoderLayer fast path with a mask or an unbatched input")
    F = torch.nn.functional
    act = F.gelu if use_gelu else F.relu

    def ff(y):
        return F.linear(act(F.linear(y, ffn_weight_1, ffn_bias_1)), ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = x + _mha(F.layer_norm(x, (embed_dim,), norm_weight_1, norm_bias_1, eps), embed_dim, num_heads, qkv_weight,
                     qkv_bias, proj_weight, proj_bias)
        x = x + ff(F.layer_norm(x, (embed_dim,), norm_weight_2, norm_bias_2, eps))
    else:
        x = F.layer_norm(x + _mha(x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias), (embed_dim,),
                         norm_weight_1, norm_bias_1, eps)
        x = F.layer_norm(x + ff(x), (embed_dim,), norm_weight_2, norm_bias_2, eps)
    return x


def multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
                         mask=None, need_weights=True, average_attn_weights=True, mask_type=None):
    """aten._native_multi_head_attention (nn.MultiheadAttention's inference fast path) in plain torch ops."""
    if mask is not None or need_weights or query.dim() != 3:
        raise NotImplementedError("npusim: the MultiheadAttention fast path with a mask, need_weights or unbatched input")
    if query is key and key is value:
        out = _mha(query, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias)
    else:
        out = _mha(query, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, key, value)
    return out, torch.empty(0, dtype=query.dtype)


# PyTorch's fused inference paths, as the composites above (the compile backend rewrites its FX graph with them).
COMPOSITES = {aten._transformer_encoder_layer_fwd.default: encoder_layer,
              aten._native_multi_head_attention.default: multi_head_attention}


def _composite(name, f):
    def route(*args, **kwargs):
        try:
            out = f(*_npu(*args), **{k: _wrap(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
        except NotImplementedError as e:
            return _refuse(name, str(e))
        return tuple(_host(o) for o in out) if isinstance(out, tuple) else _host(out)
    return route


ATEN[aten.cat.default] = cat
ATEN[aten.masked_fill.Scalar] = masked_fill
for _op, _f in COMPOSITES.items():
    ATEN[_op] = _composite(_op.overloadpacket.__name__, _f)
