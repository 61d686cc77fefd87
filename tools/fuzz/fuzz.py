#!/usr/bin/env python3
"""tools/fuzz/fuzz.py - `make fuzz`: feeds pardo broken inputs and flags every
run that crashes, hangs, trips a sanitizer, or fails without exit status 2
where the input was at fault (SPEC section 3: no input makes pardo crash, hang
or write a partial output file). Meant for a sanitizer build (make fuzz uses
build-asan/pardo, AddressSanitizer + UndefinedBehaviorSanitizer).

Three kinds of cases, taken in turn:
  mutate    a seed graph (tools/fuzz/seeds.py: one valid training graph per op
            family and its transpiled forms) with 1 to 3 changes (an attr, a
            shape, a dtype, a role, an input or output name, an op type, ops
            deleted, copied or swapped, a value of the wrong JSON kind), and/or
            one of its feed files (another dtype, batch or rank, truncated,
            a header byte changed), and/or one feed given as a CSV file (maybe
            with a header, cut short or with a byte changed to one of CSV's
            own characters) to run and train; run through check, dot, run (with a trace
            and a checkpoint), sometimes train and transpile + run; then the
            checkpoint and the trace, cut short or with a byte changed, read
            back by run --load and trace summary / timeline; train's own
            checkpoint (maybe damaged) resumed with train --load.
  generate  a graph of 1 to 4 random ops from `pardo ops` (random dtypes,
            shapes with 0-size and huge dims, attrs of every kind), through
            check, dot, run and transpile + run.
  cli       random command lines: subcommands, flags, values.
  onnx      an ONNX model (tests/fixtures/onnx, and node-test models where
            libonnx-testdata is installed) damaged: bytes cut or changed, or,
            with the onnx package, a node's op type, an attr, a dim, a dtype,
            an input name or an initializer's data changed; through check,
            dot, run with its feed, import and transpile.

A finding is kept under --out (the files, WHY.txt: the command and stderr) and
printed; the exit status is 1 when there was one. Needs Python 3 and NumPy
(Debian: python3-numpy); make test does not use this.

Usage: tools/fuzz/fuzz.py --pardo build-asan/pardo [--iterations N] [--seed S] [--out DIR]
                          [--modes mutate,generate,cli,onnx] [--timeout SECONDS]
"""
import argparse
import copy
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    sys.exit("tools/fuzz/fuzz.py needs NumPy: apt-get install python3-numpy (then run it with /usr/bin/python3)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seeds  # noqa: E402

SANITIZER_WORDS = ("AddressSanitizer", "LeakSanitizer", "ThreadSanitizer", "runtime error:")
DTYPES = ["float32", "float64", "int32", "int64", "bool"]
ATTR_NAMES = ["axis", "axes", "perm", "shape", "kernel", "strides", "pads", "dilations", "group", "ratio",
              "reduction", "dtype", "alpha", "min", "max", "exponent", "scale", "bias", "epsilon", "keepdims", "seed",
              "parts", "mode", "weight_by", "block", "parts_in", "parts_out", "mu", "nesterov", "beta1", "beta2",
              "transpose_a", "transpose_b", "fill", "value"]
ODD_VALUES = [0, 1, -1, 2, 3, 7, -2, 2**31, 2**63 - 1, -2**63, 1e308, -1e308, 0.5, -0.0, 1e-45, "x", "", "float64",
              "mean", "concat", "none", True, False, None, [], [0], [1, 1], [-1], [2, 2], [1, 1, 1, 1], [0, 0, 0, 0],
              [3, -1], [1, 0], [2**40, 1], {}, {"a": "b"}, [[1]], ["a"]]


class Runner:
    """Runs pardo in a directory and judges the outcome."""

    def __init__(self, pardo, timeout):
        self.pardo, self.timeout = pardo, timeout
        self.env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1",
                        TSAN_OPTIONS="halt_on_error=0")
        self.counts = {}

    def run(self, args, cwd):
        """(finding or None, stderr, exit status) of pardo args."""
        try:
            p = subprocess.run([self.pardo] + args, capture_output=True, text=True, errors="replace",
                               timeout=self.timeout, cwd=cwd, env=self.env)
        except subprocess.TimeoutExpired:
            return "hang (over %d s)" % self.timeout, "", None
        key = (args[0] if args else "", p.returncode)
        self.counts[key] = self.counts.get(key, 0) + 1
        if p.returncode < 0:
            return "killed by signal %d" % -p.returncode, p.stderr, p.returncode
        if p.returncode not in (0, 1, 2, 130):
            return "exit status %d" % p.returncode, p.stderr, p.returncode
        if any(w in p.stderr for w in SANITIZER_WORDS):
            return "sanitizer report", p.stderr, p.returncode
        if p.returncode == 2 and not p.stderr.strip():
            return "exit status 2 without a message", p.stderr, p.returncode
        if p.returncode == 1 and args and args[0] in ("check", "dot", "transpile", "import"):
            return "exit status 1 from %s (bad input should be 2)" % args[0], p.stderr, p.returncode
        return None, p.stderr, p.returncode


# ---- mutations ----------------------------------------------------------------

# the executors a run or train picks from (auto is the default)
EXECUTORS = ["auto", "sequential", "dataflow"]


def _var_names(g):
    names = []
    for blk in g["blocks"]:
        if not isinstance(blk, dict):
            continue
        names += [k for k in blk.get("vars", {})] if isinstance(blk.get("vars"), dict) else []
        for o in blk.get("ops", []) if isinstance(blk.get("ops"), list) else []:
            if isinstance(o, dict) and isinstance(o.get("out"), list):
                names += [n for n in o["out"] if isinstance(n, str)]
    return names


def _tweak(rng, v):
    """A nearby value: one list element changed or added, a number moved, or None (drop it)."""
    if isinstance(v, list):
        if v and rng.random() < 0.7:
            v = list(v)
            v[rng.randrange(len(v))] = rng.choice([0, -1, 1, 2, 5, 100])
            return v
        return list(v) + [rng.choice([0, 1, 2])]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return rng.choice([0, -1, v + 1, v - 1, v * 2, 100])
    return None


def mutate_graph(rng, g):
    """One change to graph g (in place)."""
    blk = rng.choice(g["blocks"])
    ops, vars_ = blk.setdefault("ops", []), blk.setdefault("vars", {})
    names = _var_names(g) + ["", "nope"]
    m = rng.randrange(15)
    if m == 0 and ops:
        o = rng.choice(ops)
        o.setdefault("attrs", {})[rng.choice(list(o.get("attrs", {})) + ATTR_NAMES)] = rng.choice(ODD_VALUES)
    elif m == 1 and ops:
        attrs = rng.choice(ops).get("attrs") or {}
        if attrs:
            k = rng.choice(list(attrs))
            v = _tweak(rng, attrs[k])
            if v is None:
                del attrs[k]
            else:
                attrs[k] = v
    elif m == 2 and vars_:
        shape = vars_[rng.choice(list(vars_))].get("shape")
        if isinstance(shape, list) and shape and rng.random() < 0.7:
            shape[rng.randrange(len(shape))] = rng.choice([0, 1, 2, 3, 5, -1, 8])
        elif isinstance(shape, list) and shape and rng.random() < 0.5:
            shape.pop(rng.randrange(len(shape)))
        elif isinstance(shape, list):
            shape.insert(rng.randrange(len(shape) + 1), rng.choice([1, 2, 3]))
    elif m == 3 and vars_:
        vars_[rng.choice(list(vars_))]["dtype"] = rng.choice(DTYPES + ["float16", "tensor_array"])
    elif m == 4 and vars_:
        v = vars_[rng.choice(list(vars_))]
        c = rng.randrange(5)
        if c == 0:
            v["role"] = rng.choice(["feed", "param", "state", "temp", "x"])
        elif c == 1:
            v.pop("init", None)
            v.pop("value", None)
        elif c == 2:
            v["value"] = [rng.choice([0, 1, 2.5, -1, True]) for _ in range(rng.choice([0, 1, 2, 3, 6, 12, 24]))]
        elif c == 3:
            v["init"] = {"fill": rng.choice(["constant", "uniform", "normal", "xavier_uniform", "kaiming_uniform",
                                             "x"]), "seed": rng.choice([0, -1, 5]), "value": 1}
        else:
            v["kind"] = rng.choice(["tensor", "tensor_array", "x"])
    elif m in (5, 6) and ops:
        io = rng.choice(ops).get("in" if m == 5 else "out")
        if isinstance(io, list) and io:
            io[rng.randrange(len(io))] = rng.choice(names + ["fresh%d" % rng.randrange(9)])
    elif m in (7, 8) and ops:
        io = rng.choice(ops).setdefault("in" if m == 7 else "out", [])
        if isinstance(io, list) and io and rng.random() < 0.5:
            io.pop(rng.randrange(len(io)))
        elif isinstance(io, list):
            io.append(rng.choice(names))
    elif m == 9 and ops:
        rng.choice(ops)["op"] = rng.choice(OPS)
    elif m == 10 and len(ops) > 1:
        ops.pop(rng.randrange(len(ops)))
    elif m == 11 and ops:
        ops.insert(rng.randrange(len(ops) + 1), copy.deepcopy(rng.choice(ops)))
    elif m == 12 and len(ops) > 1:
        i, j = rng.randrange(len(ops)), rng.randrange(len(ops))
        ops[i], ops[j] = ops[j], ops[i]
    elif m == 13 and vars_:
        del vars_[rng.choice(list(vars_))]
    elif ops:
        rng.choice(ops)[rng.choice(["in", "out", "attrs", "op", "name"])] = rng.choice(ODD_VALUES)


def mutate_npy(rng, path):
    """The .npy at path as another dtype, batch or rank, cut short, or with a header byte changed."""
    a = np.load(path)
    c = rng.randrange(6)
    if c == 0:
        np.save(path, a.astype(rng.choice([np.float32, np.float64, np.int32, np.int64, np.bool_, np.float16,
                                           np.uint8])))
    elif c == 1:
        np.save(path, a[:rng.choice([0, 1, 2, 3, 5])])
    elif c == 2:
        np.save(path, np.concatenate([a] * rng.choice([2, 3]))[:rng.choice([5, 7, 9, 12])])
    elif c == 3:
        np.save(path, a.reshape(-1) if a.ndim > 1 else a.reshape(-1, 1))
    else:
        damage_file(rng, path, header=128 if c == 5 else 0)


def csv_feed(rng, work, files):
    """files with one feed's .npy written as a CSV file beside it (rows: its first dim, the rest flattened),
    maybe with a header line, maybe damaged (cut, or a byte changed to one of CSV's own characters)."""
    name = rng.choice(sorted(files))
    try:
        a = np.load(os.path.join(work, files[name]))
    except Exception:  # a damaged header NumPy cannot read (its tokenizer's errors too): no CSV this time
        return files
    # the row width spelled out: reshape(n, -1) cannot size an empty array's rows
    rows = a.reshape(1, 1) if a.ndim == 0 else a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))
    path = os.path.join(work, name + ".csv")
    np.savetxt(path, rows.astype(np.int64) if a.dtype.kind in "biu" else rows,
               fmt="%d" if a.dtype.kind in "biu" else "%.9g", delimiter=",",
               header="h" if rng.random() < 0.2 else "", comments="")
    if rng.random() < 0.5:
        damage_file(rng, path, chars=None if rng.random() < 0.3 else ",\n\r-.e+0123456789x nan")
    out = dict(files)
    out[name] = name + ".csv"
    return out


def damage_file(rng, path, header=0, chars=None):
    """Cuts the file at a random length, or changes one byte (within the first `header` bytes when set; to one
    of `chars` when given)."""
    with open(path, "rb") as f:
        b = bytearray(f.read())
    if not b or (not header and not chars and rng.random() < 0.5):
        b = b[:rng.randrange(len(b) + 1)]
    else:
        i = rng.randrange(min(len(b), header) if header else len(b))
        b[i] = ord(rng.choice(chars)) if chars else rng.randrange(256)
    with open(path, "wb") as f:
        f.write(bytes(b))


# ---- the three kinds of cases ------------------------------------------------


def case_mutate(rng, runner, corpus, work):
    """A mutated seed through the commands; returns (finding, command, stderr) or None."""
    name = rng.choice(corpus.names)
    g = json.load(open(os.path.join(corpus.dir, name + ".json")))
    files = json.load(open(os.path.join(corpus.dir, name + ".feeds")))
    for f in files.values():
        shutil.copy(os.path.join(corpus.dir, f), work)
    r = rng.random()
    if r < 0.75:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            try:
                mutate_graph(rng, g)
            except (TypeError, AttributeError, KeyError, IndexError, ValueError):
                pass  # a change that met a part an earlier change had broken
    if r > 0.6 and files:
        try:
            mutate_npy(rng, os.path.join(work, rng.choice(sorted(files.values()))))
        except (ValueError, OSError, EOFError):
            pass  # an earlier cut left nothing NumPy reads: pardo gets it as it is
    if files and rng.random() < 0.3:
        files = csv_feed(rng, work, files)
    with open(os.path.join(work, "g.json"), "w") as f:
        json.dump(g, f)
    feeds = seeds.feed_args("--feed", files)
    # check --fused and run (fused by default; --no-fuse now and then) put the fusion pass to the graph too
    cmds = [["check"] + (["--fused"] if rng.random() < 0.5 else []) + ["g.json"], ["dot", "g.json"],
            ["run", "g.json", "--steps", str(rng.choice([1, 2])), "--threads", str(rng.choice([1, 2, 3])),
             "--trace", "tr.json", "--save", "ck.safetensors", "--executor", rng.choice(EXECUTORS)] + feeds +
            (["--no-fuse"] if rng.random() < 0.2 else [])]
    if rng.random() < 0.3:
        train = ["train", "g.json", "--batch-size", str(rng.choice([1, 2, 3, 5])), "--threads", "2",
                 "--executor", rng.choice(EXECUTORS), "--epochs", str(rng.choice([1, 2])),
                 "--save", "tck.safetensors"] + seeds.feed_args("--data", files)
        if rng.random() < 0.5:
            train += seeds.feed_args("--eval", files) + rng.choice([[], ["--shuffle", "--seed", "3"], ["--drop-last"]])
        cmds.append(train)
        if rng.random() < 0.5:  # resume from its checkpoint, maybe damaged first (read_back does that for run's)
            cmds.append(train[:train.index("--save")] + ["--epochs", "3", "--load", "tck.safetensors"] +
                        seeds.feed_args("--data", files))
    if rng.random() < 0.3:
        cmds.append(["transpile", "g.json", "-o", "t.json", "--parts", str(rng.choice([1, 2, 3])), "--backward",
                     "loss", "--optimizer", rng.choice(["sgd", "momentum", "adam"])])
        cmds.append(["run", "t.json", "--threads", "2", "--executor", rng.choice(EXECUTORS)] + feeds)
    for c in cmds:
        if "--load" in c and c[0] == "train" and os.path.exists(os.path.join(work, "tck.safetensors")) and \
                rng.random() < 0.5:
            damage_file(rng, os.path.join(work, "tck.safetensors"), header=200 if rng.random() < 0.5 else 0)
        bad, err, rc = runner.run(c, work)
        if bad:
            return bad, c, err
        if c[0] == "run" and "--save" in c and rc == 0:
            for c2 in read_back(rng, work, feeds):
                bad, err, _ = runner.run(c2, work)
                if bad:
                    return bad, c2, err
    return None


def read_back(rng, work, feeds):
    """The commands that read a run's checkpoint and trace back, each maybe damaged first."""
    cmds = []
    if os.path.exists(os.path.join(work, "ck.safetensors")) and rng.random() < 0.5:
        damage_file(rng, os.path.join(work, "ck.safetensors"), header=200 if rng.random() < 0.5 else 0)
        cmds.append(["run", "g.json", "--load", "ck.safetensors"] + feeds)
    if os.path.exists(os.path.join(work, "tr.json")):
        if rng.random() < 0.5:
            damage_file(rng, os.path.join(work, "tr.json"), chars=None if rng.random() < 0.5 else '{}[]",:0-e. x')
        cmds += [["trace", "summary", "tr.json"], ["trace", "timeline", "tr.json", "-o", "tl.svg"]]
    return cmds


def op_specs(pardo):
    """{op: (inputs [(name, optional)], outputs [(name, optional)], attrs [(name, kind, quoted words)])} from
    `pardo ops OP`."""
    specs = {}
    for op in OPS:
        text = subprocess.run([pardo, "ops", op], capture_output=True, text=True).stdout
        sec, spec = None, ([], [], [])
        for line in text.splitlines():
            head = line.rstrip(":")
            if head in ("inputs", "outputs", "attrs"):
                sec = ("inputs", "outputs", "attrs").index(head)
                continue
            if not line.startswith("  ") or sec is None or "(none)" in line:
                sec = sec if line.startswith("  ") else None
                continue
            if sec < 2:
                m = re.match(r"\s*\d+ (\S+)", line)
                if m:
                    spec[sec].append((m.group(1), "(optional)" in line))
            else:
                m = re.match(r"\s*(\S+)\s+(\S+)", line)
                if m:
                    spec[2].append((m.group(1), m.group(2), re.findall(r'"([a-z_0-9]+)"', line)))
        specs[op] = spec
    return specs


def random_attr(rng, kind, words):
    if kind == "int":
        return rng.choice([-2, -1, 0, 1, 1, 2, 3, 4, 2**40, -2**40, 2**62])
    if kind == "ints":
        return [rng.choice([-2, -1, 0, 1, 1, 2, 2, 3, 4, 2**62]) for _ in range(rng.choice([0, 1, 2, 2, 3, 4, 5]))]
    if kind == "float":
        return rng.choice([0.0, 0.5, 1.0, -1.0, 1e-5, 0.999, 1.0000001, 1e300, -0.0, 2.0])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "string":
        return rng.choice(words + DTYPES + ["mean", "sum", "none", "xx", ""])
    return rng.choice(ODD_VALUES)


def random_graph(rng, specs):
    vars_, ops = {}, []

    def new_var(dtype=None, shape=None):
        name = "v%d" % len(vars_)
        dtype = dtype or rng.choice(["float32"] * 6 + ["float64"] * 2 + ["int32", "int64", "bool"])
        if shape is None:
            shape = [rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5, 7, 16]) for _ in range(rng.choice([0, 1, 2, 2, 2, 3, 4]))]
        n = int(np.prod(shape)) if shape else 1
        v = {"dtype": dtype, "shape": shape}
        if rng.random() < 0.15 and dtype.startswith("float"):
            v.update(role="param", init={"fill": rng.choice(["constant", "uniform", "normal", "xavier_uniform",
                                                              "kaiming_uniform"]), "seed": 1})
        elif dtype == "bool":
            v["value"] = [rng.random() < 0.5 for _ in range(n)]
        else:
            v["value"] = [rng.choice([0, 1, 2, 3, -1, 5] if dtype.startswith("int") else
                                     [0.0, 1.0, -1.0, 0.5, 2.0, -3.25, 1e30, -1e-30]) for _ in range(n)]
        vars_[name] = v
        return name

    written = []
    for k in range(rng.choice([1, 1, 2, 2, 3, 4])):
        op = rng.choice(OPS)
        ins, outs, attrs = specs[op]
        names = []
        for _, optional in ins:
            if optional and rng.random() < 0.4:
                break
            pool = list(vars_) + written
            first = names[0] if names and names[0] in vars_ else None
            if pool and rng.random() < 0.5:
                names.append(rng.choice(pool))
            elif first and rng.random() < 0.6:
                names.append(new_var(vars_[first]["dtype"], list(vars_[first]["shape"])))
            else:
                names.append(new_var())
        outs_named = []
        for j, (_, optional) in enumerate(outs):
            if optional and rng.random() < 0.5:
                break
            outs_named.append(names[j] if j < len(names) and rng.random() < 0.1 else "t%d_%d" % (k, j))
        o = {"op": op, "in": names, "out": outs_named, "name": "op%d" % k}
        chosen = {a: random_attr(rng, kind, words) for a, kind, words in attrs if rng.random() < 0.5}
        if chosen:
            o["attrs"] = chosen
        ops.append(o)
        written += outs_named
    return {"pardo": 1, "blocks": [{"vars": vars_, "ops": ops}]}


def case_generate(rng, runner, specs, work):
    g = random_graph(rng, specs)
    with open(os.path.join(work, "g.json"), "w") as f:
        json.dump(g, f)
    for c in (["check", "g.json"], ["check", "--fused", "g.json"], ["dot", "g.json"],
              ["run", "g.json", "--steps", "2", "--threads", "2"],
              ["transpile", "g.json", "-o", "t.json", "--parts", "2"]):
        bad, err, rc = runner.run(c, work)
        if not bad and c[0] == "transpile" and rc == 0:
            c = ["run", "t.json", "--threads", "2", "--steps", "1"]
            bad, err, rc = runner.run(c, work)
        if bad:
            return bad, c, err
    return None


def case_cli(rng, runner, corpus, work):
    for f in os.listdir(corpus.dir):
        if f.startswith("mlp"):
            shutil.copy(os.path.join(corpus.dir, f), work)
    flags = ["--feed", "--fetch", "--out", "--load", "--save", "--steps", "--threads", "--executor", "--device",
             "--trace", "--profile", "--data", "--batch-size", "--epochs", "--shuffle", "--seed", "--eval", "-o",
             "--parts", "--backward", "--optimizer", "--lr", "summary", "timeline", "--help", "-h", "--", "-", "--x",
             "--steps=2", "--threads=0", "--train", "--format", "--early-stop", "--save-best", "--lr-schedule",
             "--warmup-steps", "--add-loss", "--labels", "--weight-decay", "--clip-grad-norm", "--sync-batch-norm",
             "--bucket-mb"]
    values = ["0", "1", "2", "-1", "3", "99999999999999999999", "1e3", "abc", "", "=", "x=", "=y", "a=b=c", "cuda",
              "cuda:7", "cpu", "mlp.json", "mlp_adam_p3.json", "nonexistent.json", "/dev/null", "/", "out", "ck.st",
              "sgd", "adam", "nope", "loss", "0.1", "nan", "inf", "tr.json", "mlp.a.npy", "a=mlp.a.npy",
              "l=mlp.l.npy", "z", "auto", "sequential", "dataflow", "csv", "npy", "cosine", "linear", "step:2:0.5",
              "step:0:1", "mse:y", "softmax_cross_entropy:logits", "mse:", "adamw", "1e-300"]
    args = [rng.choice(["run", "train", "transpile", "check", "ops", "dot", "trace", "help", "--help", "--version",
                        "", "bogus"])]
    if args[0] == "trace":
        args.append(rng.choice(["summary", "timeline", "x", ""]))
    if rng.random() < 0.8:
        args.append(rng.choice(["mlp.json", "mlp_sgd_p1.json", "mlp_adam_p3.json", "nonexistent.json", "", "tr.json",
                                "mlp.a.npy"]))
    for _ in range(rng.randrange(7)):
        args.append(rng.choice(flags))
        if rng.random() < 0.8:
            args.append(rng.choice(values))
    args = [a for a in args if a != "" or rng.random() < 0.3]
    bad, err, _ = runner.run(args, work)
    return (bad, args, err) if bad else None


class Corpus:
    def __init__(self, pardo, where):
        self.dir = where
        self.bad = []
        self.names = seeds.make(pardo, where, self.bad.append)


OPS = []


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNX_FIXTURES = os.path.join(ROOT, "tests", "fixtures", "onnx")
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"

try:
    import onnx  # structured mutations where the onnx package is installed (Debian: python3-onnx)
except ImportError:
    onnx = None


def onnx_seeds():
    """(model path, feed name, feed .npy or None) for each seed model."""
    out = []
    for f in sorted(os.listdir(ONNX_FIXTURES)) if os.path.isdir(ONNX_FIXTURES) else []:
        if f.endswith(".onnx"):
            m = f[:-5]
            feed = "tokens" if m.startswith("transformer") else "x"
            out.append((os.path.join(ONNX_FIXTURES, f), feed, os.path.join(ONNX_FIXTURES, m + "_in.npy")))
    if os.path.isdir(NODE_TESTS):
        for d in sorted(os.listdir(NODE_TESTS))[::9]:
            path = os.path.join(NODE_TESTS, d, "model.onnx")
            if os.path.exists(path):
                out.append((path, None, None))
    return out


def mutate_onnx_structured(rng, path, out):
    m = onnx.load(path)
    g = m.graph
    r = rng.random()
    if g.node and r < 0.25:
        n = rng.choice(g.node)
        n.op_type = rng.choice(["Relu", "Gemm", "Conv", "Reshape", "Slice", "Gather", "Concat", "Softmax", "Nope",
                                "MaxPool", "Unsqueeze", "Shape", "Cast", "BatchNormalization", ""])
    elif g.node and r < 0.45:
        n = rng.choice(g.node)
        if n.attribute:
            a = rng.choice(n.attribute)
            if a.ints:
                a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, 2**40, -2**62, 3])
            elif a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([0, -1, 2**40, 99, 1])
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, 1e30, float("nan")])
            else:
                n.attribute.remove(a)
        else:
            n.attribute.add(name=rng.choice(["axis", "perm", "to", "alpha", "zzz"]), i=rng.choice([0, 5, -9]),
                            type=onnx.AttributeProto.INT)
    elif g.node and r < 0.6:
        n = rng.choice(g.node)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(["", "nowhere", n.output[0] if n.output else "x"])
        else:
            n.input.append("nowhere")
    elif g.initializer and r < 0.75:
        t = rng.choice(g.initializer)
        if rng.random() < 0.5 and t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, -1, 2**31, 7])
        else:
            t.data_type = rng.choice([0, 2, 3, 8, 10, 16, 99, 7])
    elif g.input and r < 0.9:
        vi = rng.choice(g.input)
        tt = vi.type.tensor_type
        if tt.shape.dim and rng.random() < 0.5:
            tt.shape.dim[rng.randrange(len(tt.shape.dim))].dim_value = rng.choice([0, 1, 3, 2**40])
        else:
            tt.elem_type = rng.choice([0, 2, 8, 10, 11, 6])
    else:
        for op in m.opset_import:
            op.version = rng.choice([0, 1, 6, 18, 99, -3])
    with open(out, "wb") as f:
        f.write(m.SerializeToString())


def case_onnx(rng, runner, models, work):
    """A damaged ONNX model through the commands."""
    fed = [m for m in models if m[1]]  # the fixtures, with a feed: their runs get past the feed check
    path, feed, npy = rng.choice(fed if fed and rng.random() < 0.6 else models)
    dst = os.path.join(work, "m.onnx")
    if onnx is not None and rng.random() < 0.6:
        try:
            mutate_onnx_structured(rng, path, dst)
        except Exception:  # noqa: BLE001 - a mutation protobuf refuses to serialise: damage the bytes instead
            shutil.copy(path, dst)
            damage_file(rng, dst)
    else:
        shutil.copy(path, dst)
        for _ in range(rng.choice([1, 1, 2, 5])):
            damage_file(rng, dst)
    feeds = ["--feed", "%s=%s" % (feed, npy)] if feed and rng.random() < 0.8 else []
    cmds = [["check", "m.onnx"], ["dot", "m.onnx"],
            ["run", "m.onnx", "--threads", str(rng.choice([1, 2])), "--executor", rng.choice(EXECUTORS)] + feeds,
            ["import", "m.onnx", "-o", "g.json"]]
    if rng.random() < 0.3:
        cmds.append(["transpile", "m.onnx", "-o", "t.json", "--parts", "2"])
    for c in cmds:
        bad, err, rc = runner.run(c, work)
        if bad:
            return bad, c, err
        if c[0] == "import" and rc == 0:
            bad, err, _ = runner.run(["run", "g.json", "--load", "g.safetensors"] + feeds, work)
            if bad:
                return bad, ["run", "g.json", "--load", "g.safetensors"] + feeds, err
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pardo", required=True, help="the binary to fuzz (a sanitizer build)")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="build/fuzz-findings")
    ap.add_argument("--modes", default="mutate,generate,cli,onnx")
    ap.add_argument("--timeout", type=int, default=30, help="seconds a run may take before it counts as a hang")
    a = ap.parse_args()
    pardo = os.path.abspath(a.pardo)
    OPS.extend(line.split()[0] for line in subprocess.run([pardo, "ops"], capture_output=True, text=True)
               .stdout.splitlines() if line.strip())
    rng = random.Random(a.seed)
    runner = Runner(pardo, a.timeout)
    modes = a.modes.split(",")
    top = tempfile.mkdtemp(prefix="pardo-fuzz-")
    found = 0
    try:
        corpus = Corpus(pardo, os.path.join(top, "seeds"))
        for line in corpus.bad:
            print("finding: " + line)
        found += len(corpus.bad)
        specs = op_specs(pardo) if "generate" in modes else None
        onnx_models = onnx_seeds() if "onnx" in modes else []
        if "onnx" in modes and (not onnx_models or "ONNX: built in" not in
                                subprocess.run([pardo, "--version"], capture_output=True, text=True).stdout):
            print("fuzz: onnx cases skipped (no ONNX support in %s, or no models)" % a.pardo)
            modes.remove("onnx")
        print("fuzz: %s, %d seeds, %d cases (%s), seed %d" % (a.pardo, len(corpus.names), a.iterations,
                                                              "/".join(modes), a.seed), flush=True)
        for i in range(a.iterations):
            mode = modes[i % len(modes)]
            work = tempfile.mkdtemp(dir=top)
            if mode == "mutate":
                r = case_mutate(rng, runner, corpus, work)
            elif mode == "generate":
                r = case_generate(rng, runner, specs, work)
            elif mode == "onnx":
                r = case_onnx(rng, runner, onnx_models, work)
            else:
                r = case_cli(rng, runner, corpus, work)
            if r:
                found += 1
                bad, cmd, err = r
                key = hashlib.md5(("%d %d" % (a.seed, i)).encode()).hexdigest()[:8]
                keep = os.path.join(a.out, key)
                shutil.copytree(work, keep, dirs_exist_ok=True)
                with open(os.path.join(keep, "WHY.txt"), "w") as f:
                    f.write("case %d (%s, seed %d): %s\npardo %s\n\n%s" % (i, mode, a.seed, bad, " ".join(cmd), err))
                print("finding %s: %s: pardo %s | %s" % (keep, bad, " ".join(cmd)[:120],
                                                         (err.strip().splitlines() or [""])[0][:160]), flush=True)
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    runs = sum(runner.counts.values())
    status = ", ".join("%s %d: %d" % (k[0] or "-", k[1], n) for k, n in sorted(runner.counts.items()))
    print("fuzz: %d cases, %d pardo runs, %d findings (exit statuses: %s)" % (a.iterations, runs, found, status))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
