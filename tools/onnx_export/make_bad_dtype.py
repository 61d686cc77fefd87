"""Writes tests/fixtures/onnx/bad/avgpool_uint8.onnx: an AveragePool over a uint8 input, a dtype
ONNX's AveragePool does not define either and pardo's avg_pool2d does not take, so `pardo check`
refuses it naming the node, the op and the dtype (tests/cli_onnx_test.sh). Run from the repository
root with Debian's python3-onnx."""
import onnx
from onnx import TensorProto, helper

node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])
graph = helper.make_graph([node], "avgpool_uint8",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 1, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 1, 3, 3])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_bad_dtype.py")
onnx.save(model, "tests/fixtures/onnx/bad/avgpool_uint8.onnx")
