#!/bin/sh
# cli_early_stop_test.sh - `pardo train --early-stop N --save-best CKPT` and
# the training accuracy of a graph with an accuracy op, on the handwritten
# digits: the run stops once N epochs in a row bring no lower eval loss, the
# best checkpoint holds the best epoch's params (its evaluation gives the
# best eval loss again), a resumed run counts on from the checkpoint and
# stops where one straight run does, the epoch line, summary and --log show
# the accuracy, and bad flags exit 2. Usage: tests/cli_early_stop_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-early-stop "$@"

D=graphs/data
DATA="--data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy"
EVAL="--eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy"
# digits_mlp with an accuracy op on its logits, transpiled to 2 parts (the accuracy merged back)
sed 's|{"op": "softmax_cross_entropy", "in": \["logits", "y"\], "out": \["loss"\], "attrs": {"reduction": "mean"}, "role": "loss"}|&,\
        {"op": "accuracy", "in": ["logits", "y"], "out": ["acc"], "role": "forward"}|' graphs/digits_mlp.json >"$T/acc.json"
grep -q '"accuracy"' "$T/acc.json" && ok || bad "the accuracy op was not added to the graph"
G=$T/acc_train.json
expect "transpile" 0 -- transpile "$T/acc.json" -o "$G" --backward loss --optimizer adam --parts 2
TRAIN="train $G $DATA $EVAL --batch-size 64"

# ---- training accuracy ------------------------------------------------------
expect "train with accuracy" 0 -- $TRAIN --epochs 2 --log "$T/a.jsonl"
grep -q "^epoch 2/2: loss [0-9.]*, accuracy 0\.[0-9]*, eval_loss [0-9.]*, eval_accuracy [0-9.]*, lr 0.01, [0-9]* samples/s" "$T/err" &&
    ok || bad "no accuracy in the epoch line: $(cat "$T/err")"
grep -q '^{"epoch": 2, "loss": [0-9.e-]*, "accuracy": 0\.[0-9]*, "eval_loss"' "$T/a.jsonl" && ok ||
    bad "no accuracy in the log: $(cat "$T/a.jsonl")"
acc=$(sed -n 's/^accuracy: \([0-9.]*\)$/\1/p' "$T/out")
awk -v a="$acc" 'BEGIN { exit !(a > 0.85 && a <= 1) }' && ok || bad "training accuracy '$acc' after 2 epochs: $(cat "$T/out")"
# the accuracy is the mean over the epoch's rows of the batches' accuracies: one batch of all rows at --parts 2
# gives the rows-weighted mean of the two parts, which must equal the accuracy of the params before the step
expect "one batch" 0 -- train "$G" $DATA --batch-size 100000 --epochs 1 --save "$T/one.safetensors"
one=$(sed -n 's/^accuracy: \([0-9.]*\)$/\1/p' "$T/out")
expect "the untrained accuracy" 0 -- run "$T/acc.json" --feed x=$D/digits_train_x.npy --feed y=$D/digits_train_y.npy --fetch acc
ref=$(sed -n 's/^acc: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
awk -v a="$one" -v b="$ref" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-4) }' && ok ||
    bad "the one-batch training accuracy $one is not the untrained graph's $ref"
# a graph without an accuracy op prints none
expect "transpile plain" 0 -- transpile graphs/digits_mlp.json -o "$T/plain.json" --backward loss --optimizer adam
expect "train plain" 0 -- train "$T/plain.json" $DATA --batch-size 64 --epochs 1
grep -q "accuracy" "$T/err" "$T/out" && bad "accuracy printed for a graph without one: $(cat "$T/err")" || ok

# ---- early stopping and the best checkpoint ------------------------------------
expect "early stop" 0 "pardo: early stop after epoch" "epochs without a lower eval loss" -- \
    $TRAIN --epochs 60 --early-stop 2 --save-best "$T/best.safetensors" --log "$T/e.jsonl"
[ -s "$T/best.safetensors" ] && ok || bad "no --save-best checkpoint"
stopped=$(wc -l <"$T/e.jsonl")
[ "$stopped" -lt 60 ] && ok || bad "early stop did not stop: $stopped epochs"
# the log's eval losses: the best is the lowest, N = 2 later epochs none lower, every earlier stretch shorter
awk -F'"eval_loss": ' '{ split($2, a, ","); l = a[1] + 0; n++;
        if (n == 1 || l < best) { best = l; at = n; run = 0 } else { run++; if (run >= 2 && n < NR_END) bad = 1 } }
     END { if (run != 2 || bad) exit 1; print best, at }' NR_END="$stopped" "$T/e.jsonl" >"$T/best" && ok ||
    bad "the log does not end after 2 epochs without a lower eval loss: $(cat "$T/e.jsonl")"
best=$(cut -d' ' -f1 "$T/best") at=$(cut -d' ' -f2 "$T/best")
grep -q "^best_eval_loss: [0-9.]* (epoch $at)$" "$T/out" && ok || bad "summary lacks the best epoch $at: $(cat "$T/out")"
# the best checkpoint's params give its eval loss again (evaluated, nothing left to train)
expect "evaluate the best" 0 -- $TRAIN --epochs "$at" --load "$T/best.safetensors"
got=$(sed -n 's/^eval_loss: \([0-9.]*\)$/\1/p' "$T/out")
awk -v a="$got" -v b="$best" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-5 * b + 1e-6) }' && ok ||
    bad "the best checkpoint evaluates to $got, the log's best is $best"
# resumed: the count of epochs without progress is in the checkpoint
half=$((stopped - 1))
expect "first part" 0 -- $TRAIN --epochs "$half" --early-stop 2 --save "$T/r.safetensors" --log "$T/r.jsonl"
expect "resumed part" 0 "pardo: early stop after epoch $stopped" -- $TRAIN --epochs 60 --early-stop 2 \
    --load "$T/r.safetensors" --log "$T/r.jsonl"
strip() { sed 's/, "samples_per_s".*//' "$1"; }
strip "$T/e.jsonl" >"$T/e1"
strip "$T/r.jsonl" >"$T/r1"
cmp -s "$T/e1" "$T/r1" && ok || bad "straight and resumed runs differ: $(diff "$T/e1" "$T/r1" | head -5)"

# ---- bad flags ---------------------------------------------------------------
expect "early stop without eval" 2 "--early-stop needs --eval" -- train "$G" $DATA --batch-size 64 --early-stop 2
expect "save best without eval" 2 "--save-best needs --eval" -- train "$G" $DATA --batch-size 64 --save-best "$T/x.st"
no_file "save best without eval" "$T/x.st"
expect "early stop 0" 2 "--early-stop" -- $TRAIN --early-stop 0
expect "early stop word" 2 "--early-stop" -- $TRAIN --early-stop soon
expect "save best = save" 2 "name the same file" -- $TRAIN --save "$T/s.st" --save-best "$T/s.st"
expect "train --help" 0 -- train --help
stdout_has "train --help" "--early-stop N"
stdout_has "train --help" "--save-best CKPT"
cli_finish
