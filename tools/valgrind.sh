#!/bin/sh
# valgrind.sh - what `make valgrind` runs: pardo under valgrind's memcheck,
# failing on any error and on a definite or possible leak (an unjoined
# thread's stack counts as possible). The runs are CPU-only (a CPU run never
# starts the CUDA runtime, even where it is linked):
#   - graphs/mlp.json transpiled (backward, adam) and run 3 steps on 2 threads,
#     with a checkpoint saved and loaded back, and a trace (the default
#     executor, auto: dataflow there), then 2 steps sequential;
#   - graphs/two_tower.json 3 steps with the dataflow executor;
#   - a short `pardo train` of the transpiled digits graph (one epoch, an
#     evaluation, --log, --save, 2 threads, dataflow: the feed stage too);
#   - a bad input (exit 2) and a failing run leave nothing behind either;
#   - where pardo reads ONNX: the transformer export run on 2 threads,
#     imported, and a truncated model refused.
# Usage: tools/valgrind.sh PATH/TO/pardo   (VALGRIND=... to name another valgrind)
set -u
PARDO=${1:?usage: valgrind.sh PATH/TO/pardo}
VALGRIND=${VALGRIND:-valgrind}
if ! command -v "$VALGRIND" >/dev/null 2>&1; then
    echo "valgrind.sh: $VALGRIND not found (apt-get install valgrind)" >&2
    exit 1
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
T=$(mktemp -d /tmp/pardo-valgrind-XXXXXX)
trap 'rm -rf "$T"' EXIT
# the matrix product's pick (ops/gemm_pick.c) runs under memcheck too, into a scratch cache file: its timings
# under valgrind are no measure of this machine, and the user's cache keeps its own
PARDO_GEMM_CACHE=$T/gemm-pick
export PARDO_GEMM_CACHE
D=graphs/data
pass=0
fail=0

# vg NAME CODE ARGS...: pardo ARGS under memcheck exits CODE (9: memcheck found something)
vg() {
    name=$1 code=$2
    shift 2
    "$VALGRIND" --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite,possible -q \
        "$PARDO" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" = "$code" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL: $name: exit $rc, expected $code (9: valgrind found errors)"
        cat "$T/err"
    fi
}

# the graphs are made without valgrind: transpile is not what these runs check
"$PARDO" transpile graphs/mlp.json -o "$T/mlp.json" --backward loss --optimizer adam --lr 0.01 >"$T/out" 2>&1 &&
    "$PARDO" transpile graphs/digits_mlp.json -o "$T/digits.json" --backward loss --optimizer adam >"$T/out" 2>&1 ||
    { echo "valgrind.sh: pardo transpile failed: $(cat "$T/out")"; exit 1; }

FEEDS="--feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy"
vg "run transpiled, 2 threads" 0 run "$T/mlp.json" $FEEDS --threads 2 --steps 3 --fetch loss --save "$T/ck.safetensors" \
    --trace "$T/trace.json"
vg "run --load" 0 run "$T/mlp.json" $FEEDS --threads 2 --load "$T/ck.safetensors" --fetch loss --out "$T/o"
vg "trace summary" 0 trace summary "$T/trace.json"
vg "run transpiled, sequential" 0 run "$T/mlp.json" $FEEDS --threads 2 --steps 2 --executor sequential --fetch loss
vg "run two towers, dataflow" 0 run graphs/two_tower.json --feed x=$D/two_tower_x.npy --threads 2 --steps 3 \
    --executor dataflow
vg "train" 0 train "$T/digits.json" --data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy \
    --eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy --batch-size 128 --epochs 1 --threads 2 \
    --log "$T/log.jsonl" --save "$T/train.safetensors" --executor dataflow
vg "bad feed" 2 run "$T/mlp.json" --feed x=$D/mlp_y.npy --feed y=$D/mlp_y.npy --threads 2
vg "bad graph" 2 check "$T/ck.safetensors"
vg "failing run" 1 run "$T/mlp.json" $FEEDS --threads 2 --trace "$T/no/such/folder/trace.json"
if "$PARDO" --version | grep -q "^ONNX: built in"; then
    F=tests/fixtures/onnx
    vg "run an ONNX model" 0 run $F/transformer.onnx --feed tokens=$F/transformer_in.npy --fetch y --threads 2
    vg "import an ONNX model" 0 import $F/cnn_bn.onnx -o "$T/cnn.json"
    head -c 700 $F/cnn.onnx >"$T/trunc.onnx"
    vg "a truncated ONNX model" 2 check "$T/trunc.onnx"
fi

echo "valgrind: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
