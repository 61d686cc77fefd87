#!/usr/bin/python3
"""Export small PyTorch models to ONNX (opset 13) as fixtures for `pardo run MODEL.onnx`.

Run from the repository root with the interpreter that has torch (Debian's python3-torch 1.13):

    /usr/bin/python3 tools/onnx_export/export_models.py [OUT_DIR]

OUT_DIR defaults to tests/fixtures/onnx. For each model NAME it writes NAME.onnx, NAME_in.npy /
NAME_out.npy (batch 4), NAME_in_b2.npy / NAME_out_b2.npy (batch 2), NAME.nodes.txt (every node: op,
inputs, outputs, attributes), and ops.txt (op type counts and opset per model). The outputs are
PyTorch's own (onnxruntime is not used); each model is checked with onnx.checker.
"""
import io
import os
import sys
from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper
import torch
import torch.nn as nn

OPSET = 13
SEQ = 7


def seed(s):
    torch.manual_seed(s)
    np.random.seed(s)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh(),
                                 nn.Linear(16, 5))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.net(x)


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.enc = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                              dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 3)

    def forward(self, tokens):
        h = self.enc(self.emb(tokens))
        return self.head(h.mean(dim=1))


def make_mlp():
    seed(1)
    m = MLP().eval()
    g = torch.Generator().manual_seed(101)
    x4 = torch.randn(4, 20, generator=g)
    x2 = torch.randn(2, 20, generator=g)
    return m, "x", x4, x2


def make_cnn():
    seed(2)
    m = CNN()
    # Give the BatchNorms non-trivial running statistics (and affine params) so they matter.
    g = torch.Generator().manual_seed(202)
    with torch.no_grad():
        for bn in (m.net[1], m.net[5]):
            bn.weight.copy_(1.0 + 0.3 * torch.randn(bn.num_features, generator=g))
            bn.bias.copy_(0.2 * torch.randn(bn.num_features, generator=g))
        m.train()
        for _ in range(20):
            m(1.5 * torch.randn(16, 1, 12, 12, generator=g) + 0.7)
    m.eval()
    x4 = torch.randn(4, 1, 12, 12, generator=g)
    x2 = torch.randn(2, 1, 12, 12, generator=g)
    return m, "x", x4, x2


def make_transformer():
    seed(3)
    m = Transformer().eval()
    g = torch.Generator().manual_seed(303)
    # PyTorch initialises the LayerNorm weights to 1 and the attention biases and LayerNorm biases
    # to 0, which the exporter then shares between params of equal value (Identity nodes); move
    # every param off its default so that each one matters and none are shared.
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    t4 = torch.randint(0, 50, (4, SEQ), generator=g, dtype=torch.int64)
    t2 = torch.randint(0, 50, (2, SEQ), generator=g, dtype=torch.int64)
    return m, "tokens", t4, t2


def export(model, in_name, example, fold):
    """fold True/False: constant folding on/off, in TrainingMode.EVAL (whose peephole pass folds
    each BatchNorm into the Conv before it). fold None: no constant folding and TrainingMode.PRESERVE
    on the eval-mode model, which skips that pass, so BatchNormalization nodes stay in the graph."""
    mode = torch.onnx.TrainingMode.EVAL
    if fold is None:
        fold, mode = False, torch.onnx.TrainingMode.PRESERVE
    buf = io.BytesIO()
    torch.onnx.export(
        model, (example,), buf, opset_version=OPSET, input_names=[in_name], output_names=["y"],
        dynamic_axes={in_name: {0: "batch"}, "y": {0: "batch"}},
        do_constant_folding=fold, export_params=True, training=mode)
    return buf.getvalue()


def _conv(x, w, b, pads, strides):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (x.shape[2] - kh) // strides[0] + 1
    ow = (x.shape[3] - kw) // strides[1] + 1
    y = np.zeros((n, k, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]]
            y += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j])
    return y + (0 if b is None else b.reshape(1, k, 1, 1))


def run_numpy(model, feed):
    """A small NumPy interpreter for exactly the ops these exports use (float64 maths), so the
    .onnx files are checked against PyTorch's outputs without onnxruntime."""
    env = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env.update(feed)
    for n in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        x = [env[i] if i else None for i in n.input]
        op = n.op_type
        if op == "Constant":
            r = numpy_helper.to_array(a["value"])
        elif op == "Identity":
            r = x[0]
        elif op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            r = a.get("alpha", 1.0) * (A @ B) + a.get("beta", 1.0) * (x[2] if len(x) > 2 else 0)
        elif op == "MatMul":
            r = np.matmul(x[0], x[1])
        elif op in ("Add", "Sub", "Mul", "Pow"):
            r = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power}[op](*x)
        elif op == "Div":
            r = (np.trunc(x[0] / x[1]).astype(x[0].dtype) if x[0].dtype.kind == "i"
                 else x[0] / x[1])
        elif op == "Relu":
            r = np.maximum(x[0], 0)
        elif op == "Tanh":
            r = np.tanh(x[0])
        elif op == "Sqrt":
            r = np.sqrt(x[0])
        elif op == "Conv":
            assert a["group"] == 1 and a["dilations"] == [1, 1]
            r = _conv(x[0], x[1], x[2] if len(x) > 2 else None, a["pads"], a["strides"])
        elif op == "BatchNormalization":
            sh = (1, -1) + (1,) * (x[0].ndim - 2)
            sc, bi, mu, var = (v.reshape(sh) for v in x[1:5])
            r = (x[0] - mu) / np.sqrt(var + a["epsilon"]) * sc + bi
        elif op == "MaxPool":
            assert a["kernel_shape"] == a["strides"] == [2, 2] and not any(a["pads"])
            nb, c, h, w = x[0].shape
            r = x[0][:, :, :h // 2 * 2, :w // 2 * 2].reshape(nb, c, h // 2, 2, w // 2, 2).max((3, 5))
        elif op == "GlobalAveragePool":
            r = x[0].mean(axis=(2, 3), keepdims=True)
        elif op == "Flatten":
            r = x[0].reshape(int(np.prod(x[0].shape[:a["axis"]])), -1)
        elif op == "Gather":
            r = np.take(x[0], x[1], axis=a.get("axis", 0))
        elif op == "Shape":
            r = np.array(x[0].shape, np.int64)
        elif op == "Cast":
            r = x[0].astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[a["to"]])
        elif op == "Unsqueeze":
            r = np.expand_dims(x[0], tuple(int(v) for v in x[1]))
        elif op == "Concat":
            r = np.concatenate(x, axis=a["axis"])
        elif op == "Reshape":
            shape = [x[0].shape[i] if d == 0 else d for i, d in enumerate(x[1].tolist())]
            r = x[0].reshape(shape)
        elif op == "Transpose":
            r = np.transpose(x[0], a["perm"])
        elif op == "Slice":
            sl = [slice(None)] * x[0].ndim
            axes = x[3] if len(x) > 3 else range(len(x[1]))
            steps = x[4] if len(x) > 4 else [1] * len(x[1])
            for st, en, ax, sp in zip(x[1], x[2], axes, steps):
                sl[int(ax)] = slice(int(st), int(en), int(sp))
            r = x[0][tuple(sl)]
        elif op == "Softmax":
            e = np.exp(x[0] - x[0].max(axis=a.get("axis", -1), keepdims=True))
            r = e / e.sum(axis=a.get("axis", -1), keepdims=True)
        elif op == "ReduceMean":
            r = x[0].mean(axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))
        else:
            raise NotImplementedError(op)
        if isinstance(r, np.ndarray) and r.dtype == np.float32:
            r = r.astype(np.float64)
        env[n.output[0]] = np.asarray(r)
    return [env[o.name] for o in model.graph.output]


def attr_str(a):
    v = helper.get_attribute_value(a)
    if isinstance(v, onnx.TensorProto):
        arr = numpy_helper.to_array(v)
        if arr.size <= 16:
            return "%s=tensor(%s%s %s)" % (a.name, arr.dtype, list(arr.shape), arr.tolist())
        return "%s=tensor(%s%s)" % (a.name, arr.dtype, list(arr.shape))
    if isinstance(v, bytes):
        v = v.decode()
    return "%s=%r" % (a.name, v)


def describe(name, model):
    """(ops.txt section, NAME.nodes.txt text) for an onnx ModelProto."""
    opsets = ", ".join("%s:%d" % (o.domain or "ai.onnx", o.version) for o in model.opset_import)
    g = model.graph
    inits = {i.name: i for i in g.initializer}

    def vi_str(v):
        t = v.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
        return "%s %s%s" % (v.name, onnx.TensorProto.DataType.Name(t.elem_type), dims)

    counts = Counter(n.op_type for n in g.node)
    sec = ["%s: opset %s, %d nodes, %d initializers" % (name, opsets, len(g.node), len(inits))]
    sec += ["  %-18s %d" % (op, c) for op, c in sorted(counts.items())]

    lines = ["# %s: opset %s, ir_version %d, producer %s %s" % (
        name, opsets, model.ir_version, model.producer_name, model.producer_version)]
    lines += ["input  " + vi_str(v) for v in g.input if v.name not in inits]
    lines += ["output " + vi_str(v) for v in g.output]
    for i in g.initializer:
        lines.append("init   %s %s%s" % (i.name, onnx.TensorProto.DataType.Name(i.data_type),
                                         list(i.dims)))
    lines.append("# nodes: op_type name (inputs) -> (outputs) attributes")
    for n in g.node:
        attrs = " ".join(attr_str(a) for a in n.attribute)
        lines.append("%s %s (%s) -> (%s)%s" % (n.op_type, n.name, ", ".join(n.input),
                                              ", ".join(n.output), " " + attrs if attrs else ""))
    return "\n".join(sec), "\n".join(lines) + "\n"


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures", "onnx")
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    jobs = [("mlp", make_mlp, True), ("cnn", make_cnn, True), ("cnn_bn", make_cnn, None),
            ("transformer", make_transformer, True), ("transformer_nofold", make_transformer, False)]
    sections = ["# ONNX node op types per model (torch %s, onnx %s); regenerate with\n"
                "# /usr/bin/python3 tools/onnx_export/export_models.py" % (
                    torch.__version__, onnx.__version__)]
    for name, make, fold in jobs:
        model, in_name, x4, x2 = make()
        with torch.no_grad():
            y4 = model(x4).float()
            y2 = model(x2).float()
            # The batch-2 rows must not depend on the batch they are run in.
            assert torch.allclose(model(x4[:2]), y4[:2], atol=1e-6)
        data = export(model, in_name, x4, fold)
        proto = onnx.load_from_string(data)
        onnx.checker.check_model(proto, full_check=True)
        for xin, yref in ((x4, y4), (x2, y2)):
            (got,) = run_numpy(proto, {in_name: xin.numpy()})
            err = float(np.abs(got - yref.numpy()).max())
            assert got.shape == tuple(yref.shape) and err < 1e-4, (name, got.shape, err)
        path = os.path.join(out_dir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(data)
        in_dt = np.int64 if in_name == "tokens" else np.float32
        np.save(os.path.join(out_dir, name + "_in.npy"), x4.numpy().astype(in_dt))
        np.save(os.path.join(out_dir, name + "_out.npy"), y4.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, name + "_in_b2.npy"), x2.numpy().astype(in_dt))
        np.save(os.path.join(out_dir, name + "_out_b2.npy"), y2.numpy().astype(np.float32))
        sec, nodes = describe(name, proto)
        with open(os.path.join(out_dir, name + ".nodes.txt"), "w") as f:
            f.write(nodes)
        sections.append(sec)
        print(sec)
        print("  -> %s (%d bytes), y %s" % (path, len(data), list(y4.shape)))
    with open(os.path.join(out_dir, "ops.txt"), "w") as f:
        f.write("\n\n".join(sections) + "\n")


if __name__ == "__main__":
    main()
