"""PyTorch's side of `make bench` (tools/bench/run), run with the Python that
has torch (Debian's python3-torch: /usr/bin/python3). The same workloads as
bench_pardo, the same ops on the same shapes as the pardo graphs: one
training step (forward, loss, backward, SGD lr 0.1) of a model, inference
(softmax probabilities; mlp and cnn), and a chain of adds on a 16-element
tensor in eager mode. Prints one JSON line with the per-step median in
microseconds. `export` writes the ONNX models ONNX Runtime runs
(torch.onnx.export; torch 1.13 needs no onnx package for it).

  --model mlp        (default; W1, W2, W6: tools/bench/mlp784.json) the MLP 784-512-512-10, ReLU,
                     softmax cross-entropy; batch 256
  --model cnn        (W10: cnn28.json) [B, 784] reshaped to [B, 1, 28, 28], conv 1->16 3x3 pad 1,
                     ReLU, max pool 2x2, conv 16->32 3x3 pad 1, ReLU, max pool 2x2, flatten,
                     linear 1568 -> 10, softmax cross-entropy; batch 64
  --model mlp_block  (W11: mlp_block.json) x [B, 256]: x + fc2(gelu(fc1(layer_norm(x)))),
                     256 -> 1024 -> 256, the exact GELU, MSE against a target; batch 2048 rows
  --model attention  (W12: attention.json) x [B, 128, 256], 4 heads of 64: q, k, v projections,
                     reshape + transpose to [B, 4, 128, 64], softmax(Q K^T / 8) V, transpose +
                     reshape back, out projection, MSE against a target; batch 8

  bench_torch.py train|infer [--model M] [--threads N] [--batch B] [--steps S] [--warmup W]
  bench_torch.py chain [--ops N] [--steps S] [--warmup W]
  bench_torch.py export DIR [--batch B] [--ops N]   mlp784.onnx (batch B), chain.onnx, cnn28.onnx (batch 64)
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F


def mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10))


class Infer(torch.nn.Module):
    def __init__(self, net=None):
        super().__init__()
        self.net = net or mlp()

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


class CNN(torch.nn.Module):
    """cnn28.json: logits of a [B, 784] batch of 28x28 one-channel images."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.fc3 = torch.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        h = x.reshape(-1, 1, 28, 28)
        h = F.max_pool2d(F.relu(self.conv1(h)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc3(torch.flatten(h, 1))


class MLPBlock(torch.nn.Module):
    """mlp_block.json: a pre-norm transformer MLP block with its residual."""

    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(256, eps=1e-5)
        self.fc1 = torch.nn.Linear(256, 1024)
        self.fc2 = torch.nn.Linear(1024, 256)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Attention(torch.nn.Module):
    """attention.json: self-attention, 4 heads of 64 over width 256, spelled out op by op as the graph has it."""

    def __init__(self, d=256, heads=4):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        n, t, d = x.shape

        def split(z):
            return z.reshape(n, t, self.heads, self.dh).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        p = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * (1.0 / self.dh ** 0.5), dim=-1)
        return self.o(torch.matmul(p, v).transpose(1, 2).reshape(n, t, d))


# model -> (the network, the default batch, a batch's feeds from the batch size, the loss of the network's output)
MODELS = {
    "mlp": (mlp, 256, lambda b: (torch.rand(b, 784), torch.arange(b) % 10), F.cross_entropy),
    "cnn": (CNN, 64, lambda b: (torch.rand(b, 784), torch.arange(b) % 10), F.cross_entropy),
    "mlp_block": (MLPBlock, 2048, lambda b: (torch.rand(b, 256), torch.rand(b, 256)), F.mse_loss),
    "attention": (Attention, 8, lambda b: (torch.rand(b, 128, 256), torch.rand(b, 128, 256)), F.mse_loss),
}


class Chain(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n
        self.register_buffer("b", torch.full((16,), 0.001))

    def forward(self, x):
        for _ in range(self.n):
            x = x + self.b
        return x


def blas_library():
    """The BLAS shared library this process mapped (libblas.so.3 is an alternative on Debian)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "blas" in os.path.basename(path):
                    return os.path.realpath(path)
    except OSError:
        pass
    return "unknown"


def peak_rss_kb():
    """This process's peak resident set (VmHWM), KiB: unlike ru_maxrss it does not count the process that forked us."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["train", "infer", "chain", "export"])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--model", choices=sorted(MODELS), default="mlp")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, help="default: the model's (mlp 256, cnn 64, mlp_block 2048, attention 8)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--ops", type=int, default=1000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net, batch, make_feeds, loss_fn = MODELS[a.model]
    x, y = make_feeds(a.batch or batch)

    if a.mode == "export":
        os.makedirs(a.dir, exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(Infer().eval(), (x,), os.path.join(a.dir, "mlp784.onnx"), input_names=["x"],
                              output_names=["probs"], opset_version=13)
            torch.onnx.export(Chain(a.ops), (torch.rand(16),), os.path.join(a.dir, "chain.onnx"), input_names=["x"],
                              output_names=["y"], opset_version=13)
            torch.onnx.export(Infer(CNN()).eval(), (torch.rand(64, 784),), os.path.join(a.dir, "cnn28.onnx"),
                              input_names=["x"], output_names=["probs"], opset_version=13)
        print(json.dumps({"bench": "torch", "mode": "export", "dir": a.dir}))
        return

    if a.mode == "train":
        model = net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
    elif a.mode == "infer":
        if a.model not in ("mlp", "cnn"):
            sys.exit("bench_torch: infer is for --model mlp or cnn")
        model = Infer(net()).eval()

        def step():
            with torch.inference_mode():
                return model(x)
    else:
        model = Chain(a.ops)
        xc = torch.rand(16)

        def step():
            with torch.inference_mode():
                return model(xc)

    for _ in range(a.warmup):
        step()
    t = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        out = step()
        t.append((time.perf_counter() - t0) * 1e6)
    t.sort()
    med = t[len(t) // 2]
    r = {"bench": "torch", "mode": a.mode, "model": a.model, "threads": a.threads, "steps": a.steps, "median_us": med,
         "p10_us": t[len(t) // 10], "p90_us": t[len(t) * 9 // 10], "value": float(out.reshape(-1)[0]),
         "torch": torch.__version__, "blas": blas_library(), "peak_rss_kb": peak_rss_kb()}
    if a.mode == "chain":
        r["us_per_op"] = med / a.ops
    print(json.dumps(r))


if __name__ == "__main__":
    sys.exit(main())
