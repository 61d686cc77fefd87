"""PyTorch's side of `make bench` (tools/bench/run), run with the Python that
has torch (Debian's python3-torch: /usr/bin/python3). The same workloads as
bench_pardo: one training step of the MLP 784-512-512-10 (ReLU, softmax
cross-entropy, SGD lr 0.1), inference (softmax probabilities), and a chain of
adds on a 16-element tensor in eager mode. Prints one JSON line with the
per-step median in microseconds. `export` writes the ONNX models ONNX Runtime
runs (torch.onnx.export; torch 1.13 needs no onnx package for it).

  bench_torch.py train|infer [--threads N] [--batch B] [--steps S] [--warmup W]
  bench_torch.py chain [--ops N] [--steps S] [--warmup W]
  bench_torch.py export DIR [--batch B] [--ops N]
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
    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


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
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--ops", type=int, default=1000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.rand(a.batch, 784)
    y = torch.arange(a.batch) % 10

    if a.mode == "export":
        os.makedirs(a.dir, exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(Infer().eval(), (x,), os.path.join(a.dir, "mlp784.onnx"), input_names=["x"],
                              output_names=["probs"], opset_version=13)
            torch.onnx.export(Chain(a.ops), (torch.rand(16),), os.path.join(a.dir, "chain.onnx"), input_names=["x"],
                              output_names=["y"], opset_version=13)
        print(json.dumps({"bench": "torch", "mode": "export", "dir": a.dir}))
        return

    if a.mode == "train":
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
    elif a.mode == "infer":
        model = Infer().eval()

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
    r = {"bench": "torch", "mode": a.mode, "threads": a.threads, "steps": a.steps, "median_us": med,
         "p10_us": t[len(t) // 10], "p90_us": t[len(t) * 9 // 10], "value": float(out.reshape(-1)[0]),
         "torch": torch.__version__, "blas": blas_library(), "peak_rss_kb": peak_rss_kb()}
    if a.mode == "chain":
        r["us_per_op"] = med / a.ops
    print(json.dumps(r))


if __name__ == "__main__":
    sys.exit(main())
