#!/bin/sh
# cli_transpile_test.sh - `pardo transpile` end to end: autodiff, optimizers
# and the multi-CPU rewrite written as a graph that checks and runs, results
# that do not depend on the thread count, and bad requests (exit 2, nothing
# written). Usage: tests/cli_transpile_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-transpile "$@"

FEEDS="--feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy"

for opt in sgd momentum adam; do
    expect "transpile $opt" 0 "wrote $T/$opt.json" -- transpile graphs/mlp.json -o "$T/$opt.json" --backward loss --optimizer $opt --lr 0.05 --parts 2
    expect "check $opt" 0 -- check "$T/$opt.json"
    stdout_has "check $opt" "parallel_do"
    stdout_has "check $opt" "w1@GRAD@PARTS"
    stdout_has "check $opt" "x@PARTS"
    stdout_has "check $opt" "[optimize]"
    # fixed --parts: the same numbers, bit for bit, on 1, 2 and 4 threads
    for t in 1 2 4; do
        expect "run $opt threads $t" 0 -- run "$T/$opt.json" $FEEDS --steps 5 --threads $t --fetch loss --fetch b2
        cp "$T/out" "$T/$opt.$t.out"
    done
    if cmp -s "$T/$opt.1.out" "$T/$opt.2.out" && cmp -s "$T/$opt.1.out" "$T/$opt.4.out"; then ok; else
        bad "$opt: results differ across thread counts: $(cat "$T/$opt.1.out" "$T/$opt.2.out" "$T/$opt.4.out")"
    fi
done
grep -q '"w1@MOMENT1"' "$T/adam.json" && ok || bad "adam.json lacks the state var w1@MOMENT1"

# dot of a transpiled graph: gradient ops leave outputs out (""), which are no nodes
expect "dot transpiled" 0 -- dot "$T/sgd.json"
stdout_has "dot transpiled" '-> "v1:w1@GRAD"'
if grep -qE '"v[0-9]+:"' "$T/out"; then bad "dot draws a node for an absent output: $(grep -E '"v[0-9]+:"' "$T/out")"; else ok; fi

# training lowers the loss: 1 step against 40
expect "one step" 0 -- run "$T/sgd.json" $FEEDS --steps 1 --fetch loss
first=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
expect "forty steps" 0 -- run "$T/sgd.json" $FEEDS --steps 40 --fetch loss
last=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 4) }'; then ok; else bad "loss did not fall: $first -> $last"; fi

# adam's state goes into the checkpoint and comes back
expect "adam save" 0 -- run "$T/adam.json" $FEEDS --steps 3 --save "$T/adam.safetensors"
if grep -q 'w1@MOMENT2' "$T/adam.safetensors" && grep -q 'w1@STEP' "$T/adam.safetensors"; then ok; else bad "checkpoint lacks adam state"; fi
expect "adam resume" 0 -- run "$T/adam.json" $FEEDS --steps 2 --load "$T/adam.safetensors" --fetch w1@STEP
stdout_has "adam resume" "w1@STEP: int64 [] = [5]"

# an inference graph: outputs concatenated, same as single-thread
expect "transpile inference" 0 -- transpile graphs/mlp.json -o "$T/inf.json" --parts 3
expect "run inference" 0 -- run "$T/inf.json" $FEEDS --threads 2 --fetch probs
cp "$T/out" "$T/inf.out"
expect "run single" 0 -- run graphs/mlp.json $FEEDS --fetch probs
if cmp -s "$T/out" "$T/inf.out"; then ok; else bad "inference output differs: $(cat "$T/out" "$T/inf.out")"; fi

# bad requests: exit 2, the reason, no file
expect "already transpiled" 2 "already transpiled" -- transpile "$T/sgd.json" -o "$T/again.json"
# the ONNX families' differentiable ops train too: --backward through prelu, elu, mish, max, sin, cumsum and
# two of the new reductions (tests/fixtures/onnx_family_ops.json; its feed is arbitrary numbers as CSV)
# trains_down NAME FAMILY: tests/fixtures/FAMILY_ops.json transpiled with --backward at 2 parts, its loss after 10
# steps on FAMILY_x.csv under half the loss of 1 step
trains_down() {
    expect "transpile $1" 0 "wrote $T/$2.json" -- transpile "tests/fixtures/$2_ops.json" -o "$T/$2.json" \
        --backward loss --optimizer sgd --lr 0.01 --parts 2
    expect "$1 one step" 0 -- run "$T/$2.json" --feed x="tests/fixtures/$2_x.csv" --steps 1 --threads 2 --fetch loss
    first=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
    expect "$1 ten steps" 0 -- run "$T/$2.json" --feed x="tests/fixtures/$2_x.csv" --steps 10 --threads 2 --fetch loss
    last=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
    if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }'; then ok; else bad "$1 loss did not fall: $first -> $last"; fi
}
trains_down "onnx family ops" onnx_family

# the N-d convolutions and pools train too: --backward through conv_nd, conv_transpose, max_pool_nd and avg_pool_nd
# of 1 spatial dim (tests/fixtures/conv_family_ops.json; its feed is arbitrary numbers as CSV)
trains_down "conv family ops" conv_family

no_file "already transpiled" "$T/again.json"
expect "unknown loss" 2 "no var 'lost'" -- transpile graphs/mlp.json -o "$T/e1.json" --backward lost
no_file "unknown loss" "$T/e1.json"
expect "loss not scalar" 2 "float scalar" "probs" -- transpile graphs/mlp.json -o "$T/e2.json" --backward probs
expect "optimizer without gradients" 2 "no param has a gradient" -- transpile graphs/mlp.json -o "$T/e3.json" --optimizer sgd
expect "unknown optimizer" 2 "--optimizer expects sgd, momentum, adam or adamw" -- transpile graphs/mlp.json -o "$T/e4.json" --optimizer rmsprop
expect "missing -o" 2 "missing -o OUT" -- transpile graphs/mlp.json
expect "bad --lr" 2 "--lr expects a number" -- transpile graphs/mlp.json -o "$T/e5.json" --backward loss --optimizer sgd --lr fast
expect "bad --parts" 2 "--parts expects an integer" -- transpile graphs/mlp.json -o "$T/e6.json" --parts -1
expect "--nesterov without momentum" 2 "--nesterov needs --optimizer momentum" -- transpile graphs/mlp.json -o "$T/e7.json" --backward loss --optimizer sgd --nesterov
expect "--no-parallel with --parts" 2 "--no-parallel makes no parts" -- transpile graphs/mlp.json -o "$T/e8.json" --backward loss --optimizer sgd --no-parallel --parts 2
expect "transpile --help" 0 -- transpile --help
stdout_has "transpile --help" "usage: pardo transpile"
for f in e1 e2 e3 e4 e5 e6 e7 e8; do no_file "$f" "$T/$f.json"; done

# --no-parallel: the single-thread training graph (one block, no split / parallel_do / merge), which trains the
# digits as the data-parallel one does
expect "transpile --no-parallel" 0 "wrote $T/single.json (" "in block 0, 0 in block 1)" -- transpile graphs/digits_mlp.json -o "$T/single.json" --backward loss --optimizer adam --lr 0.01 --no-parallel
if grep -q '"parallel_do"\|"split"\|"merge"' "$T/single.json"; then bad "--no-parallel wrote a parallel op"; else ok; fi
expect "train the --no-parallel graph" 0 -- train "$T/single.json" --data x=graphs/data/digits_train_x.npy --data y=graphs/data/digits_train_y.npy --eval x=graphs/data/digits_test_x.npy --eval y=graphs/data/digits_test_y.npy --batch-size 32 --epochs 5 --shuffle --seed 1 --threads 1
acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$T/out")
if awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }'; then ok; else bad "the --no-parallel graph's held-out accuracy: '$acc' (at least 0.9 expected): $(tail -3 "$T/out")"; fi

cli_finish
