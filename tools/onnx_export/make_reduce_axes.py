#!/usr/bin/python3
"""Writes tests/fixtures/onnx/reduce_axes.onnx: ReduceSum (opset 13) whose axes are a graph input, so pardo
reads them at run time, with reduce_axes_x.npy, reduce_axes_axes.npy and NumPy's reduce_axes_y.npy
(keepdims 1). Run from the repository root with Debian's python3-onnx and NumPy."""
import numpy as np
import onnx
from onnx import TensorProto, helper

node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
graph = helper.make_graph(
    [node], "reduce_axes",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4]),
     helper.make_tensor_value_info("axes", TensorProto.INT64, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 1])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_reduce_axes.py")
onnx.checker.check_model(model)
out = "tests/fixtures/onnx/"
onnx.save(model, out + "reduce_axes.onnx")
x = np.random.RandomState(7).randn(2, 3, 4).astype(np.float32)
axes = np.array([2, -3], dtype=np.int64)
np.save(out + "reduce_axes_x.npy", x)
np.save(out + "reduce_axes_axes.npy", axes)
np.save(out + "reduce_axes_y.npy", x.sum(axis=(2, 0), keepdims=True))
