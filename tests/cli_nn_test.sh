#!/bin/sh
# cli_nn_test.sh - end-to-end tests of the network, loss and optimizer ops
# through the pardo binary: `pardo check` rejects bad window attrs with exit
# status 2 and a message naming file:line:col, the op and the attr; a tiny
# training graph with hand-written gradient ops (conv2d, avg_pool2d,
# mse_loss and their _grad ops, sgd in place) runs; adam runs for 3 steps.
# Usage: tests/cli_nn_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-nn "$@"





# ---- pardo ops ---------------------------------------------------------
expect "ops conv2d" 0 -- ops conv2d
stdout_has "ops conv2d" "dilations"
stdout_has "ops conv2d" "conv2d_grad"
for op in max_pool2d avg_pool2d layer_norm dropout embedding mse_loss accuracy sgd momentum adam; do
    expect "ops $op" 0 -- ops $op
done

# ---- check: bad window attrs, exit 2, file:line:col, op and attr named ----
cat >"$T/pool_big.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 3, 4, 4], "role": "feed"}},
 "ops": [
  {"op": "max_pool2d", "in": ["x"], "out": ["y"], "name": "pool1", "attrs": {"kernel": [5, 2]}}
 ]}]}
G
expect "pool kernel larger than input" 2 "$T/pool_big.json:3:3" "'pool1'" "max_pool2d" "attr 'kernel'" "larger than" -- check "$T/pool_big.json"

cat >"$T/conv_big.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {
   "x": {"dtype": "float32", "shape": [-1, 3, 4, 4], "role": "feed"},
   "w": {"dtype": "float32", "shape": [4, 3, 3, 3], "role": "param", "init": {"fill": "kaiming_uniform", "seed": 1}}},
 "ops": [
  {"op": "relu", "in": ["x"], "out": ["a"]},
  {"op": "conv2d", "in": ["a", "w"], "out": ["y"], "name": "conv1", "attrs": {"dilations": [2, 1]}}
 ]}]}
G
expect "conv kernel larger than input" 2 "$T/conv_big.json:6:3" "'conv1'" "conv2d" "attr 'dilations'" "attr 'pads'" -- check "$T/conv_big.json"

sed 's/"attrs": {"dilations": \[2, 1\]}/"attrs": {"pads": [1, -1, 1, 1]}/' "$T/conv_big.json" >"$T/conv_pad.json"
expect "conv negative pad" 2 "$T/conv_pad.json:6:3" "'conv1'" "conv2d" "attr 'pads'" "negative left pad" -- check "$T/conv_pad.json"
sed 's/"kernel": \[5, 2\]/"kernel": [2, 2], "pads": [0, 0, -1, 0]/' "$T/pool_big.json" >"$T/pool_pad.json"
expect "pool negative pad" 2 "$T/pool_pad.json:3:3" "'pool1'" "attr 'pads'" "negative bottom pad" -- check "$T/pool_pad.json"

# ---- run: one hand-written training step ----------------------------------
# x = 1..9 as [1, 1, 3, 3], w = ones [1, 1, 2, 2]: conv2d gives [[12, 16], [24, 28]],
# avg_pool2d 20, mse_loss against 18 is 4; dloss 1 -> dz 4 -> dy 1 everywhere ->
# dW = the four 2x2 window sums [12, 16, 24, 28]; sgd lr 0.01: w = [0.88, 0.84, 0.76, 0.72]
cat >"$T/train.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {
   "x": {"dtype": "float32", "shape": [1, 1, 3, 3], "value": [1, 2, 3, 4, 5, 6, 7, 8, 9]},
   "target": {"dtype": "float32", "shape": [1, 1, 1, 1], "value": [18]},
   "one": {"dtype": "float32", "shape": [], "value": [1]},
   "lr": {"dtype": "float32", "shape": [], "value": [0.01]},
   "w": {"dtype": "float32", "shape": [1, 1, 2, 2], "role": "param", "init": {"fill": "constant", "value": 1}}},
 "ops": [
  {"op": "conv2d", "in": ["x", "w"], "out": ["y"], "role": "forward"},
  {"op": "avg_pool2d", "in": ["y"], "out": ["z"], "attrs": {"kernel": [2, 2]}, "role": "forward"},
  {"op": "mse_loss", "in": ["z", "target"], "out": ["loss"], "role": "loss"},
  {"op": "mse_loss_grad", "in": ["z", "target", "loss", "one"], "out": ["z@GRAD"], "role": "backward"},
  {"op": "avg_pool2d_grad", "in": ["y", "z", "z@GRAD"], "out": ["y@GRAD"], "attrs": {"kernel": [2, 2]}, "role": "backward"},
  {"op": "conv2d_grad", "in": ["x", "w", "", "y", "y@GRAD"], "out": ["x@GRAD", "w@GRAD"], "role": "backward"},
  {"op": "sgd", "in": ["w", "w@GRAD", "lr"], "out": ["w"], "role": "optimize"}
 ]}]}
G
expect "run train step" 0 -- run "$T/train.json" --fetch loss --fetch w@GRAD --fetch w
stdout_has "run train step" "loss: float32 [] = [4]"
stdout_has "run train step" "w@GRAD: float32 [1, 1, 2, 2] = [12, 16, 24, 28]"
stdout_has "run train step" "w: float32 [1, 1, 2, 2] = [0.88, 0.84, 0.76, 0.72]"
expect "run train steps" 0 -- run "$T/train.json" --steps 5 --fetch loss --save "$T/train.safetensors"
if grep -qF "loss: float32 [] = [4]" "$T/out"; then bad "train: the loss did not move in 5 steps: $(cat "$T/out")"; else ok; fi

# ---- run: adam, 3 steps, in place -------------------------------------------
# a constant gradient moves each element by lr * sign(g) per step (bias
# correction makes m_hat = g, v_hat = g^2): p = 1 - 3 * 0.1 * sign(g)
cat >"$T/adam.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {
   "p": {"dtype": "float32", "shape": [3], "role": "param", "init": {"fill": "constant", "value": 1}},
   "g": {"dtype": "float32", "shape": [3], "value": [0.5, -2, 0.25]},
   "m": {"dtype": "float32", "shape": [3], "role": "state", "init": {"fill": "constant", "value": 0}},
   "v": {"dtype": "float32", "shape": [3], "role": "state", "init": {"fill": "constant", "value": 0}},
   "t": {"dtype": "int64", "shape": [], "role": "state", "init": {"fill": "constant", "value": 0}},
   "lr": {"dtype": "float32", "shape": [], "value": [0.1]}},
 "ops": [
  {"op": "adam", "in": ["p", "g", "m", "v", "t", "lr"], "out": ["p", "m", "v", "t"], "role": "optimize"}
 ]}]}
G
expect "run adam 3 steps" 0 -- run "$T/adam.json" --steps 3 --fetch p --fetch t --fetch m --save "$T/adam.safetensors"
stdout_has "run adam 3 steps" "p: float32 [3] = [0.7, 1.3, 0.7]"
stdout_has "run adam 3 steps" "t: int64 [] = [3]"
stdout_has "run adam 3 steps" "m: float32 [3] = [0.1355, -0.542, 0.06775]"
# the state resumes from the checkpoint: 3 more steps continue from step 3
expect "run adam resumed" 0 -- run "$T/adam.json" --steps 3 --load "$T/adam.safetensors" --fetch p --fetch t
stdout_has "run adam resumed" "t: int64 [] = [6]"
stdout_has "run adam resumed" "p: float32 [3] = [0.4, 1.6, 0.4]"

# ---- run: an out-of-range embedding index fails at run time ------------------
cat >"$T/emb.json" <<'G'
{"pardo": 1, "blocks": [{"vars": {
   "w": {"dtype": "float32", "shape": [4, 2], "role": "param", "init": {"fill": "normal", "seed": 3}},
   "i": {"dtype": "int64", "shape": [3], "value": [0, 3, 4]}},
 "ops": [{"op": "embedding", "in": ["w", "i"], "out": ["e"], "name": "emb"}]}]}
G
expect "embedding index out of range" 1 "'emb'" "'indices' [2]" "is 4" "[0, 4)" -- run "$T/emb.json" --out "$T/emb_out"
if [ -e "$T/emb_out" ]; then bad "embedding index out of range: $T/emb_out was written"; else ok; fi

cli_finish
