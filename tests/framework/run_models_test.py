#!/usr/bin/env python3
"""`npusim run`: small ONNX models built here with onnx.helper run in functional mode and match a NumPy reference;
bad models and inputs give clear errors. Usage: run_models_test.py PATH/TO/npusim"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NPUSIM = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run(args):
    p = subprocess.run([NPUSIM, "run", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def mlp(path, rng):
    """x[batch, 64] -> MatMul+Add -> Relu -> Gemm -> Softmax, float32 (the Cube runs it in fp16)."""
    w1 = rng.uniform(-0.2, 0.2, (64, 96)).astype(np.float32)
    b1 = rng.uniform(-0.2, 0.2, (96,)).astype(np.float32)
    w2 = rng.uniform(-0.2, 0.2, (40, 96)).astype(np.float32)
    b2 = rng.uniform(-0.2, 0.2, (40,)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["z"], name="fc2", transB=1),
        helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 40])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)

    def ref(x):
        f16 = lambda a: a.astype(np.float16).astype(np.float32)
        h = (f16(f16(x) @ f16(w1)) + b1).astype(np.float32)  # MatMul in fp16 on the Cube, cast back
        a = np.maximum(h, 0)
        z = f16(f16(a) @ f16(w2).T + f16(b2))
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return ref


def norm_block(path, rng):
    """float16: LayerNormalization -> Transpose -> ReduceMean(keepdims) -> Reshape -> Cast to float32."""
    scale = rng.uniform(0.5, 1.5, (64,)).astype(np.float16)
    bias = rng.uniform(-0.5, 0.5, (64,)).astype(np.float16)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["n"], name="ln", axis=-1, epsilon=1e-5),
        helper.make_node("Transpose", ["n"], ["t"], name="tr", perm=[0, 2, 1]),
        helper.make_node("ReduceMean", ["t"], ["m"], name="mean", axes=[2], keepdims=1),
        helper.make_node("Reshape", ["m", "shape"], ["r"], name="flat"),
        helper.make_node("Cast", ["r"], ["y"], name="cast", to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "norm_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
                          [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias"),
                           numpy_helper.from_array(np.array([2, 64], dtype=np.int64), "shape")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)

    def ref(x):
        x = x.astype(np.float32)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        n = ((x - mu) / np.sqrt(var + 1e-5) * scale.astype(np.float32) + bias.astype(np.float32)).astype(np.float16)
        return n.astype(np.float32).transpose(0, 2, 1).mean(axis=2).reshape(2, 64)
    return ref


def attention(path, rng, kind, dtype=np.float16):
    """Q, K, V [2, 8, 512, 32]: MatMul(Q, Transpose(K)) / sqrt(32) [+ mask | + padding mask | Where(causal)] ->
    Softmax -> MatMul(., V)."""
    b, n, s, d = 2, 8, 512, 32  # long enough that the S x S scores outweigh FlashAttention's workspace
    et = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
             helper.make_node("Div", ["s", "sqrt_d"], ["x"], name="scale")]
    inits = [numpy_helper.from_array(np.array(np.sqrt(d), dtype=dtype), "sqrt_d")]
    last = "x"
    mask = None
    if kind == "mask":
        mask = rng.uniform(-1, 1, (s, s)).astype(dtype)
        inits.append(numpy_helper.from_array(mask, "mask"))
        nodes.append(helper.make_node("Add", ["x", "mask"], ["xm"], name="add_mask"))
        last = "xm"
    if kind == "padding":  # a key-padding mask [B, 1, 1, S] of -inf: batch 0 left-padded past a whole key block
        mask = np.zeros((b, 1, 1, s), dtype=dtype)
        mask[0, 0, 0, :300] = -np.inf
        inits.append(numpy_helper.from_array(mask, "mask"))
        nodes.append(helper.make_node("Add", ["x", "mask"], ["xm"], name="add_mask"))
        last = "xm"
    if kind == "causal":
        inits.append(numpy_helper.from_array(np.tril(np.ones((s, s), dtype=bool)), "tri"))
        inits.append(numpy_helper.from_array(np.array(-1e9 if dtype == np.float32 else -65504, dtype=dtype), "neg"))
        nodes.append(helper.make_node("Where", ["tri", "x", "neg"], ["xm"], name="causal"))
        last = "xm"
    nodes += [helper.make_node("Softmax", [last], ["p"], name="softmax", axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"], name="pv")]
    shape = [b, n, s, d]
    g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info(x, et, shape) for x in ("q", "k", "v")],
                          [helper.make_tensor_value_info("y", et, shape)], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)

    def ref(q, k, v):
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
        sc = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
        if mask is not None:
            sc = sc + mask.astype(np.float64)
        if kind == "causal":
            sc = np.where(np.tril(np.ones((s, s), dtype=bool)), sc, -np.inf)
        e = np.exp(sc - sc.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v
    return ref, shape


def decomposed(path, rng, kind):
    """float32 [4, 96]: a hand-written LayerNorm, RMSNorm or erf GELU as a framework exports it."""
    h = 96
    c = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.float32), name)
    gamma = rng.uniform(0.5, 1.5, (h,)).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, (h,)).astype(np.float32)
    inits = [c("two", 2.0), c("eps", 1e-5), numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")]
    if kind == "layernorm":
        nodes = [helper.make_node("ReduceMean", ["x"], ["u"], axes=[-1], keepdims=1),
                 helper.make_node("Sub", ["x", "u"], ["d"]),
                 helper.make_node("Pow", ["d", "two"], ["d2"]),
                 helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1], keepdims=1),
                 helper.make_node("Add", ["var", "eps"], ["ve"]),
                 helper.make_node("Sqrt", ["ve"], ["sd"]),
                 helper.make_node("Div", ["d", "sd"], ["n"]),
                 helper.make_node("Mul", ["gamma", "n"], ["gn"]),
                 helper.make_node("Add", ["gn", "beta"], ["y"])]
        def ref(x):
            mu = x.mean(-1, keepdims=True)
            return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    elif kind == "rmsnorm":
        inits.append(c("one", 1.0))
        nodes = [helper.make_node("Pow", ["x", "two"], ["x2"]),
                 helper.make_node("ReduceMean", ["x2"], ["ms"], axes=[-1], keepdims=1),
                 helper.make_node("Add", ["ms", "eps"], ["me"]),
                 helper.make_node("Sqrt", ["me"], ["rt"]),
                 helper.make_node("Div", ["one", "rt"], ["r"]),
                 helper.make_node("Mul", ["x", "r"], ["n"]),
                 helper.make_node("Mul", ["gamma", "n"], ["y"])]
        def ref(x):
            return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * gamma
    else:
        inits += [c("sqrt2", np.sqrt(2.0)), c("one", 1.0), c("half", 0.5)]
        nodes = [helper.make_node("Div", ["x", "sqrt2"], ["xs"]),
                 helper.make_node("Erf", ["xs"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["e1"]),
                 helper.make_node("Mul", ["x", "e1"], ["xe"]),
                 helper.make_node("Mul", ["xe", "half"], ["y"])]
        from math import erf
        def ref(x):
            return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2.0)))
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, h])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, h])], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return ref


with tempfile.TemporaryDirectory() as d:
    rng = np.random.default_rng(3)
    # Decomposed norms and GELU: fused into one library op each, equal to NumPy.
    for kind, pass_name, op in [("layernorm", "fuse_layernorm", "LayerNorm"), ("rmsnorm", "fuse_rmsnorm", "RMSNorm"),
                                ("gelu", "fuse_gelu", "Gelu")]:
        model = os.path.join(d, f"{kind}.onnx")
        ref = decomposed(model, rng, kind)
        ins, outs = os.path.join(d, f"{kind}_in"), os.path.join(d, f"{kind}_out")
        os.makedirs(ins)
        os.makedirs(outs)
        x = rng.uniform(-2, 2, (4, 96)).astype(np.float32)
        np.save(os.path.join(ins, "x.npy"), x)
        rc, out, err = run([model, "--functional", "--inputs", ins, "--outputs", outs, "--json"])
        check(rc == 0, f"{kind}: exit {rc}: {err}")
        if rc != 0:
            continue
        j = json.loads(out)
        check(j["graph"]["passes"].get(pass_name) == 1 and [t["name"] for t in j["tasks"] if t["type"] == "kernel"] == [op],
              f"{kind}: passes {j['graph']['passes']}, kernels {[t['name'] for t in j['tasks'] if t['type'] == 'kernel']}")
        y = np.load(os.path.join(outs, "y.npy"))
        e = float(np.max(np.abs(y - ref(x))))
        check(e < 1e-4, f"{kind}: max abs error {e}")
        print(f"{kind}: fused, max abs error {e:.2e}")
        # Unfused: one elementwise/reduction kernel per node, slower, the same values.
        rc, out2, err = run([model, "--no-fusion", "--functional", "--inputs", ins, "--outputs", outs, "--json"])
        check(rc == 0, f"{kind} --no-fusion: {rc} {err}")
        if rc == 0:
            j2 = json.loads(out2)
            e2 = float(np.max(np.abs(np.load(os.path.join(outs, "y.npy")) - ref(x))))
            check(j2["graph"]["kernels"] > 1 and j2["cycles"] > j["cycles"] and e2 < 1e-4,
                  f"{kind} unfused: {j2['graph']['kernels']} kernels, {j2['cycles']} vs {j['cycles']} cycles, error {e2}")
            print(f"{kind}: {j['cycles']} cycles fused, {j2['cycles']} unfused ({j2['graph']['kernels']} kernels)")
    # Attention: fused into one FlashAttention kernel, equal to the unfused run and to NumPy, and faster.
    for kind in ["plain", "mask", "padding", "causal"]:
        model = os.path.join(d, f"attn_{kind}.onnx")
        ref, shape = attention(model, rng, kind)
        ins, outs = os.path.join(d, f"attn_{kind}_in"), os.path.join(d, f"attn_{kind}_out")
        os.makedirs(ins)
        os.makedirs(outs)
        qkv = [rng.uniform(-1, 1, shape).astype(np.float16) for _ in range(3)]
        for name, a in zip(("q", "k", "v"), qkv):
            np.save(os.path.join(ins, name + ".npy"), a)
        rc, out, err = run([model, "--functional", "--inputs", ins, "--outputs", outs, "--json"])
        check(rc == 0, f"attention {kind}: exit {rc}: {err}")
        if rc != 0:
            continue
        j = json.loads(out)
        check(j["graph"]["passes"].get("fuse_attention") == 1 and j["graph"]["kernels"] == 1,
              f"attention {kind}: not fused into one kernel: {j['graph']['passes']} {j['graph']['kernels']}")
        check([t["name"] for t in j["tasks"] if t["type"] == "kernel"] == ["FlashAttention"], f"attention {kind}: tasks {[t['name'] for t in j['tasks']]}")
        y = np.load(os.path.join(outs, "y.npy")).astype(np.float64)
        e = float(np.max(np.abs(y - ref(*qkv))))
        check(e < 2e-3, f"attention {kind}: fused max abs error {e}")
        print(f"attention {kind}: fused max abs error {e:.2e}")
        if kind != "causal":  # Where has no unfused lowering
            rc, out2, err = run([model, "--functional", "--inputs", ins, "--outputs", outs, "--json", "--no-fusion"])
            check(rc == 0, f"attention {kind} unfused: exit {rc}: {err}")
            if rc == 0:
                j2 = json.loads(out2)
                y2 = np.load(os.path.join(outs, "y.npy")).astype(np.float64)
                e2 = float(np.max(np.abs(y2 - ref(*qkv))))
                check(e2 < 3e-3, f"attention {kind}: unfused max abs error {e2}")
                check(j2["graph"]["kernels"] > 1 and j["cycles"] < j2["cycles"],
                      f"attention {kind}: fused {j['cycles']} cycles vs unfused {j2['cycles']}")
                check(j["graph"]["peak_device_bytes"] < j2["graph"]["peak_device_bytes"],
                      f"attention {kind}: fused {j['graph']['peak_device_bytes']} B vs unfused {j2['graph']['peak_device_bytes']} B")
                print(f"attention {kind}: {j['cycles']} cycles fused, {j2['cycles']} unfused; "
                      f"{j['graph']['peak_device_bytes']} B vs {j2['graph']['peak_device_bytes']} B")

    for name, make, x in [("mlp", mlp, rng.uniform(-1, 1, (5, 64)).astype(np.float32)),
                          ("norm_block", norm_block, rng.uniform(-1, 1, (2, 8, 64)).astype(np.float16))]:
        model = os.path.join(d, name + ".onnx")
        ref = make(model, rng)
        ins, outs = os.path.join(d, name + "_in"), os.path.join(d, name + "_out")
        os.makedirs(ins)
        os.makedirs(outs)
        np.save(os.path.join(ins, "x.npy"), x)
        for config in ["tiny", "910b", "910"]:
            rc, out, err = run([model, "--functional", "--inputs", ins, "--outputs", outs, "--dim", "batch=5",
                                "--config", config, "--json"] if name == "mlp" else
                               [model, "--functional", "--inputs", ins, "--outputs", outs, "--config", config, "--json"])
            check(rc == 0, f"{name} on {config}: exit {rc}: {err}")
            if rc != 0:
                continue
            if name == "mlp":  # MatMul + Add + Relu -> one MatMul with bias and ReLU epilogue
                passes = json.loads(out)["graph"]["passes"]
                check(passes.get("fuse_matmul_epilogue") == 1, f"mlp on {config}: passes {passes}")
            y = np.load(os.path.join(outs, "y.npy")).astype(np.float32)
            want = ref(x)
            err_max = float(np.max(np.abs(y - want)))
            check(y.shape == want.shape and np.allclose(y, want, atol=2e-3, rtol=5e-3),
                  f"{name} on {config}: max abs error {err_max} (shape {y.shape} vs {want.shape})")
            print(f"{name} on {config}: max abs error {err_max:.2e}")

    # Errors: unsupported ops listed by node, a malformed file, an input of the wrong shape, an unbound dim.
    g = helper.make_graph([helper.make_node("Round", ["x"], ["e"], name="round1"),
                           helper.make_node("Hardmax", ["e"], ["y"], name="hm1")], "bad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    bad = os.path.join(d, "bad.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), bad)
    rc, _, err = run([bad])
    check(rc == 1 and "2 node(s) with ops npusim does not run: round1 (Round), hm1 (Hardmax)" in err, f"unsupported ops: {rc} {err}")
    junk = os.path.join(d, "junk.onnx")
    with open(junk, "wb") as f:
        f.write(b"not a model at all")
    rc, _, err = run([junk])
    check(rc == 1 and "not an ONNX model" in err, f"malformed model: {rc} {err}")
    wrong = os.path.join(d, "wrong_in")
    os.makedirs(wrong)
    np.save(os.path.join(wrong, "x.npy"), np.zeros((3, 64), dtype=np.float32))
    rc, _, err = run([os.path.join(d, "mlp.onnx"), "--functional", "--inputs", wrong, "--dim", "batch=5"])
    check(rc == 1 and "input 'x'" in err and "expected 5x64 fp32, got 3x64 fp32" in err, f"wrong input: {rc} {err}")
    np.save(os.path.join(wrong, "x.npy"), np.zeros((5, 64), dtype=np.float16))
    rc, _, err = run([os.path.join(d, "mlp.onnx"), "--functional", "--inputs", wrong, "--dim", "batch=5"])
    check(rc == 1 and "input 'x'" in err and "expected 5x64 fp32, got 5x64 fp16" in err, f"wrong input dtype: {rc} {err}")
    rc, _, err = run([os.path.join(d, "mlp.onnx")])
    check(rc == 1 and "--dim batch=SIZE" in err, f"unbound dim: {rc} {err}")
    # A shape mismatch inside the model: named by ONNX's strict shape inference, with the node.
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 6])],
                          [numpy_helper.from_array(np.zeros((7, 3), np.float32), "w")])
    mismatch = os.path.join(d, "mismatch.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), mismatch)
    rc, _, err = run([mismatch])
    check(rc == 1 and "node name: proj" in err and "Incompatible dimensions" in err, f"shape mismatch: {rc} {err}")
    rc, _, err = run([os.path.join(d, "mlp.onnx"), "--dim", "seq=4"])
    check(rc == 1 and "no input has a dim named 'seq'" in err, f"unknown dim: {rc} {err}")
    # ONNX's test-data layout (issue 20): input_K.pb by position when the files are not named after the inputs, and
    # output_K.pb by position beside NAME.npy / NAME.pb. y = a - b and z = a * b: swapping the inputs changes y.
    g = helper.make_graph([helper.make_node("Sub", ["a", "b"], ["y"], name="sub"),
                           helper.make_node("Mul", ["a", "b"], ["z"], name="mul")], "two",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 5]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 5])])
    two = os.path.join(d, "two.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), two)
    a, b = rng.uniform(-1, 1, (2, 3, 5)).astype(np.float32)
    numbered, two_out = os.path.join(d, "test_data_set_0"), os.path.join(d, "two_out")
    os.makedirs(numbered)
    for k, (arr, pb_name) in enumerate([(a, "a"), (b, "")]):  # ONNX's runner ignores the names: so do we
        with open(os.path.join(numbered, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, pb_name).SerializeToString())
    rc, _, err = run([two, "--functional", "--inputs", numbered, "--outputs", two_out])
    check(rc == 0, f"numbered inputs: exit {rc}: {err}")
    if rc == 0:
        for k, (name, want) in enumerate([("y", a - b), ("z", a * b)]):
            t = onnx.TensorProto()
            with open(os.path.join(two_out, f"output_{k}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            got = numpy_helper.to_array(t)
            check(t.name == name and np.array_equal(got, np.load(os.path.join(two_out, f"{name}.npy"))) and
                  np.allclose(got, want, atol=1e-6), f"output_{k}.pb: {t.name} {got} vs {want}")
    empty = os.path.join(d, "no_inputs")
    os.makedirs(empty)
    rc, _, err = run([two, "--functional", "--inputs", empty])
    check(rc == 1 and "no file for input 'a'" in err and "input_0.pb" in err and "'b'" in err and "input_1.pb" in err,
          f"missing inputs: {rc} {err}")
    mixed = os.path.join(d, "mixed_inputs")
    os.makedirs(mixed)
    np.save(os.path.join(mixed, "a.npy"), a)
    with open(os.path.join(mixed, "input_1.pb"), "wb") as f:
        f.write(numpy_helper.from_array(b, "b").SerializeToString())
    rc, _, err = run([two, "--functional", "--inputs", mixed])
    check(rc == 1 and "use one layout for all 2 inputs" in err, f"mixed layouts: {rc} {err}")
    g = helper.make_graph([helper.make_node("Relu", ["a"], ["output_1"], name="r"),
                           helper.make_node("Neg", ["a"], ["n"], name="n")], "clash",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 5])],
                          [helper.make_tensor_value_info("output_1", TensorProto.FLOAT, [3, 5]),
                           helper.make_tensor_value_info("n", TensorProto.FLOAT, [3, 5])])
    clash = os.path.join(d, "clash.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), clash)
    # ONNX's test data names outputs output_K too (Split's tests: output_1, output_2...): output_K.pb is the K-th
    # output by position, and an output named like another's positional file gets only its .npy by name.
    clash_out = os.path.join(d, "clash_out")
    clash_in = os.path.join(d, "clash_in")
    os.makedirs(clash_in)
    x = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    np.save(os.path.join(clash_in, "a.npy"), x)
    rc, _, err = run([clash, "--functional", "--inputs", clash_in, "--outputs", clash_out])
    pos = []
    for k in range(2):
        t = TensorProto()
        with open(os.path.join(clash_out, f"output_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        pos.append(numpy_helper.to_array(t))
    check(rc == 0 and np.array_equal(pos[0], np.maximum(x, 0)) and np.array_equal(pos[1], -x) and
          np.array_equal(np.load(os.path.join(clash_out, "output_1.npy")), np.maximum(x, 0)),
          f"output name clash: {rc} {err}")
    # More tasks than the completion ring's 256 slots (issue 23): a 300-input Concat and a 1,000-node chain run
    # unfused, functional, and give NumPy's values.
    parts = [rng.uniform(-1, 1, (2, 3)).astype(np.float32) for _ in range(300)]
    g = helper.make_graph([helper.make_node("Concat", [f"p{i}" for i in range(300)], ["y"], name="cat", axis=1)], "g",
                          [helper.make_tensor_value_info(f"p{i}", TensorProto.FLOAT, [2, 3]) for i in range(300)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 900])])
    many = os.path.join(d, "concat300.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), many)
    many_in, many_out = os.path.join(d, "concat300_in"), os.path.join(d, "concat300_out")
    os.makedirs(many_in)
    for i, a in enumerate(parts):
        np.save(os.path.join(many_in, f"p{i}.npy"), a)
    rc, out, err = run([many, "--functional", "--inputs", many_in, "--outputs", many_out, "--json"])
    check(rc == 0, f"300-input concat: {rc} {err}")
    if rc == 0:
        check(len(json.loads(out)["tasks"]) > 256, "300-input concat: not more than 256 tasks")
        check(np.array_equal(np.load(os.path.join(many_out, "y.npy")), np.concatenate(parts, axis=1)), "300-input concat: wrong values")
        print(f"concat of 300 inputs: {len(json.loads(out)['tasks'])} tasks")
    def chain_model(n, path):
        """Abs, Neg, Abs, ... over n nodes: -|x| for an even n."""
        nodes, prev = [], "x"
        for i in range(n):
            nodes.append(helper.make_node("Neg" if i % 2 else "Abs", [prev], [f"c{i}"], name=f"c{i}"))
            prev = f"c{i}"
        nodes[-1].output[0] = "y"
        g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])])
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    chain = chain_model(1000, os.path.join(d, "chain.onnx"))
    chain_in, chain_out = os.path.join(d, "chain_in"), os.path.join(d, "chain_out")
    os.makedirs(chain_in)
    x = rng.uniform(-1, 1, (64,)).astype(np.float32)
    np.save(os.path.join(chain_in, "x.npy"), x)
    rc, out, err = run([chain, "--no-fusion", "--functional", "--inputs", chain_in, "--outputs", chain_out, "--json"])
    check(rc == 0, f"1,000-node chain: {rc} {err}")
    if rc == 0:
        kernels = [t for t in json.loads(out)["tasks"] if t["type"] == "kernel"]
        check(len(kernels) == 1000, f"1,000-node chain: {len(kernels)} kernels")
        check(np.array_equal(np.load(os.path.join(chain_out, "y.npy")), -np.abs(x)), "1,000-node chain: wrong values")
        print(f"chain of 1,000 nodes unfused: {len(kernels)} kernels")
    # Issue 23's bar: a run of 10,000 tasks completes (timing-only).
    rc, out, err = run([chain_model(10000, os.path.join(d, "chain10k.onnx")), "--no-fusion", "--json"])
    check(rc == 0 and sum(t["type"] == "kernel" for t in json.loads(out)["tasks"]) == 10000, f"10,000-node chain: {rc} {err}")
    # Dims whose product passes 2^64 (issue 23: divided by zero, exit 136). (A 0 dim is an empty tensor: below.)
    for dims, bind, want in ((["a", "b"], ["--dim", "a=4294967296", "--dim", "b=4294967296"], "has more than 2^53 elements"),):
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
        path = os.path.join(d, "dims.onnx")
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        rc, _, err = run([path, *bind])
        check(rc == 1 and want in err, f"dims {dims} {bind}: {rc} {err}")
    # A node missing an input (ONNX 1.12's inference lets it through; import checks every node's arity).
    g = helper.make_graph([helper.make_node("Add", ["x"], ["y"], name="lonely_add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    lonely = os.path.join(d, "lonely.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), lonely)
    rc, _, err = run([lonely])
    check(rc == 1 and "node 'lonely_add' (Add): 1 input(s), but Add-14 takes 2" in err, f"missing input: {rc} {err}")
    # TensorProto .pb inputs and outputs, as the ONNX test data keeps them: the same values as through .npy.
    # The output directory is made when missing (pb_out/new), and a file in its place is an error.
    pb_in, pb_out = os.path.join(d, "pb_in"), os.path.join(d, "pb_out", "new")
    os.makedirs(pb_in)
    x = np.load(os.path.join(d, "norm_block_in", "x.npy"))
    with open(os.path.join(pb_in, "x.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    rc, _, err = run([os.path.join(d, "norm_block.onnx"), "--functional", "--inputs", pb_in, "--outputs", pb_out])
    check(rc == 0, f".pb input: {rc} {err}")
    if rc == 0:
        t = onnx.TensorProto()
        with open(os.path.join(pb_out, "y.pb"), "rb") as f:
            t.ParseFromString(f.read())
        check(t.name == "y" and np.array_equal(numpy_helper.to_array(t), np.load(os.path.join(pb_out, "y.npy"))),
              ".pb output differs from the .npy one")
        check(np.array_equal(np.load(os.path.join(pb_out, "y.npy")), np.load(os.path.join(d, "norm_block_out", "y.npy"))),
              ".pb input gave other values than .npy")

    # Clip with min > max gives max, as np.clip (bounds as constant inputs).
    g = helper.make_graph([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], "clip",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
                          [numpy_helper.from_array(np.array(2.0, dtype=np.float32), "lo"),
                           numpy_helper.from_array(np.array(1.0, dtype=np.float32), "hi")])
    clip = os.path.join(d, "clip.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), clip)
    rc, _, err = run([clip, "--functional", "--outputs", os.path.join(d, "clip_out")])
    check(rc == 0 and np.all(np.load(os.path.join(d, "clip_out", "y.npy")) == 1.0), f"Clip with min > max: {rc} {err}")
    # --progress: lines on stderr (not a terminal here) ending with every task done; without it, nothing.
    rc, _, err = run([os.path.join(d, "norm_block.onnx"), "--progress"])
    last = err.strip().splitlines()[-1] if err.strip() else ""
    done = re.match(r"npusim run: (\d+)/(\d+) tasks done, [0-9.]+ ms simulated", last)
    check(rc == 0 and done and done.group(1) == done.group(2), f"--progress: {rc} {err!r}")
    rc, _, err = run([os.path.join(d, "norm_block.onnx")])
    check(rc == 0 and "tasks done" not in err, f"progress without --progress off a terminal: {err!r}")
    rc, _, err = run([os.path.join(d, "norm_block.onnx"), "--functional", "--outputs", os.path.join(pb_in, "x.pb")])
    check(rc == 1 and "x.pb: not a directory" in err, f"--outputs on a file: {rc} {err}")

    # Inputs whose values decide shapes (a Slice's starts and ends, a Trilu's k) are bound from --inputs when
    # compiling; the data input stays an input. Checked against NumPy; timing-only, the error names the input.
    g = helper.make_graph([helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"], name="cut"),
                           helper.make_node("Trilu", ["s", "k"], ["t"], name="tri", upper=0),
                           helper.make_node("Pow", ["t", "e"], ["y"], name="pw")], "bind",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 9]),
                           helper.make_tensor_value_info("starts", TensorProto.INT64, [1]),
                           helper.make_tensor_value_info("ends", TensorProto.INT64, [1]),
                           helper.make_tensor_value_info("k", TensorProto.INT64, []),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 6])],
                          [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    bind = os.path.join(d, "bind.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), bind)
    bind_in, bind_out = os.path.join(d, "bind_in"), os.path.join(d, "bind_out")
    os.makedirs(bind_in)
    x = rng.uniform(-2, 2, (6, 9)).astype(np.float32)
    for name, value in [("x", x), ("starts", np.array([2], np.int64)), ("ends", np.array([-1], np.int64)),
                        ("k", np.array(-1, np.int64)), ("e", np.array([3.0], np.float32))]:
        np.save(os.path.join(bind_in, f"{name}.npy"), value)
    rc, out, err = run([bind, "--functional", "--inputs", bind_in, "--outputs", bind_out, "--json"])
    want = np.tril(x[:, 2:-1], -1) ** 3
    got = np.load(os.path.join(bind_out, "y.npy")) if rc == 0 else None
    check(rc == 0 and got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5) and
          json.loads(out)["model"]["bound_inputs"] == ["starts", "ends", "k"], f"bound inputs: {rc} {err} {got}")
    rc, _, err = run([bind])
    check(rc == 1 and "starts must be a constant (it comes from the input 'starts'" in err and
          "--functional --inputs DIR" in err, f"unbound shape input: {rc} {err}")

    # CumSum as exporters write it: positions from an int64 attention mask (the last axis, [2, 16]), and a float
    # tensor along its last and middle axes, reversed and exclusive; checked against NumPy.
    mask = (rng.uniform(0, 1, (2, 16)) > 0.3).astype(np.int64)
    xf = rng.uniform(-1, 1, (3, 40, 24)).astype(np.float32)
    for name, x, axis, attrs, want in [
            ("positions", mask, 1, {}, np.cumsum(mask, 1)),
            ("last_axis", xf, 2, {"reverse": 1}, np.flip(np.cumsum(np.flip(xf, 2), 2), 2)),
            ("middle_axis", xf, 1, {"exclusive": 1}, np.cumsum(xf, 1) - xf)]:
        ty = TensorProto.INT64 if x.dtype == np.int64 else TensorProto.FLOAT
        g = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"], name="cs", **attrs)], name,
                              [helper.make_tensor_value_info("x", ty, list(x.shape))],
                              [helper.make_tensor_value_info("y", ty, list(x.shape))],
                              [numpy_helper.from_array(np.array(axis, np.int64), "axis")])
        path = os.path.join(d, f"cumsum_{name}.onnx")
        save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        cin, cout = os.path.join(d, f"cumsum_{name}_in"), os.path.join(d, f"cumsum_{name}_out")
        os.makedirs(cin)
        np.save(os.path.join(cin, "x.npy"), x)
        rc, out, err = run([path, "--functional", "--inputs", cin, "--outputs", cout, "--json"])
        got = np.load(os.path.join(cout, "y.npy")) if rc == 0 else None
        kernels = [t["name"] for t in json.loads(out)["tasks"] if t["type"] == "kernel"] if rc == 0 else []
        check(rc == 0 and got.dtype == want.dtype and np.allclose(got, want, atol=1e-5) and "Cumsum" in kernels,
              f"CumSum {name}: {rc} {err} {kernels}")

    # Empty tensors: a node whose outputs are all empty runs no kernel, and its output is written with its shape; a
    # node that would make something of an empty input is refused naming it.
    g = helper.make_graph([helper.make_node("Relu", ["e"], ["r"], name="relu_empty"),
                           helper.make_node("Concat", ["e", "x"], ["c"], name="cat", axis=0)], "empty",
                          [helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 3]),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, [0, 3]),
                           helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 3])])
    empty_model = os.path.join(d, "empty.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), empty_model)
    rc, _, err = run([empty_model, "--functional"])
    check(rc == 1 and "node 'cat'" in err and "input 'e' is empty (a dim of 0)" in err, f"empty input: {rc} {err}")
    g = helper.make_graph([helper.make_node("Relu", ["e"], ["r"], name="relu_empty")], "empty_only",
                          [helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 3])],
                          [helper.make_tensor_value_info("r", TensorProto.FLOAT, [0, 3])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), empty_model)
    empty_out = os.path.join(d, "empty_out")
    rc, out, err = run([empty_model, "--functional", "--outputs", empty_out, "--json"])
    check(rc == 0 and json.loads(out)["graph"]["kernels"] == 0 and
          np.load(os.path.join(empty_out, "r.npy")).shape == (0, 3), f"empty output: {rc} {err}")

    # An empty constant is a parameter, not data (torch's Resize export gives an empty roi).
    g = helper.make_graph([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="up", mode="nearest")],
                          "resize_roi", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 8])],
                          [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
                           numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    roi_model = os.path.join(d, "resize_roi.onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), roi_model)
    rc, _, err = run([roi_model, "--functional"])
    check(rc == 0, f"Resize with an empty roi: {rc} {err}")
    # GatherElements with indices from an input: an index past the axis is refused by the gather kernel, not read
    # from the next row.
    g = helper.make_graph([helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=1)], "ge",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    ge_model, ge_in = os.path.join(d, "ge.onnx"), os.path.join(d, "ge_in")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), ge_model)
    os.makedirs(ge_in)
    xg = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    np.save(os.path.join(ge_in, "x.npy"), xg)
    # (Under the sanitizers a device error trips ASan's misreading of SystemC's stacks: tests/CMakeLists.txt.)
    cases = [(np.array([[0, -1], [2, 1]]), True)]
    if not os.environ.get("NPUSIM_SANITIZED"):
        cases.append((np.array([[0, 3], [1, 1]]), False))
    for idx, ok in cases:
        np.save(os.path.join(ge_in, "i.npy"), idx)
        ge_out = os.path.join(d, f"ge_out_{ok}")
        rc, _, err = run([ge_model, "--functional", "--inputs", ge_in, "--outputs", ge_out])
        if ok:
            check(rc == 0 and np.array_equal(np.load(os.path.join(ge_out, "y.npy")),
                                             np.take_along_axis(xg, idx % 3, 1)), f"GatherElements: {rc} {err}")
        else:
            check(rc != 0 and "gather" in err and "index" in err, f"GatherElements out of range: {rc} {err}")

print("failures:", len(failures))
sys.exit(1 if failures else 0)
