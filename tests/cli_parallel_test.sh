#!/bin/sh
# cli_parallel_test.sh - end-to-end tests of the parallel ops through the
# pardo binary: graphs/mlp_parallel.json prints the same results at
# --threads 1, 2 and 4 and the same as graphs/mlp.json; with a fixed part
# count the output is identical to the last bit; tensor_arrays print part by
# part; a nested parallel_do is rejected by `pardo check` with exit 2.
# Usage: tests/cli_parallel_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-parallel "$@"


G=graphs/mlp_parallel.json
FEEDS="--feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy"

# run_to NAME FILE ARGS...: pardo ARGS, stdout to FILE, exit 0 expected
run_to() {
    name=$1 file=$2
    shift 2
    if "$PARDO" "$@" >"$file" 2>"$T/err"; then ok; else bad "$name: exit $?: $(cat "$T/err")"; fi
}

same() {
    if cmp -s "$2" "$3"; then ok; else bad "$1: outputs differ:"; diff "$2" "$3" | head -10; fi
}

# the same printed results at 1, 2 and 4 threads (parts = the thread count)
for t in 1 2 4; do
    run_to "run --threads $t" "$T/out$t" run $G $FEEDS --threads $t
done
same "threads 1 vs 2" "$T/out1" "$T/out2"
same "threads 1 vs 4" "$T/out1" "$T/out4"
if grep -q "^probs: float32 \[16, 10\]" "$T/out1" && grep -q "^logits: float32 \[16, 10\]" "$T/out1" &&
    grep -q "^loss: float32 \[\]" "$T/out1"; then ok; else bad "default fetches: $(cat "$T/out1")"; fi

# the same as the single-thread graph
run_to "mlp.json" "$T/single" run graphs/mlp.json $FEEDS --fetch logits --fetch probs --fetch loss
same "mlp_parallel vs mlp" "$T/single" "$T/out2"

# a fixed part count: identical whatever the thread count, and env sizes the pool
sed 's/"parts": 0/"parts": 3/g' $G >"$T/fixed.json"
run_to "fixed parts, 1 thread" "$T/f1" run "$T/fixed.json" $FEEDS --threads 1 --fetch loss --fetch loss_parts
run_to "fixed parts, 4 threads" "$T/f4" run "$T/fixed.json" $FEEDS --threads 4 --fetch loss --fetch loss_parts
PARDO_NUM_THREADS=2 run_to "fixed parts, PARDO_NUM_THREADS=2" "$T/fe" run "$T/fixed.json" $FEEDS --fetch loss --fetch loss_parts
same "fixed parts 1 vs 4 threads" "$T/f1" "$T/f4"
same "fixed parts 1 thread vs env" "$T/f1" "$T/fe"
# 16 rows over 3 parts: 6, 5, 5 - each part's loss on its own line
if [ "$(grep -c '^loss_parts\[[0-2]\]: float32 \[\]' "$T/f1")" = 3 ]; then ok; else bad "loss_parts per part: $(cat "$T/f1")"; fi

# tensor_arrays saved part by part
run_to "--out with a tensor_array" "$T/o" run "$T/fixed.json" $FEEDS --threads 2 --fetch xs --out "$T/dir"
for i in 0 1 2; do
    if [ -s "$T/dir/xs.part$i.npy" ]; then ok; else bad "$T/dir/xs.part$i.npy missing"; fi
done
if grep -q "^xs\[0\]: float32 \[6, 64\]" "$T/o" && grep -q "^xs\[2\]: float32 \[5, 64\]" "$T/o"; then ok; else bad "xs parts: $(cat "$T/o")"; fi

# check shows the parallel block and its inferred parts
run_to "check" "$T/check" check $G
if grep -q "block 1 (parent 0)" "$T/check" && grep -q "logits_parts .*tensor_array" "$T/check"; then ok; else bad "check: $(cat "$T/check")"; fi

# a nested parallel_do is an error at load naming both ops: exit 2
cat >"$T/nested.json" <<'EOF'
{"pardo": 1, "blocks": [
 {"vars": {"x": {"dtype": "float32", "shape": [-1, 4], "role": "feed"}},
  "ops": [{"op": "split", "in": ["x"], "out": ["xs"]},
          {"op": "parallel_do", "name": "outer", "in": ["xs"], "out": ["ys"],
           "attrs": {"block": 1, "parts_in": {"xp": "xs"}, "parts_out": {"yp": "ys"}}}]},
 {"parent": 0, "vars": {},
  "ops": [{"op": "split", "in": ["xp"], "out": ["inner_parts"]},
          {"op": "parallel_do", "name": "inner", "in": ["inner_parts"], "out": ["zs"],
           "attrs": {"block": 2, "parts_in": {"z": "inner_parts"}, "parts_out": {"z": "zs"}}},
          {"op": "relu", "in": ["xp"], "out": ["yp"]}]},
 {"parent": 1, "vars": {}, "ops": []}]}
EOF
"$PARDO" check "$T/nested.json" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 2 ] && grep -qF "nested.json:" "$T/err" && grep -qF "'inner' (parallel_do)" "$T/err" &&
    grep -qF "'outer' (parallel_do)" "$T/err" && grep -qF "nested parallel_do" "$T/err"; then ok; else
    bad "nested check: exit $rc, stderr: $(cat "$T/err")"
fi
"$PARDO" run "$T/nested.json" --feed x=graphs/data/mlp_x.npy >"$T/out" 2>"$T/err"
if [ $? = 2 ]; then ok; else bad "nested run: not exit 2: $(cat "$T/err")"; fi

# --threads beyond the pool's limit is bad usage
"$PARDO" run $G $FEEDS --threads 100000 >"$T/out" 2>"$T/err"
if [ $? = 2 ] && grep -qF -- "--threads" "$T/err"; then ok; else bad "--threads 100000: $(cat "$T/err")"; fi

cli_finish
