"""tools/fuzz/seeds.py - the fuzzer's seed corpus: one small valid training graph
per forward op family (a feed batch, params, a scalar `loss`), each with its
feed files, plus the graph transpiled with gradients, an optimizer and 1 to 3
parts. Every seed is checked to run before it is used; a seed that does not is
reported and left out (that is a bug too: the fuzzer prints it)."""
import json
import os
import random
import subprocess

import numpy as np

NP_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "bool": np.bool_}


def _feed(shape, dtype="float32"):
    """A feed var of `shape` (its batch dim -1 in the graph); `_rows` is the file's shape."""
    return {"dtype": dtype, "shape": [-1] + shape[1:], "role": "feed", "_rows": shape}


def _param(shape):
    fill = "xavier_uniform" if len(shape) > 1 else "uniform"
    return {"dtype": "float32", "shape": shape, "role": "param", "init": {"fill": fill, "seed": 3}}


def _after_bias(op, attrs=None, shape=(4, 3)):
    """x (feed) + p (param), then op: every unary op gets a param to train."""
    o = {"op": op, "in": ["h"], "out": ["y"]}
    if attrs:
        o["attrs"] = attrs
    return {"x": _feed(list(shape)), "p": _param(list(shape[1:]))}, [{"op": "add", "in": ["x", "p"], "out": ["h"]}, o]


def _forward_graphs():
    g = {}
    for op in ["identity", "neg", "exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh", "gelu", "softmax",
               "log_softmax", "erf"]:
        g[op] = _after_bias(op)
    for op, attrs in [("pow", {"exponent": 2.0}), ("scale", {"scale": 2.0, "bias": 1.0}),
                      ("clip", {"min": -1.0, "max": 1.0}), ("leaky_relu", {"alpha": 0.1}),
                      ("reduce_sum", {"axes": [1]}), ("reduce_mean", {"axes": [1], "keepdims": False}),
                      ("reduce_max", {"axes": [-1]}), ("transpose", {"perm": [1, 0]}), ("flatten", {"axis": 1}),
                      ("cast", {"dtype": "float64"}), ("dropout", {"ratio": 0.3, "seed": 1})]:
        g[op] = _after_bias(op, attrs)
    # the ONNX families: math, activations, reductions (ops/math.c, ops/activation.c, ops/reduce.c)
    for op in ["sin", "cos", "tan", "atan", "sinh", "cosh", "asinh", "reciprocal", "elu", "selu", "celu",
               "hard_sigmoid", "hard_swish", "softplus", "softsign", "thresholded_relu", "mish", "shrink"]:
        g[op] = _after_bias(op)
    for op, attrs in [("cumsum", {"axis": 1, "exclusive": True, "reverse": True}),
                      ("reduce_min", {"axes": [1]}), ("reduce_prod", {"axes": [0], "keepdims": False}),
                      ("reduce_l1", {"axes": [1]}), ("reduce_l2", {}), ("reduce_sum_square", {"axes": [-1]}),
                      ("reduce_log_sum_exp", {"axes": [1], "keepdims": False})]:
        g[op] = _after_bias(op, attrs)
    for op in ["max", "min", "sum", "mean"]:
        g[op] = ({"a": _feed([4, 3]), "b": _param([3]), "c": _param([1, 3])},
                 [{"op": op, "in": ["a", "b", "c"], "out": ["y"]}])
    g["prelu"] = {"a": _feed([4, 3]), "b": _param([3])}, [{"op": "prelu", "in": ["a", "b"], "out": ["y"]}]
    g["einsum"] = ({"a": _feed([4, 3]), "b": _param([3, 5])},
                   [{"op": "einsum", "in": ["a", "b"], "out": ["y"], "attrs": {"equation": "ij,jk->ik"}}])
    g["reshape"] = _after_bias("reshape", {"shape": [0, 3, -1]}, (4, 6))
    for op in ["sub", "mul", "div"]:
        g[op] = {"a": _feed([4, 3]), "b": _param([3])}, [{"op": op, "in": ["a", "b"], "out": ["y"]}]
    g["matmul"] = {"a": _feed([4, 3]), "b": _param([3, 5])}, [{"op": "matmul", "in": ["a", "b"], "out": ["y"]}]
    g["matmul_batched"] = ({"a": _feed([4, 2, 3]), "b": _param([3, 5])},
                           [{"op": "matmul", "in": ["a", "b"], "out": ["y"]}])
    g["mlp"] = ({"a": _feed([8, 6]), "w1": _param([6, 5]), "b1": _param([5]), "w2": _param([5, 4]),
                 "l": _feed([8], "int64")},
                [{"op": "matmul", "in": ["a", "w1"], "out": ["h"]}, {"op": "add", "in": ["h", "b1"], "out": ["h2"]},
                 {"op": "relu", "in": ["h2"], "out": ["h3"]}, {"op": "matmul", "in": ["h3", "w2"], "out": ["z"]},
                 {"op": "softmax_cross_entropy", "in": ["z", "l"], "out": ["loss"]}])
    g["concat"] = ({"a": _feed([4, 3]), "b": _param([1, 2])},
                   [{"op": "mul", "in": ["a", "a"], "out": ["a2"]},
                    {"op": "reduce_sum", "in": ["a2"], "out": ["s"], "attrs": {"axes": [1]}},
                    {"op": "add", "in": ["s", "b"], "out": ["sb"]},
                    {"op": "concat", "in": ["a", "sb"], "out": ["y"], "attrs": {"axis": 1}}])
    g["conv2d"] = ({"x": _feed([2, 2, 5, 5]), "w": _param([4, 1, 3, 3]), "b": _param([4])},
                   [{"op": "conv2d", "in": ["x", "w", "b"], "out": ["y"],
                     "attrs": {"strides": [2, 1], "pads": [1, 1, 0, 1], "group": 2}}])
    g["max_pool2d"] = _after_bias("max_pool2d", {"kernel": [2, 2], "pads": [1, 0, 1, 1]}, (2, 2, 5, 4))
    g["avg_pool2d"] = _after_bias("avg_pool2d", {"kernel": [3, 2], "strides": [1, 2]}, (2, 2, 5, 4))
    g["layer_norm"] = ({"x": _feed([3, 4]), "s": _param([4]), "c": _param([4])},
                       [{"op": "layer_norm", "in": ["x", "s", "c"], "out": ["y", "m", "r"]}])
    g["embedding"] = ({"w": _param([5, 3]), "i": _feed([4, 3], "int64")},
                      [{"op": "embedding", "in": ["w", "i"], "out": ["y"]}])
    g["mse_loss"] = ({"x": _feed([4, 3]), "p": _param([3]), "t": _feed([4, 3])},
                     [{"op": "add", "in": ["x", "p"], "out": ["h"]},
                      {"op": "mse_loss", "in": ["h", "t"], "out": ["loss"], "attrs": {"reduction": "sum"}}])
    g["argmax_accuracy"] = ({"x": _feed([4, 3]), "p": _param([3]), "l": _feed([4], "int32")},
                            [{"op": "add", "in": ["x", "p"], "out": ["h"]},
                             {"op": "argmax", "in": ["h"], "out": ["am"], "attrs": {"axis": 1}},
                             {"op": "accuracy", "in": ["h", "l"], "out": ["acc"]},
                             {"op": "softmax_cross_entropy", "in": ["h", "l"], "out": ["loss"]}])
    g["fill"] = ({"x": _feed([4, 3]), "p": _param([3])},
                 [{"op": "fill", "in": [], "out": ["f"], "attrs": {"shape": [3], "fill": "normal", "seed": 2}},
                  {"op": "mul", "in": ["p", "f"], "out": ["pf"]}, {"op": "add", "in": ["x", "pf"], "out": ["y"]}])
    # the index, dims and compare families (ops/index.c, ops/dims.c, ops/compare.c)
    g["gather"] = ({"p": _param([5, 3]), "i": _feed([4, 2], "int64")},
                   [{"op": "gather", "in": ["p", "i"], "out": ["y"], "attrs": {"axis": -2}}])
    g["slice"] = _after_bias("slice", {"starts": [-1], "ends": [-9223372036854775808], "axes": [1], "steps": [-2]})
    g["dims"] = ({"x": _feed([4, 3]), "p": _param([3])},
                 [{"op": "add", "in": ["x", "p"], "out": ["h"]},
                  {"op": "unsqueeze", "in": ["h"], "out": ["u"], "attrs": {"axes": [1]}},
                  {"op": "expand", "in": ["u"], "out": ["e"], "attrs": {"shape": [1, 2, 1]}},
                  {"op": "shape", "in": ["h"], "out": ["s"]},
                  {"op": "slice", "in": ["e", "", "", "", ""], "out": ["e1"],
                   "attrs": {"starts": [0], "ends": [1], "axes": [1]}},
                  {"op": "squeeze", "in": ["e1"], "out": ["q"], "attrs": {"axes": [-2]}},
                  {"op": "reshape", "in": ["q", "s"], "out": ["y"]}])
    g["where"] = ({"x": _feed([4, 3]), "p": _param([3])},
                  [{"op": "add", "in": ["x", "p"], "out": ["h"]},
                   {"op": "greater", "in": ["x", "p"], "out": ["c"]},
                   {"op": "where", "in": ["c", "h", "p"], "out": ["y"]}])
    return g


def _write_feeds(rng, out, name, vars_):
    """Writes each feed var's .npy file into out; returns {var: file name}."""
    files = {}
    for var, v in vars_.items():
        if "_rows" not in v:
            continue
        shape = v.pop("_rows")
        n = int(np.prod(shape))
        if v["dtype"].startswith("int"):
            values = [rng.randrange(0, 3) for _ in range(n)]
        else:
            values = [rng.uniform(0.1, 2.0) for _ in range(n)]
        a = np.array(values, NP_DTYPES[v["dtype"]]).reshape(shape)
        files[var] = "%s.%s.npy" % (name, var)
        np.save(os.path.join(out, files[var]), a)
    return files


def feed_args(flag, files):
    """["--feed", "x=FILE", ...] (or --data) for a seed's feed files."""
    return sum(([flag, "%s=%s" % (var, f)] for var, f in sorted(files.items())), [])


def make(pardo, out, log):
    """Writes the seeds into out (NAME.json, NAME.feeds: its feed files as JSON, and the .npy files); returns the
    names of the seeds that run. log(line) reports a seed that does not."""
    rng = random.Random(7)
    os.makedirs(out, exist_ok=True)
    names = []

    def pardo_ok(args, what):
        p = subprocess.run([pardo] + args, capture_output=True, text=True, errors="replace", cwd=out)
        if p.returncode != 0:
            log("seed %s: pardo %s failed: %s" % (what, " ".join(args), p.stderr.strip()[:300]))
        return p.returncode == 0

    for name, (vars_, ops) in _forward_graphs().items():
        ops = [dict(o, name="%s%d" % (o["op"], i)) for i, o in enumerate(ops)]
        if ops[-1]["out"][0] != "loss":
            ops.append({"op": "reduce_mean", "in": [ops[-1]["out"][0]], "out": ["loss"], "name": "loss_mean"})
        files = _write_feeds(rng, out, name, vars_)
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump({"pardo": 1, "blocks": [{"vars": vars_, "ops": ops}]}, f)
        if not pardo_ok(["run", name + ".json", "--steps", "1"] + feed_args("--feed", files), name):
            continue
        variants = [name]
        for optimizer, parts in [("sgd", 1), ("momentum", 2), ("adam", 3)]:
            t = "%s_%s_p%d" % (name, optimizer, parts)
            if not pardo_ok(["transpile", name + ".json", "-o", t + ".json", "--backward", "loss", "--optimizer",
                             optimizer, "--lr", "0.1", "--parts", str(parts)], t):
                continue
            if pardo_ok(["run", t + ".json", "--steps", "2", "--threads", "2"] + feed_args("--feed", files), t):
                variants.append(t)
        for v in variants:
            with open(os.path.join(out, v + ".feeds"), "w") as f:
                json.dump(files, f)
        names += variants
    return names
