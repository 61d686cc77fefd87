#!/usr/bin/python3
"""Writes the 1-D and 3-D convolution fixtures of tests/fixtures/onnx/ (pardo's conv_nd):

conv1d.onnx, exported by PyTorch (opset 13, eval mode, dynamic batch axis): Conv1d(4 -> 6, kernel 3, stride 2,
padding 1, dilation 2, groups 2) -> ReLU -> Conv1d(6 -> 3, kernel 5, padding 2), with conv1d_in.npy and PyTorch's
conv1d_out.npy at batch 3;

conv_nd.onnx, written node by node: y1 = Conv(x1) of 1 spatial dim with auto_pad SAME_UPPER and stride 2, y3 =
Conv(x3) of 3 spatial dims with pads, dilations, group 2 and a bias, with inputs conv_nd_x1.npy, conv_nd_x3.npy and
the references conv_nd_y1.npy, conv_nd_y3.npy from torch.nn.functional.conv1d / conv3d (SAME_UPPER as explicit pads:
the larger half at the end).

Run from the repository root with Debian's python3-torch and python3-onnx."""
import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

OUT = "tests/fixtures/onnx/"
torch.manual_seed(11)

model = torch.nn.Sequential(torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), torch.nn.ReLU(),
                            torch.nn.Conv1d(6, 3, 5, padding=2)).eval()
x = torch.randn(3, 4, 29)
with torch.no_grad():
    y = model(x)
torch.onnx.export(model, x, OUT + "conv1d.onnx", opset_version=13, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
onnx.checker.check_model(onnx.load(OUT + "conv1d.onnx"))
np.save(OUT + "conv1d_in.npy", x.numpy())
np.save(OUT + "conv1d_out.npy", y.numpy())

rng = np.random.RandomState(5)
x1 = rng.randn(2, 3, 17).astype(np.float32)
w1 = rng.randn(4, 3, 4).astype(np.float32)
x3 = rng.randn(2, 4, 5, 6, 7).astype(np.float32)
w3 = rng.randn(6, 2, 2, 3, 3).astype(np.float32)
b3 = rng.randn(6).astype(np.float32)
# SAME_UPPER, stride 2, kernel 4 over 17: out 9, total pad (9 - 1) * 2 + 4 - 17 = 3, begin 1, end 2
y1 = torch.nn.functional.conv1d(torch.nn.functional.pad(torch.from_numpy(x1), (1, 2)), torch.from_numpy(w1),
                                stride=2).numpy()
# pads (begins d, h, w; ends d, h, w) = (1, 0, 2, 0, 1, 1): pad the ends by hand, as torch pads both sides alike
x3p = torch.nn.functional.pad(torch.from_numpy(x3), (2, 1, 0, 1, 1, 0))
y3 = torch.nn.functional.conv3d(x3p, torch.from_numpy(w3), torch.from_numpy(b3), stride=(1, 2, 1), dilation=(2, 1, 2),
                                groups=2).numpy()
nodes = [
    helper.make_node("Conv", ["x1", "w1"], ["y1"], auto_pad="SAME_UPPER", strides=[2]),
    helper.make_node("Conv", ["x3", "w3", "b3"], ["y3"], pads=[1, 0, 2, 0, 1, 1], strides=[1, 2, 1],
                     dilations=[2, 1, 2], group=2, kernel_shape=[2, 3, 3]),
]
graph = helper.make_graph(
    nodes, "conv_nd",
    [helper.make_tensor_value_info("x1", TensorProto.FLOAT, list(x1.shape)),
     helper.make_tensor_value_info("x3", TensorProto.FLOAT, list(x3.shape))],
    [helper.make_tensor_value_info("y1", TensorProto.FLOAT, list(y1.shape)),
     helper.make_tensor_value_info("y3", TensorProto.FLOAT, list(y3.shape))],
    initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w3, "w3"),
                 numpy_helper.from_array(b3, "b3")])
m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="export_conv_nd.py")
onnx.checker.check_model(m)
onnx.save(m, OUT + "conv_nd.onnx")
for name, a in (("x1", x1), ("x3", x3), ("y1", y1), ("y3", y3)):
    np.save(OUT + "conv_nd_" + name + ".npy", a)
print("conv1d:", tuple(y.shape), "conv_nd: y1", y1.shape, "y3", y3.shape)
