#!/bin/sh
# demo.sh - what `make demo` shows: check a graph, fit a linear regression
# with 300 gradient steps, run a two-layer MLP on a batch, then train an MLP
# on the UCI handwritten digits (graphs/make_digits.py) on every core and
# report its accuracy on the 359 held-out images (it must reach 95%).
# Usage: tools/demo.sh PATH/TO/pardo
set -eu
PARDO=${1:-build/pardo}
OUT=$(cd "$(dirname "$PARDO")" && pwd) # the build folder: the transpiled graph and checkpoint go there
PARDO=$OUT/$(basename "$PARDO")
cd "$(dirname "$0")/.."
echo "== pardo check graphs/mlp.json"
"$PARDO" check graphs/mlp.json
echo
echo "== pardo run graphs/linreg.json (300 steps; the data was made with w = [2, -3, 0.5], b = 1)"
"$PARDO" run graphs/linreg.json --feed x=graphs/data/linreg_x.npy --feed y=graphs/data/linreg_y.npy \
    --steps 300 --fetch w --fetch b --fetch loss
echo
echo "== pardo run graphs/mlp.json"
"$PARDO" run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
echo
echo "== pardo transpile graphs/digits_mlp.json (gradients, adam, one part per thread)"
"$PARDO" transpile graphs/digits_mlp.json -o "$OUT/digits_train.json" --backward loss --optimizer adam
echo
echo "== pardo train: 1,438 handwritten digits, 10 epochs, evaluated on 359 others"
"$PARDO" train "$OUT/digits_train.json" \
    --data x=graphs/data/digits_train_x.npy --data y=graphs/data/digits_train_y.npy \
    --eval x=graphs/data/digits_test_x.npy --eval y=graphs/data/digits_test_y.npy \
    --batch-size 32 --epochs 10 --shuffle --seed 1 --save "$OUT/digits.safetensors" | tee "$OUT/digits_train.out"
acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$OUT/digits_train.out")
awk -v a="$acc" 'BEGIN {
    printf "held-out accuracy: %.1f%% (%s)\n", 100 * a, (a >= 0.95) ? "at least 95%, as it should" : "BELOW 95%"
    exit !(a >= 0.95) }'
