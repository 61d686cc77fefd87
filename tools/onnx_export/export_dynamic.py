#!/usr/bin/env python3
"""tools/onnx_export/export_dynamic.py - one more fixture for pardo's ONNX importer: a model whose
shape computations depend on the batch at run time (torch.zeros / new_full / expand over x.shape[0]
export as ConstantOfShape and Expand of a Shape -> Gather -> Unsqueeze -> Concat chain, with Where
and Greater), so the importer must compute those shapes with ops instead of folding them.
Writes tests/fixtures/onnx/dynamic.onnx, dynamic_in.npy / dynamic_out.npy (batch 4) and
dynamic_in_b2.npy / dynamic_out_b2.npy (batch 3). Run from the repository root with Debian's
python3-torch: /usr/bin/python3 tools/onnx_export/export_dynamic.py"""
import io
import os
import sys

import numpy as np
import torch
from torch import nn


class Dynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        h = self.fc(x)
        z = torch.zeros(x.shape[0], 6)              # ConstantOfShape of [batch, 6]
        c = h.new_full((x.shape[0], 1), 0.5)        # ConstantOfShape of [batch, 1], value 0.5
        e = self.fc.bias.expand(x.shape[0], 6)      # Expand to [batch, 6]
        return torch.where(h > 0, h, z) * 2 + c + e


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("tests", "fixtures", "onnx")
    torch.manual_seed(7)
    m = Dynamic().eval()
    x4, x3 = torch.randn(4, 6), torch.randn(3, 6)
    buf = io.BytesIO()
    torch.onnx.export(m, (x4,), buf, opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, do_constant_folding=True)
    with open(os.path.join(out, "dynamic.onnx"), "wb") as f:
        f.write(buf.getvalue())
    with torch.no_grad():
        for suffix, x in (("", x4), ("_b2", x3)):
            np.save(os.path.join(out, "dynamic_in%s.npy" % suffix), x.numpy().astype(np.float32))
            np.save(os.path.join(out, "dynamic_out%s.npy" % suffix), m(x).numpy().astype(np.float32))
    try:
        import onnx
        p = onnx.load_from_string(buf.getvalue())
        onnx.checker.check_model(p, full_check=True)
        print(" ".join(n.op_type for n in p.graph.node))
    except ImportError:
        pass


if __name__ == "__main__":
    main()
