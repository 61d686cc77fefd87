#!/bin/sh
# cli_lr_test.sh - the learning rate at train time and the optimizer flags:
# `pardo train --lr X` replaces the graph's rate (the same training as a
# graph transpiled with that rate), in graphs of today (a state var) and of
# older pardo (a constant var); `--lr-schedule` and `--warmup-steps` give
# the epoch line's and the log's lr, and a resumed run goes on with the
# schedule to the very losses of a straight one; `pardo transpile
# --optimizer adamw --weight-decay X --clip-grad-norm X` writes the ops that
# train the digits; bad values exit 2. Usage: tests/cli_lr_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-lr "$@"

D=graphs/data
DATA="--data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy"
EVAL="--eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy"
strip() { sed 's/, "samples_per_s".*//' "$1"; }

expect "transpile lr 0.01" 0 -- transpile graphs/digits_mlp.json -o "$T/a.json" --backward loss --optimizer adam --parts 2
expect "transpile lr 0.003" 0 -- transpile graphs/digits_mlp.json -o "$T/b.json" --backward loss --optimizer adam \
    --parts 2 --lr 0.003
grep -q '"learning_rate": {"dtype": "float32", "shape": \[\], "role": "state", "init": {"fill": "constant", "value": 0.003}}' \
    "$T/b.json" && ok || bad "the rate is not a state var: $(grep learning_rate "$T/b.json" | head -1)"

# ---- --lr replaces the graph's rate --------------------------------------------
expect "train b" 0 -- train "$T/b.json" $DATA --batch-size 64 --epochs 2 --log "$T/b.jsonl"
expect "train a --lr 0.003" 0 -- train "$T/a.json" $DATA --batch-size 64 --epochs 2 --lr 0.003 --log "$T/a.jsonl"
strip "$T/a.jsonl" >"$T/a1"
strip "$T/b.jsonl" >"$T/b1"
cmp -s "$T/a1" "$T/b1" && ok || bad "--lr 0.003 trains otherwise than a graph made with it: $(cat "$T/a1" "$T/b1")"
grep -q '"lr": 0.00300000003' "$T/a.jsonl" && ok || bad "no lr in the log: $(cat "$T/a.jsonl")"
grep -q "^epoch 2/2: loss [0-9.]*, lr 0.003, " "$T/err" && ok || bad "no lr in the epoch line: $(cat "$T/err")"
# an older graph: the rate a constant var with a value
sed 's/"learning_rate": {"dtype": "float32", "shape": \[\], "role": "state", "init": {"fill": "constant", "value": 0.01}}/"learning_rate": {"dtype": "float32", "shape": [], "value": 0.01}/' \
    "$T/a.json" >"$T/old.json"
grep -q '"learning_rate": {"dtype": "float32", "shape": \[\], "value": 0.01}' "$T/old.json" && ok || bad "sed made no old graph"
expect "train an older graph --lr 0.003" 0 -- train "$T/old.json" $DATA --batch-size 64 --epochs 2 --lr 0.003 \
    --log "$T/old.jsonl"
strip "$T/old.jsonl" >"$T/old1"
cmp -s "$T/old1" "$T/b1" && ok || bad "--lr on an older graph trains otherwise: $(cat "$T/old1")"

# ---- schedules ---------------------------------------------------------------
SCHED="--lr 0.01 --lr-schedule cosine --warmup-steps 5"
expect "cosine straight" 0 -- train "$T/a.json" $DATA $EVAL --batch-size 64 --epochs 4 $SCHED --log "$T/s.jsonl"
# 23 steps an epoch, 92 in all: epoch 2's last step (45) has 0.01 (1 + cos(pi 40 / 87)) / 2 = 0.0056302
awk -F'"lr": ' 'NR == 2 { split($2, a, ","); exit !(a[1] > 0.005629 && a[1] < 0.005632) }' "$T/s.jsonl" && ok ||
    bad "epoch 2's rate is not cosine's: $(sed -n 2p "$T/s.jsonl")"
awk -F'"lr": ' 'NR == 4 { split($2, a, ","); exit !(a[1] > 0 && a[1] < 1e-4) }' "$T/s.jsonl" && ok ||
    bad "the last rate is not near 0: $(sed -n 4p "$T/s.jsonl")"
# stopped by SIGINT mid-run and resumed: the schedule goes on from the checkpoint's step count
RUN="$T/a.json $DATA --batch-size 16 --epochs 30 $SCHED"
expect "cosine, 30 epochs" 0 -- train $RUN --save "$T/full.safetensors"
"$PARDO" train $RUN --save "$T/stop.safetensors" >"$T/stop.out" 2>"$T/stop.err" &
pid=$!
i=0
while ! grep -q "^epoch 1/" "$T/stop.err" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] && ok || bad "SIGINT: exit $rc, expected 130: $(cat "$T/stop.err")"
expect "cosine resumed" 0 -- train $RUN --load "$T/stop.safetensors" --save "$T/resumed.safetensors"
cmp -s "$T/full.safetensors" "$T/resumed.safetensors" && ok ||
    bad "the resumed schedule's checkpoint differs from the straight run's ($(grep stopped "$T/stop.err"))"
expect "step schedule" 0 -- train "$T/a.json" $DATA --batch-size 64 --epochs 2 --lr-schedule step:23:0.5 --log "$T/st.jsonl"
grep -q '"lr": 0.00999999978' "$T/st.jsonl" && grep -q '"lr": 0.00499999989' "$T/st.jsonl" && ok ||
    bad "step:23:0.5 over 2 epochs of 23 steps: $(cat "$T/st.jsonl")"

# ---- weight decay, adamw, clipping -------------------------------------------------
expect "transpile adamw" 0 -- transpile graphs/digits_mlp.json -o "$T/w.json" --backward loss --optimizer adamw \
    --weight-decay 0.05 --clip-grad-norm 1 --parts 2
grep -q '"op": "clip_grad_norm", "in": \["w1@GRAD", "b1@GRAD", "w2@GRAD", "b2@GRAD"\]' "$T/w.json" && ok ||
    bad "no clip_grad_norm over the four gradients: $(grep clip "$T/w.json")"
[ "$(grep -c '"op": "adamw".*"weight_decay": 0.05' "$T/w.json")" = 4 ] && ok || bad "not four adamw updates with wd 0.05"
expect "train adamw" 0 -- train "$T/w.json" $DATA $EVAL --batch-size 32 --epochs 5 --lr 0.003 --shuffle
acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$T/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' && ok || bad "adamw + clip: held-out accuracy $acc"
expect "sgd weight decay" 0 -- transpile graphs/digits_mlp.json -o "$T/s.json" --backward loss --optimizer sgd \
    --weight-decay 0.001
[ "$(grep -c '"op": "sgd".*"weight_decay": 0.001' "$T/s.json")" = 4 ] && ok || bad "not four sgd updates with wd"

# ---- bad values -----------------------------------------------------------------
for sched in "step:0:0.5" "step:3" "cosine:3" "bogus" "step:2:-1"; do
    expect "schedule $sched" 2 "--lr-schedule expects" "'$sched'" -- train "$T/a.json" $DATA --batch-size 64 \
        --lr-schedule "$sched"
done
expect "negative lr" 2 "--lr expects a number" -- train "$T/a.json" $DATA --batch-size 64 --lr -0.1
expect "word lr" 2 "--lr expects a number" -- train "$T/a.json" $DATA --batch-size 64 --lr fast
expect "negative warmup" 2 "--warmup-steps" -- train "$T/a.json" $DATA --batch-size 64 --warmup-steps -3
expect "--lr without a rate var" 2 "no optimize op reads a learning rate" -- train graphs/linreg.json \
    --data x=$D/linreg_x.npy --data y=$D/linreg_y.npy --batch-size 64 --loss loss --lr 0.1
expect "unknown optimizer" 2 "--optimizer expects sgd, momentum, adam or adamw" -- transpile graphs/digits_mlp.json \
    -o "$T/x.json" --backward loss --optimizer lamb
expect "negative weight decay" 2 "--weight-decay expects a number" -- transpile graphs/digits_mlp.json -o "$T/x.json" \
    --backward loss --optimizer adamw --weight-decay -1
expect "clip 0" 2 "--clip-grad-norm expects a number" -- transpile graphs/digits_mlp.json -o "$T/x.json" \
    --backward loss --optimizer sgd --clip-grad-norm 0
expect "weight decay alone" 2 "need --optimizer" -- transpile graphs/digits_mlp.json -o "$T/x.json" --weight-decay 0.1
no_file "bad transpile flags" "$T/x.json"
expect "help" 0 -- train --help
stdout_has "help" "--lr-schedule S"
stdout_has "help" "--warmup-steps N"
expect "transpile help" 0 -- transpile --help
stdout_has "transpile help" "--clip-grad-norm X"
stdout_has "transpile help" "--weight-decay X"
cli_finish
