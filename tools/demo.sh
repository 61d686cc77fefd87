#!/bin/sh
# demo.sh - what `make demo` shows: check a graph, fit a linear regression
# with 300 gradient steps, and run a two-layer MLP on a batch.
# Usage: tools/demo.sh PATH/TO/pardo
set -eu
PARDO=${1:-build/pardo}
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
