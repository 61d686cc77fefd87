#!/usr/bin/python3
"""Writes tests/fixtures/onnx/control_flow.onnx: a Loop (opset 13) of n iterations over acc (starting at the graph
input x, float32 [3]) whose body holds an If: acc + x (a value of the outer graph) while the iteration number is
below 2, else acc * 2 (a Constant of the else branch); the scan output stacks each iteration's acc. With
x = [1, 2, 3] and n = 4: y = [12, 24, 36], ys = [[2, 4, 6], [3, 6, 9], [6, 12, 18], [12, 24, 36]] (the values
tests/check_onnx.c checks; onnx.reference says the same when this script runs with it).
Run from the repository root with Debian's python3-onnx and NumPy."""
import numpy as np
import onnx
from onnx import TensorProto, helper

F, I, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
then_g = helper.make_graph([helper.make_node("Add", ["acc_in", "x"], ["t"])], "then", [],
                           [helper.make_tensor_value_info("t", F, [3])])
else_g = helper.make_graph(
    [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k_v", F, [], [2.0])),
     helper.make_node("Mul", ["acc_in", "k"], ["e"])], "else", [],
    [helper.make_tensor_value_info("e", F, [3])])
body = helper.make_graph(
    [helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two_v", I, [], [2])),
     helper.make_node("Less", ["i", "two"], ["early"]),
     helper.make_node("If", ["early"], ["acc_out"], then_branch=then_g, else_branch=else_g),
     helper.make_node("Identity", ["c"], ["c_out"]),
     helper.make_node("Identity", ["acc_out"], ["scan"])], "body",
    [helper.make_tensor_value_info("i", I, []), helper.make_tensor_value_info("c", B, []),
     helper.make_tensor_value_info("acc_in", F, [3])],
    [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("acc_out", F, [3]),
     helper.make_tensor_value_info("scan", F, [3])])
graph = helper.make_graph(
    [helper.make_node("Loop", ["n", "", "x"], ["y", "ys"], body=body)], "control_flow",
    [helper.make_tensor_value_info("x", F, [3]), helper.make_tensor_value_info("n", I, [])],
    [helper.make_tensor_value_info("y", F, [3]), helper.make_tensor_value_info("ys", F, [None, 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_control_flow.py")
onnx.checker.check_model(model)
onnx.save(model, "tests/fixtures/onnx/control_flow.onnx")
try:
    from onnx.reference import ReferenceEvaluator
    y, ys = ReferenceEvaluator(model).run(None, {"x": np.array([1, 2, 3], np.float32), "n": np.array(4, np.int64)})
    print("y", y, "ys", ys.tolist())
except ImportError:
    pass
