"""torch.compile(model, backend="npusim"): the graph mode. Dynamo's FX graph is exported to ONNX in memory (torch's
own exporter, with the graph's parameters and buffers as initializers), then goes through the graph engine as a file
would: import, constant folding, the fusion passes (MatMul->Softmax->MatMul written by hand becomes FlashAttention),
lowering, planning, and one run on the simulated device per call. A graph the exporter or the graph engine cannot
take is an error naming the node, never a silent CPU run (docs/python.md)."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings

import torch

import npusim

_compiled = []
# Dynamo records the fused inference paths as the torch functions; the adaptor's table keys them by aten op.
_TORCH_COMPOSITES = {torch._transformer_encoder_layer_fwd: torch.ops.aten._transformer_encoder_layer_fwd.default,
                     torch._native_multi_head_attention: torch.ops.aten._native_multi_head_attention.default}  # every NpusimGraph made, newest last (tests and the profiler read .model.graph)


class NpusimGraph:
    """One compiled FX graph: its ONNX model on the device and the mapping of call arguments to model inputs."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs):
        from ._routes import COMPOSITES

        # PyTorch's fused inference ops (TransformerEncoderLayer, MultiheadAttention) as plain ops the exporter takes.
        changed = False
        for node in gm.graph.nodes:
            target = _TORCH_COMPOSITES.get(node.target, node.target) if node.op == "call_function" else None
            if target in COMPOSITES:
                node.target = COMPOSITES[target]
                changed = True
        if changed:
            gm.recompile()
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.const_index = []
        for i, (node, x) in enumerate(zip(placeholders, example_inputs)):
            name = str(node.target)
            if isinstance(x, torch.nn.Parameter) or "_parameters_" in name or "_buffers_" in name:
                self.const_index.append(i)
        consts = {i: _cpu(example_inputs[i]).detach() for i in self.const_index}
        self.dynamic_index = [i for i in range(len(example_inputs)) if i not in consts]
        for i in self.dynamic_index:
            if not isinstance(example_inputs[i], torch.Tensor):
                raise NotImplementedError(f"npusim backend: graph input {placeholders[i].target} is not a tensor "
                                          f"({type(example_inputs[i]).__name__}); compile with dynamic=False")
        wrapper = _Wrapper(gm, consts, len(example_inputs))
        dyn = tuple(_cpu(example_inputs[i]).detach() for i in self.dynamic_index)
        # The exporter reports its steps on stdout and warns about optional packages (torchvision) in its log.
        logger = logging.getLogger("torch.onnx")
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("ignore")
                program = torch.onnx.export(wrapper, dyn, dynamo=True, verbose=False, optimize=True)
        except Exception as e:
            raise RuntimeError(f"npusim backend: torch.onnx.export could not export the FX graph: {e}") from e
        finally:
            logger.setLevel(level)
        proto = program.model_proto
        # Symbolic dims (if the exporter made any) bound from the example inputs.
        dims = {}
        for vi, x in zip(proto.graph.input, dyn):
            for d, size in zip(vi.type.tensor_type.shape.dim, x.shape):
                if d.dim_param:
                    dims[d.dim_param] = int(size)
        buf = proto.SerializeToString()
        self.onnx = buf  # the exported model (onnx.ModelProto bytes), e.g. to run with `npusim run`
        self.model = npusim.device().compile(buf, dims=dims)
        self.gm = gm

    def __call__(self, *args):
        from . import NpuTensor

        on_npu = any(isinstance(a, NpuTensor) for a in args)
        inputs = [_cpu(args[i]) for i in self.dynamic_index]
        from . import host_op

        with host_op("npusim::compiled_graph"):
            r = npusim.device().run(self.model, [x.detach() for x in inputs])
        outs = list(r.outputs.values())
        if on_npu:
            outs = [NpuTensor(o) for o in outs]
        return tuple(outs)


class _Wrapper(torch.nn.Module):
    def __init__(self, gm, consts, n):
        super().__init__()
        self.gm = gm
        self.n = n
        self.const_slots = sorted(consts)
        for k, i in enumerate(self.const_slots):
            self.register_buffer(f"c{k}", consts[i])

    def forward(self, *dyn):
        args, it = [], iter(dyn)
        slots = {i: getattr(self, f"c{k}") for k, i in enumerate(self.const_slots)}
        for i in range(self.n):
            args.append(slots[i] if i in slots else next(it))
        out = self.gm(*args)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)


def _cpu(x):
    h = getattr(x, "_npusim_host", None)
    return h if h is not None else x


def npusim_backend(gm: torch.fx.GraphModule, example_inputs):
    g = NpusimGraph(gm, example_inputs)
    _compiled.append(g)

    def run(*args):
        return g(*args)

    return run


def last_graph() -> NpusimGraph | None:
    """The graph torch.compile(backend="npusim") compiled last (its .model.graph says what fused)."""
    return _compiled[-1] if _compiled else None


try:
    from torch._dynamo import register_backend

    register_backend(name="npusim")(npusim_backend)
except Exception:  # pragma: no cover - torch without dynamo
    pass

