#!/bin/sh
# cli_train_test.sh - `pardo train` end to end on the handwritten digits
# (graphs/data/digits_*.npy): held-out accuracy of at least 95%, the same
# losses from the same seed, a run stopped by SIGINT or SIGTERM that writes
# its checkpoint, exits 130 and resumes to the very params of a run never
# stopped, a second SIGINT that leaves at once, loader errors before any
# step (exit 2, naming the file), a step error that stops the loader too
# (exit 1), and bad flags (exit 2). Usage: tests/cli_train_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-train "$@"
no_step() { if grep -q "^epoch " "$T/err"; then bad "$1: an epoch ran: $(cat "$T/err")"; else ok; fi; }

D=graphs/data
DATA="--data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy"
EVAL="--eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy"
G=$T/digits_train.json
expect "transpile" 0 -- transpile graphs/digits_mlp.json -o "$G" --backward loss --optimizer adam
expect "train --help" 0 -- train --help
stdout_has "train --help" "usage: pardo train"
expect "main usage lists train" 0 -- --help
stdout_has "main usage lists train" "train GRAPH --data"

# ---- accuracy on held-out digits ----------------------------------------
expect "train digits" 0 -- train "$G" $DATA $EVAL --batch-size 32 --epochs 10 --shuffle --seed 1 --threads 2 \
    --log "$T/a.jsonl" --save "$T/a.safetensors"
acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$T/out")
if [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }'; then ok; else bad "held-out accuracy '$acc' < 0.95: $(cat "$T/out")"; fi
stdout_has "train digits" "trained 450 steps"
grep -q "^epoch 10/10: loss [0-9.]*, eval_loss [0-9.]*, eval_accuracy [0-9.]*, lr 0.01, [0-9]* samples/s, [0-9.]* s$" "$T/err" && ok ||
    bad "no plain epoch line: $(cat "$T/err")"
[ "$(wc -l <"$T/a.jsonl")" -eq 10 ] && ok || bad "log has $(wc -l <"$T/a.jsonl") lines, expected 10"
grep -q '^{"epoch": 10, "loss": [0-9.e-]*, "accuracy": null, "eval_loss": [0-9.e-]*, "eval_accuracy": [0-9.e-]*, "lr": 0.0099[0-9]*, "samples_per_s": [0-9.]*, "seconds": [0-9.]*}$' "$T/a.jsonl" &&
    ok || bad "log line format: $(tail -1 "$T/a.jsonl")"
# the checkpoint loads into the inference graph; its held-out loss is the evaluation's
expect "run the trained params" 0 -- run graphs/digits_mlp.json --load "$T/a.safetensors" \
    --feed x=$D/digits_test_x.npy --feed y=$D/digits_test_y.npy --fetch loss
run_loss=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
eval_loss=$(sed -n 's/.*"epoch": 10, .*"eval_loss": \([0-9.e-]*\),.*/\1/p' "$T/a.jsonl")
awk -v a="$run_loss" -v b="$eval_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-4 * b + 1e-6) }' && ok ||
    bad "eval_loss $eval_loss differs from the inference graph's loss $run_loss"
grep -q '"pardo@epoch"' "$T/a.safetensors" && ok || bad "the checkpoint lacks pardo@epoch"

# ---- the same seed, the same losses -------------------------------------
strip_times() { sed 's/, "samples_per_s".*//' "$1"; }
expect "seed run 1" 0 -- train "$G" $DATA $EVAL --batch-size 50 --epochs 3 --shuffle --seed 5 --log "$T/s1.jsonl"
expect "seed run 2" 0 -- train "$G" $DATA $EVAL --batch-size 50 --epochs 3 --shuffle --seed 5 --log "$T/s2.jsonl" --threads 2
expect "seed run 3" 0 -- train "$G" $DATA $EVAL --batch-size 50 --epochs 3 --shuffle --seed 6 --log "$T/s3.jsonl" --threads 2
strip_times "$T/s1.jsonl" >"$T/s1"
strip_times "$T/s2.jsonl" >"$T/s2"
strip_times "$T/s3.jsonl" >"$T/s3"
cmp -s "$T/s1" "$T/s2" && ok || bad "seed 5 twice, losses differ: $(cat "$T/s1" "$T/s2")"
cmp -s "$T/s1" "$T/s3" && bad "seeds 5 and 6 give the same losses" || ok
# --device cuda: on a GPU where there is one; without one (or without CUDA) the same run on the CPU, said once
if "$PARDO" --version | grep -q '^CUDA: built in' && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "cli-train: a GPU is here: tools/gpu_check.sh compares its training with the CPU's"
else
    expect "seed run, --device cuda without a GPU" 0 "running on the CPU" -- train "$G" $DATA $EVAL --batch-size 50 --epochs 3 --shuffle --seed 5 --log "$T/s4.jsonl" --device cuda
    strip_times "$T/s4.jsonl" >"$T/s4"
    cmp -s "$T/s1" "$T/s4" && ok || bad "--device cuda without a GPU, losses differ: $(cat "$T/s1" "$T/s4")"
fi
expect "bad --device" 2 "--device expects cpu, cuda or cuda:K, got 'gpu'" -- train "$G" $DATA --batch-size 32 --device gpu
# file order, and the last partial batch dropped
expect "no shuffle" 0 -- train "$G" $DATA --batch-size 32 --epochs 2
stdout_has "no shuffle" "trained 90 steps"
expect "drop last" 0 -- train "$G" $DATA --batch-size 32 --epochs 2 --drop-last
stdout_has "drop last" "trained 88 steps"

# ---- SIGINT: finish the step, save, exit 130; resume to the same params --
RUN="$G $DATA --batch-size 2 --epochs 4 --shuffle --seed 9 --threads 2"
fetch_params() { # CKPT DIR: saves w1 b1 w2 b2 from the checkpoint as DIR/*.npy
    "$PARDO" run graphs/digits_mlp.json --load "$1" --feed x=$D/digits_test_x.npy --feed y=$D/digits_test_y.npy \
        --fetch w1 --fetch b1 --fetch w2 --fetch b2 --out "$2" >/dev/null 2>"$T/fetch.err"
}
# wait_line FILE: until a first epoch line is in FILE (at most ~60 s)
wait_line() {
    i=0
    while ! grep -q "^epoch 1/" "$1" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
}
expect "uninterrupted" 0 -- train $RUN --save "$T/full.safetensors"
fetch_params "$T/full.safetensors" "$T/full" && ok || bad "fetch full: $(cat "$T/fetch.err")"
"$PARDO" train $RUN --save "$T/stop.safetensors" >"$T/stop.out" 2>"$T/stop.err" &
pid=$!
wait_line "$T/stop.err"
sleep 0.05
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] && ok || bad "SIGINT: exit $rc, expected 130: $(cat "$T/stop.err")"
grep -q "stopped in epoch" "$T/stop.err" && ok || bad "SIGINT: no stop message: $(cat "$T/stop.err")"
grep -q "after batch [1-9]" "$T/stop.err" || echo "note: the SIGINT landed on an epoch boundary: $(grep stopped "$T/stop.err")"
fetch_params "$T/stop.safetensors" "$T/stopped" && ok || bad "the stopped checkpoint does not load: $(cat "$T/fetch.err")"
expect "resume" 0 -- train $RUN --load "$T/stop.safetensors" --save "$T/resumed.safetensors"
stdout_has "resume" "4/4 epochs done"
fetch_params "$T/resumed.safetensors" "$T/resumed" && ok || bad "fetch resumed: $(cat "$T/fetch.err")"
for v in w1 b1 w2 b2; do
    cmp -s "$T/full/$v.npy" "$T/resumed/$v.npy" && ok || bad "resumed $v differs from the uninterrupted run's"
done
cmp -s "$T/full.safetensors" "$T/resumed.safetensors" && ok || bad "the resumed checkpoint differs from the uninterrupted one"
# a mid-epoch checkpoint resumes only with the batches it was cut from
if grep -q "after batch [1-9]" "$T/stop.err"; then
    expect "resume with another batch size" 2 "stop.safetensors" "--batch-size" -- \
        train "$G" $DATA --batch-size 4 --epochs 4 --shuffle --seed 9 --load "$T/stop.safetensors"
fi
# SIGTERM does the same
"$PARDO" train $RUN --save "$T/term.safetensors" >"$T/term.out" 2>"$T/term.err" &
pid=$!
wait_line "$T/term.err"
kill -TERM $pid
wait $pid
rc=$?
[ "$rc" = 130 ] && ok || bad "SIGTERM: exit $rc, expected 130: $(cat "$T/term.err")"
fetch_params "$T/term.safetensors" "$T/term" && ok || bad "the SIGTERM checkpoint does not load: $(cat "$T/fetch.err")"
# a second SIGINT leaves at once, and leaves no torn checkpoint
"$PARDO" train $RUN --epochs 1000 --save "$T/twice.safetensors" >"$T/twice.out" 2>"$T/twice.err" &
pid=$!
wait_line "$T/twice.err"
kill -INT $pid
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] && ok || bad "two SIGINTs: exit $rc, expected 130: $(cat "$T/twice.err")"
if [ -e "$T/twice.safetensors" ]; then
    fetch_params "$T/twice.safetensors" "$T/twice" && ok || bad "torn checkpoint after two SIGINTs: $(cat "$T/fetch.err")"
fi

# ---- errors: the loader's before any step (2), a step's (1), flags (2) ---
cp $D/mlp_y.npy "$T/short_y.npy" # 16 rows
expect "short second file" 2 "short_y.npy" "16 rows" -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/short_y.npy" --batch-size 32 --save "$T/e1.st"
no_step "short second file"
no_file "short second file" "$T/e1.st"
echo "not an array" >"$T/text.npy"
expect "not .npy" 2 "text.npy" "not a .npy file" -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/text.npy" --batch-size 32 --save "$T/e2.st"
no_step "not .npy"
no_file "not .npy" "$T/e2.st"
expect "missing file" 2 "nothere.npy" -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/nothere.npy" --batch-size 32
expect "wrong dtype" 2 "digits_train_x.npy" "float32" "int64" -- train "$G" --data x=$D/digits_train_x.npy --data y=$D/digits_train_x.npy --batch-size 32
expect "feed without data" 2 "'y' has no data" -- train "$G" --data x=$D/digits_train_x.npy --batch-size 32
expect "data for no feed" 2 "no feed var 'w1'" -- train "$G" $DATA --data w1=$D/digits_train_y.npy --batch-size 32
expect "eval without labels" 2 "--eval y=" -- train "$G" $DATA --eval x=$D/digits_test_x.npy --batch-size 32
# labels out of range: softmax_cross_entropy fails inside a step; the loader stops too
cp $D/digits_train_y.npy "$T/bad_y.npy"
printf '\014' | dd of="$T/bad_y.npy" bs=1 seek=$((128 + 100 * 8)) conv=notrunc 2>/dev/null
expect "label out of range" 1 "label 12" "softmax_cross_entropy" -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/bad_y.npy" --batch-size 32 --epochs 3 --save "$T/e3.st" --log "$T/e3.jsonl"
no_file "label out of range" "$T/e3.st"
no_file "label out of range: no empty --log" "$T/e3.jsonl"
# a log that had records keeps them when a later run fails before its first epoch
printf '{"epoch": 1}\n' >"$T/kept.jsonl"
expect "failing train, a log kept" 1 "label 12" -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/bad_y.npy" --batch-size 32 --log "$T/kept.jsonl"
if [ "$(cat "$T/kept.jsonl")" = '{"epoch": 1}' ]; then ok; else bad "the existing --log changed: $(cat "$T/kept.jsonl")"; fi
expect "unknown flag" 2 "unknown flag '--frobnicate'" -- train "$G" $DATA --batch-size 32 --frobnicate
expect "batch size 0" 2 "--batch-size expects an integer" -- train "$G" $DATA --batch-size 0
expect "no batch size" 2 "missing --batch-size" -- train "$G" $DATA
expect "no data" 2 "missing --data" -- train "$G" --batch-size 32
expect "seed without shuffle" 2 "--seed needs --shuffle" -- train "$G" $DATA --batch-size 32 --seed 3
expect "epochs 0" 2 "--epochs expects an integer" -- train "$G" $DATA --batch-size 32 --epochs 0
expect "not a training graph" 2 "no op has role \"optimize\"" -- train graphs/digits_mlp.json $DATA --batch-size 32
expect "bad --loss" 2 "'w1'" "param" -- train "$G" $DATA --batch-size 32 --loss w1
expect "bad checkpoint" 2 "text.npy" -- train "$G" $DATA --batch-size 32 --load "$T/text.npy"

# ---- traces of a training run: ops, parts, stages and the loader's batches ----
expect "train --trace" 0 -- train "$G" $DATA --batch-size 64 --epochs 1 --threads 2 --trace "$T/train.trace.json"
expect "trace summary of train" 0 -- trace summary "$T/train.trace.json"
stdout_has "trace summary of train" "loader/loader"
stdout_has "trace summary of train" "parallel_do"
stdout_has "trace summary of train" "pardo train"
grep -q '"name": *"thread_name"' "$T/train.trace.json" && grep -q '"loader"' "$T/train.trace.json" && ok ||
    bad "the trace names no loader thread"
# an evaluation per epoch: each one's loader thread is a lane of its own name, none named twice
expect "train --eval --trace" 0 -- train "$G" $DATA $EVAL --batch-size 64 --epochs 2 --threads 2 --trace "$T/eval.trace.json"
grep -o '"name": *"thread_name"[^}]*"args": *{"name": *"[^"]*"' "$T/eval.trace.json" | sed 's/.*"name": *"//; s/"$//' | sort >"$T/lanes"
if [ -z "$(uniq -d "$T/lanes")" ] && grep -qx "eval loader, epoch 1" "$T/lanes" && grep -qx "eval loader, epoch 2" "$T/lanes"; then ok
else bad "trace lanes named twice, or no eval loader's: $(cat "$T/lanes")"; fi
expect "trace summary of train --eval" 0 -- trace summary "$T/eval.trace.json"
stdout_has "trace summary of train --eval" "loader/eval loader "
expect "train --profile" 0 "per op type" "adam" -- train "$G" $DATA --batch-size 64 --epochs 1 --profile
expect "train --trace into a missing folder" 1 "$T/nope/t.json" -- train "$G" $DATA --batch-size 64 --trace "$T/nope/t.json"
expect "failing train still traces" 1 -- train "$G" --data x=$D/digits_train_x.npy --data y="$T/bad_y.npy" --batch-size 64 --trace "$T/fail.trace.json"
expect "failed trace reads" 0 -- trace summary "$T/fail.trace.json"
stdout_has "failed trace reads" "failed"

cli_finish
