"""Integers and bools in graphs, as exporters write them (issue 20 item 2; docs/graph.md): embeddings gathered by
int64 token ids, masks computed at run time (comparisons, logic, Where on a computed condition, casts to and from
bool and int64), GatherND and Gather with constant indices, Conv1d, and PyTorch's safe-softmax guard around an
attention whose mask hides a whole row. Models are written with onnx.helper as a user would; references are NumPy.

Environment: NPUSIM the npusim binary (ctest sets it).
"""

import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

NPUSIM = os.environ.get("NPUSIM", "npusim")
RNG = np.random.default_rng(20)


def model(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def run(path, tmp_path, inputs, *extra):
    """`npusim run --functional` with `inputs` as .npy files; (returncode, outputs by name, stderr, json)."""
    d_in, d_out = tmp_path / "in", tmp_path / "out"
    d_in.mkdir(exist_ok=True)
    for k, v in inputs.items():
        np.save(d_in / f"{k}.npy", v)
    p = subprocess.run([NPUSIM, "run", path, "--functional", "--inputs", str(d_in), "--outputs", str(d_out), "--json",
                        *extra], capture_output=True, text=True, timeout=300)
    outs = {f[:-4]: np.load(d_out / f) for f in os.listdir(d_out) if f.endswith(".npy")} if p.returncode == 0 else {}
    return p.returncode, outs, p.stderr, json.loads(p.stdout) if p.returncode == 0 else None


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def embedding(tmp_path):
    table = RNG.standard_normal((100, 64)).astype(np.float32)
    return model(str(tmp_path / "emb.onnx"), [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")],
                 [vi("ids", TensorProto.INT64, [2, 7])], [vi("y", TensorProto.FLOAT, [2, 7, 64])],
                 [("table", table)]), table


def test_an_embedding_gathers_rows_by_int64_ids_negative_ones_from_the_end(tmp_path):
    path, table = embedding(tmp_path)
    ids = np.array([[0, 5, 99, -1, 42, 42, 7], [3, -100, 1, 2, 98, 0, 50]], dtype=np.int64)
    rc, outs, err, report = run(path, tmp_path, {"ids": ids})
    assert rc == 0, err
    assert np.array_equal(outs["y"], np.take(table, ids, axis=0))
    assert [s["kernel"] for s in report["graph"]["steps"]] == ["Gather"]


@pytest.mark.parametrize("ids,message", [
    (np.full((2, 7), 100, dtype=np.int64), "gather: index 100 at position 0 is outside [-100, 100)"),
    (np.full((2, 7), 2**40, dtype=np.int64), "element 0 is 1099511627776, outside int32"),
])
def test_ids_the_table_or_the_device_cannot_hold_are_named(tmp_path, ids, message):
    path, _ = embedding(tmp_path)
    rc, _, err, _ = run(path, tmp_path, {"ids": ids})
    assert rc == 1 and message in err, err


def test_masks_computed_at_run_time_match_numpy(tmp_path):
    """keep = Not(Equal(ids, 0)) (bool out); y = x * Cast(keep, float); z = Where(Less(x, w), x, w); n = Cast(x, int64)
    (toward zero); both = Or(Greater(x, 0), keep) -> Cast to float."""
    nodes = [
        helper.make_node("Equal", ["ids", "zero"], ["pad"], name="eq"),
        helper.make_node("Not", ["pad"], ["keep"], name="not"),
        helper.make_node("Cast", ["keep"], ["keepf"], name="cast_keep", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "keepf"], ["y"], name="mul"),
        helper.make_node("Less", ["x", "w"], ["lt"], name="lt"),
        helper.make_node("Where", ["lt", "x", "w"], ["z"], name="where"),
        helper.make_node("Cast", ["x"], ["n"], name="to_int", to=TensorProto.INT64),
        helper.make_node("Greater", ["x", "zerof"], ["pos"], name="gt"),
        helper.make_node("Or", ["pos", "keep"], ["either"], name="or"),
        helper.make_node("Cast", ["either"], ["both"], name="cast_either", to=TensorProto.FLOAT),
    ]
    path = model(str(tmp_path / "masks.onnx"), nodes,
                 [vi("ids", TensorProto.INT64, [4, 48]), vi("x", TensorProto.FLOAT, [4, 48]),
                  vi("w", TensorProto.FLOAT, [4, 48])],
                 [vi("keep", TensorProto.BOOL, [4, 48]), vi("y", TensorProto.FLOAT, [4, 48]),
                  vi("z", TensorProto.FLOAT, [4, 48]), vi("n", TensorProto.INT64, [4, 48]),
                  vi("both", TensorProto.FLOAT, [4, 48])],
                 [("zero", np.array(0, dtype=np.int64)), ("zerof", np.array(0, dtype=np.float32))])
    ids = RNG.integers(0, 3, (4, 48)).astype(np.int64)
    x = (RNG.standard_normal((4, 48)) * 5).astype(np.float32)
    w = RNG.standard_normal((4, 48)).astype(np.float32)
    rc, o, err, _ = run(path, tmp_path, {"ids": ids, "x": x, "w": w})
    assert rc == 0, err
    keep = ids != 0
    assert o["keep"].dtype == np.bool_ and np.array_equal(o["keep"], keep)
    assert np.array_equal(o["y"], x * keep)
    assert np.array_equal(o["z"], np.where(x < w, x, w))
    assert o["n"].dtype == np.int64 and np.array_equal(o["n"], np.trunc(x).astype(np.int64))
    assert np.array_equal(o["both"], ((x > 0) | keep).astype(np.float32))


def test_gather_nd_and_gather_on_an_inner_axis_with_constant_indices(tmp_path):
    nodes = [
        helper.make_node("GatherND", ["x", "nd"], ["a"], name="gnd"),
        helper.make_node("Gather", ["x", "cols"], ["b"], name="g1", axis=1),
    ]
    nd = np.array([[[1, 2]], [[0, 0]], [[2, -1]]], dtype=np.int64)  # [3, 1, 2]: rows x[1, 2], x[0, 0], x[2, -1]
    cols = np.array([3, 0, -2], dtype=np.int64)
    path = model(str(tmp_path / "gnd.onnx"), nodes, [vi("x", TensorProto.FLOAT16, [3, 5, 32])],
                 [vi("a", TensorProto.FLOAT16, [3, 1, 32]), vi("b", TensorProto.FLOAT16, [3, 3, 32])],
                 [("nd", nd), ("cols", cols)])
    x = RNG.standard_normal((3, 5, 32)).astype(np.float16)
    rc, o, err, report = run(path, tmp_path, {"x": x})
    assert rc == 0, err
    assert np.array_equal(o["a"], x[nd[..., 0], nd[..., 1]])
    assert np.array_equal(o["b"], np.take(x, cols, axis=1))
    assert [s["kernel"] for s in report["graph"]["steps"]] == ["Gather", "Gather"]


def test_conv1d_runs_as_a_2d_convolution_of_height_1(tmp_path):
    w = (RNG.standard_normal((6, 4, 3)) * 0.3).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    path = model(str(tmp_path / "conv1d.onnx"),
                 [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1], strides=[2])],
                 [vi("x", TensorProto.FLOAT, [2, 4, 21])], [vi("y", TensorProto.FLOAT, [2, 6, 11])],
                 [("w", w), ("b", b)])
    x = RNG.standard_normal((2, 4, 21)).astype(np.float32)
    rc, o, err, report = run(path, tmp_path, {"x": x})
    assert rc == 0, err
    f16 = lambda a: a.astype(np.float16).astype(np.float32)  # the Cube's fp16 operands
    xp = np.pad(f16(x), ((0, 0), (0, 0), (1, 1)))
    ref = np.stack([np.einsum("nck,ock->no", xp[:, :, 2 * i:2 * i + 3], f16(w)) for i in range(11)], axis=-1)
    ref += f16(b)[None, :, None]
    assert np.abs(o["y"] - ref).max() < 2e-2 * np.abs(ref).max()
    assert "Conv2D" in [s["kernel"] for s in report["graph"]["steps"]]


def test_a_row_the_mask_hides_whole_is_zero_fused_and_unfused(tmp_path):
    """PyTorch's SDPA export: Where(mask, 0, -inf) added to the scores, Softmax, Where(IsNaN(P), 0, P), MatMul. Row 3
    of the mask hides every key: PyTorch gives 0 there; FlashAttention (fused, the guard absorbed) gives 0 too."""
    S, D = 16, 32
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
        helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
        helper.make_node("Where", ["mask", "zero", "ninf"], ["m"], name="mask"),
        helper.make_node("Add", ["ss", "m"], ["sm"], name="add"),
        helper.make_node("Softmax", ["sm"], ["p"], name="softmax", axis=-1),
        helper.make_node("IsNaN", ["p"], ["nan"], name="isnan"),
        helper.make_node("Where", ["nan", "zero", "p"], ["pg"], name="guard"),
        helper.make_node("MatMul", ["pg", "v"], ["o"], name="pv"),
    ]
    t = TensorProto.FLOAT16
    path = model(str(tmp_path / "attn.onnx"), nodes,
                 [vi("q", t, [1, 2, S, D]), vi("k", t, [1, 2, S, D]), vi("v", t, [1, 2, S, D]),
                  vi("mask", TensorProto.BOOL, [1, 1, S, S])], [vi("o", t, [1, 2, S, D])],
                 [("scale", np.array(D ** -0.5, dtype=np.float16)), ("zero", np.array(0, dtype=np.float16)),
                  ("ninf", np.array(-np.inf, dtype=np.float16))])
    q, k, v = (RNG.standard_normal((1, 2, S, D)).astype(np.float16) for _ in range(3))
    mask = RNG.random((1, 1, S, S)) < 0.7
    mask[..., 3, :] = False
    s = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 1, 3, 2) * D ** -0.5 + np.where(mask, 0, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = np.nan_to_num(p / p.sum(-1, keepdims=True))
    ref = p @ v.astype(np.float32)
    for extra, fused in (((), True), (("--no-fusion",), False)):
        rc, o, err, report = run(path, tmp_path, {"q": q, "k": k, "v": v, "mask": mask}, *extra)
        assert rc == 0, err
        assert not np.isnan(o["o"]).any() and np.all(o["o"][..., 3, :] == 0)
        assert np.abs(o["o"].astype(np.float32) - ref).max() < 1e-2
        kernels = [s["kernel"] for s in report["graph"]["steps"]]
        assert ("FlashAttention" in kernels) == fused, kernels


def test_integer_outputs_come_back_in_the_models_types_and_narrowing_casts_are_refused(tmp_path):
    """A bool cast to int8 and to int16 is written as int8 / int16 (the device holds both in int32); a float cast to
    int8 would not wrap on the device and is refused by name."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"], name="gt"),
             helper.make_node("Cast", ["pos"], ["a"], name="to_i8", to=TensorProto.INT8),
             helper.make_node("Cast", ["pos"], ["b"], name="to_i16", to=TensorProto.INT16)]
    path = model(str(tmp_path / "narrow.onnx"), nodes, [vi("x", TensorProto.FLOAT, [3, 40])],
                 [vi("a", TensorProto.INT8, [3, 40]), vi("b", TensorProto.INT16, [3, 40])],
                 [("zero", np.array(0, dtype=np.float32))])
    x = RNG.standard_normal((3, 40)).astype(np.float32)
    rc, o, err, _ = run(path, tmp_path, {"x": x})
    assert rc == 0, err
    assert o["a"].dtype == np.int8 and np.array_equal(o["a"], (x > 0).astype(np.int8))
    assert o["b"].dtype == np.int16 and np.array_equal(o["b"], (x > 0).astype(np.int16))
    bad = model(str(tmp_path / "bad.onnx"), [helper.make_node("Cast", ["x"], ["y"], name="to_i8", to=TensorProto.INT8)],
                [vi("x", TensorProto.FLOAT, [3, 40])], [vi("y", TensorProto.INT8, [3, 40])])
    rc, _, err, _ = run(bad, tmp_path, {"x": x})
    assert rc == 1 and "node 'to_i8' (Cast): a cast from float32 to int8 is not run on the device" in err, err


def test_a_comparison_of_a_convolutions_output_stays_off_its_nc1hwc0_form(tmp_path):
    """Conv -> Greater(conv, 0) -> Cast to float -> Conv: the comparison's bool output is not a form of the feature
    map, so it runs on the NCHW result (the NC1HWC0 propagation would otherwise give it the map's fp16 type and the
    plan would refuse the graph)."""
    w = (RNG.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)
    w2 = (RNG.standard_normal((16, 16, 1, 1)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Greater", ["c", "zero"], ["g"], name="gt"),
             helper.make_node("Cast", ["g"], ["gf"], name="to_float", to=TensorProto.FLOAT),
             helper.make_node("Conv", ["gf", "w2"], ["y"], name="conv2")]
    path = model(str(tmp_path / "convgt.onnx"), nodes, [vi("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                 [vi("y", TensorProto.FLOAT, [1, 16, 12, 12])],
                 [("w", w), ("w2", w2), ("zero", np.array(0, dtype=np.float32))])
    x = RNG.standard_normal((1, 8, 12, 12)).astype(np.float32)
    rc, o, err, _ = run(path, tmp_path, {"x": x})
    assert rc == 0, err
    f16 = lambda a: a.astype(np.float16).astype(np.float32)
    xp = np.pad(f16(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    c = np.zeros((1, 16, 12, 12), dtype=np.float32)
    for i in range(3):
        for j in range(3):
            c += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 12, j:j + 12], f16(w[:, :, i, j]))
    ref = np.einsum("nchw,oc->nohw", (c > 0).astype(np.float32), f16(w2[:, :, 0, 0]))
    # The device rounds the first result to fp16 (signs kept) and runs the second convolution in fp16: |y| < 2.
    assert np.abs(o["y"] - ref).max() < 1e-2


def test_an_unbound_dim_is_named_rather_than_the_shape_nodes_it_leaves_unfolded(tmp_path):
    """Issue 24: shape arithmetic over a symbolic dim (Shape -> Gather -> Concat -> Reshape, as exporters write a
    view) cannot fold until the dim is bound: the error names the dim and the option, and --dim runs it."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "one"], ["seq"], name="seq", axis=0),
             helper.make_node("Concat", ["seq", "heads", "dh"], ["to"], name="to", axis=0),
             helper.make_node("Reshape", ["x", "to"], ["y"], name="view")]
    path = model(str(tmp_path / "view.onnx"), nodes, [vi("x", TensorProto.FLOAT, [1, "seq", 64])],
                 [vi("y", TensorProto.FLOAT, ["seq", 4, 16])],
                 [("one", np.array([1], dtype=np.int64)), ("heads", np.array([4], dtype=np.int64)),
                  ("dh", np.array([16], dtype=np.int64))])
    p = subprocess.run([NPUSIM, "run", path], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "input 'x' has the unbound dim 'seq' (use --dim seq=SIZE)" in p.stderr, p.stderr
    p = subprocess.run([NPUSIM, "run", path, "--dim", "seq=32"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
