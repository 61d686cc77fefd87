#!/usr/bin/python3
"""Writes tests/fixtures/onnx/lp_ops.onnx: LpNormalization, GlobalLpPool and LpPool (opset 17, checked by
onnx.checker) over x [2, 3, 5, 6] and LpPool 1-D over x1 [2, 3, 7] (LpPool's
dilations and ceil_mode come with opset 18, which neither onnx 1.12 nor pardo reads).
Inputs lp_x.npy, lp_x1.npy; each output NAME's reference lp_NAME.npy, from the naive NumPy loops below
(float64, then float32); and bad/lp_norm_p3.onnx, a p pardo refuses. Run from the repository root with Debian's python3-onnx and NumPy."""
import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper

OUT = "tests/fixtures/onnx/"


def lp_pool(x, kernel, strides, pads, p, dilations=None, ceil_mode=False):
    """Per window (sum of |x|^p)^(1/p); pads (begins then ends) add zeros; ceil_mode keeps a last window
    that starts inside the input or its begin padding."""
    nk = len(kernel)
    dil = dilations or [1] * nk
    x = np.abs(x.astype(np.float64))
    ins = x.shape[2:]
    outs = []
    for i in range(nk):
        span = (kernel[i] - 1) * dil[i] + 1
        room = ins[i] + pads[i] + pads[nk + i] - span
        out = (-(-room // strides[i]) if ceil_mode else room // strides[i]) + 1
        if ceil_mode and (out - 1) * strides[i] >= ins[i] + pads[i]:
            out -= 1
        outs.append(out)
    y = np.zeros(x.shape[:2] + tuple(outs))
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*[range(v) for v in outs]):
            acc = 0.0
            for k in itertools.product(*[range(v) for v in kernel]):
                pos = [o[i] * strides[i] - pads[i] + k[i] * dil[i] for i in range(nk)]
                if all(0 <= pos[i] < ins[i] for i in range(nk)):
                    acc += x[(n, c) + tuple(pos)] ** p
            y[(n, c) + o] = acc ** (1.0 / p)
    return y.astype(np.float32)


def lp_norm(x, axis, p):
    x = x.astype(np.float64)
    norm = (np.abs(x) ** p).sum(axis=axis, keepdims=True) ** (1.0 / p)
    return (x / norm).astype(np.float32)


def global_lp(x, p):
    x = np.abs(x.astype(np.float64))
    axes = tuple(range(2, x.ndim))
    return ((x ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)).astype(np.float32)


def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, OUT + name)


rs = np.random.RandomState(11)
x = rs.randn(2, 3, 5, 6).astype(np.float32)
x1 = rs.randn(2, 3, 7).astype(np.float32)
np.save(OUT + "lp_x.npy", x)
np.save(OUT + "lp_x1.npy", x1)

# name: (node, reference)
cases = {
    "norm2": (helper.make_node("LpNormalization", ["x"], ["norm2"], axis=1, p=2), lp_norm(x, 1, 2)),
    "norm1": (helper.make_node("LpNormalization", ["x"], ["norm1"], p=1), lp_norm(x, -1, 1)),
    "glob2": (helper.make_node("GlobalLpPool", ["x"], ["glob2"]), global_lp(x, 2)),
    "glob3": (helper.make_node("GlobalLpPool", ["x"], ["glob3"], p=3), global_lp(x, 3)),
    "pool2": (helper.make_node("LpPool", ["x"], ["pool2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
              lp_pool(x, [3, 3], [2, 2], [1, 1, 1, 1], 2)),
    "pool3": (helper.make_node("LpPool", ["x"], ["pool3"], kernel_shape=[2, 3], p=3),
              lp_pool(x, [2, 3], [1, 1], [0, 0, 0, 0], 3)),
    # SAME_UPPER over 7 with stride 2 and kernel 3: 4 outputs, total pad 2, begin 1
    "pool1d": (helper.make_node("LpPool", ["x1"], ["pool1d"], kernel_shape=[3], strides=[2], p=1,
                                auto_pad="SAME_UPPER"), lp_pool(x1, [3], [2], [1, 1], 1)),
}
outputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v[1].shape)) for k, v in cases.items()]
graph = helper.make_graph(
    [v[0] for v in cases.values()], "lp_ops",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
     helper.make_tensor_value_info("x1", TensorProto.FLOAT, list(x1.shape))], outputs)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_lp_ops.py"),
     "lp_ops.onnx")

for k, v in cases.items():
    np.save(OUT + "lp_%s.npy" % k, v[1])

# refused on import: LpNormalization takes p 1 or 2 only
bad = helper.make_node("LpNormalization", ["x"], ["y"], p=3)
save(helper.make_model(helper.make_graph([bad], "lp_bad_p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
                       opset_imports=[helper.make_opsetid("", 17)], producer_name="make_lp_ops.py"),
     "bad/lp_norm_p3.onnx")
