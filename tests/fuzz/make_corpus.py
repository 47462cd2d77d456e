#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/TARGET/): small valid inputs of each format, written the
way users' tools write them, for libFuzzer to mutate. Checked in; rerun after changing this script.
Usage: make_corpus.py [OUT_DIR]"""
import io
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def put(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    with open(os.path.join(OUT, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# config: the built-in tiny config, a user's file extending a built-in, --set overrides, YAML's other spellings
put("config", "tiny.yaml", open(os.path.join(ROOT, "configs", "tiny.yaml")).read())
put("config", "extends.yaml", "extends: 910b\nname: my_chip\nl2:\n  capacity: 96MiB\nbuffers: {ub: {size: 256KiB}}\n")
put("config", "sets.yaml", "extends: tiny\nname: swept\n#--set\nclock.core=1.5GHz\nhbm.pin_rate=6.4Gbps\n"
                           "hbm.address_mapping=ro_ba_ch_co_bg\n")
put("config", "quoted.yaml", "extends: tiny\nname: \"quoted \\\"name\\\"\"\ndescription: 'it''s mine'\n"
                             "sim: {counter_interval: 2us, memory_model: simple}\n")
put("config", "anchors.yaml", "extends: tiny\nbase: &b {size: 64KiB}\nbuffers:\n  l0a: *b\n")

# memtrace: DRAMsim3's format, with comments and blank lines
put("memtrace", "seq.trace", "".join(f"0x{a * 64:x} READ {a * 4}\n" for a in range(16)))
put("memtrace", "mixed.trace", "# address op cycle\n0x0 READ 0\n\n0x1000 WRITE 10\n0x40 read 10\n0x2000 W 99\n")
put("memtrace", "crlf.trace", "0x0 READ 0\r\n0x40 WRITE 5\r\n")


def npy(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


# npy: each element type `npusim run --inputs` takes, and a version 2.0 header
rng = np.random.default_rng(0)
put("npy", "f32.npy", npy(rng.standard_normal((2, 3)).astype(np.float32)))
put("npy", "f16.npy", npy(rng.standard_normal((4,)).astype(np.float16)))
put("npy", "i64.npy", npy(np.arange(6, dtype=np.int64).reshape(2, 3)))
put("npy", "i8.npy", npy(np.array([[1, -2], [3, -4]], np.int8)))
put("npy", "bool.npy", npy(np.array([True, False, True])))
put("npy", "scalar.npy", npy(np.float32(1.5)))
put("npy", "u2.npy", npy(np.array([0x3f80, 0x4000], np.uint16)))
buf = io.BytesIO()
np.lib.format.write_array(buf, np.ones((2, 2), np.float32), version=(2, 0))
put("npy", "v2.npy", buf.getvalue())


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return b"\x00" + m.SerializeToString()


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


# onnx: first byte even = a model, odd = a TensorProto
put("onnx", "relu.bin", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 8])], [vi("y", [2, 8])]))
w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
put("onnx", "mlp.bin", model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)],
                             [vi("x", ["batch", 8])], [vi("y", ["batch", 4])], [w]))
shape = numpy_helper.from_array(np.array([0, -1], np.int64), "s")
put("onnx", "shape_ops.bin", model([helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Reshape", ["x", "s"], ["r"]),
                                    helper.make_node("Gather", ["sh", "i"], ["g"], axis=0),
                                    helper.make_node("Cast", ["g"], ["y"], to=TensorProto.FLOAT)],
                                   [vi("x", [2, 3, 4])], [vi("y", None), vi("r", None)],
                                   [shape, numpy_helper.from_array(np.array(1, np.int64), "i")]))
put("onnx", "opset13.bin", model([helper.make_node("ReduceSum", ["x", "a"], ["y"], keepdims=1)], [vi("x", [4, 4])],
                                 [vi("y", None)], [numpy_helper.from_array(np.array([1], np.int64), "a")], opset=13))
put("onnx", "tensor_f32.bin", b"\x01" + numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x").SerializeToString())
put("onnx", "tensor_i64.bin", b"\x01" + numpy_helper.from_array(np.array([3, 1, 2], np.int64), "ids").SerializeToString())
t = helper.make_tensor("h", TensorProto.FLOAT16, [2], [1.0, 2.0])
put("onnx", "tensor_f16.bin", b"\x01" + t.SerializeToString())

# kernel_args: --arg specs, ----, the tiling schema, ----, the values
schema = open(os.path.join(ROOT, "examples", "kernels", "add_double_buffer", "tiling.json")).read()
put("kernel_args", "add.txt", "x=random:fp16:8x2048\ny=zeros:fp32:16\nz=out:bf16:8x2048\nt=tiling\ns=0.5\n----\n" + schema +
    "----\ntotalLength=16384,tileNum=2\n")
put("kernel_args", "arrays.txt", "a=random:int8:4x4x4\nn=7\n----\n"
    '{"fields": [{"name": "n", "type": "uint32_t"}, {"name": "scale", "type": "float"}, '
    '{"name": "dims", "type": "int64_t", "count": 4}, {"name": "on", "type": "bool"}]}\n'
    '----\n{"n": 3, "scale": 0.25, "dims": [1, 2, 3, 4], "on": true}\n')
print(f"corpora written under {OUT}")
