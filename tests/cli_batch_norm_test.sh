#!/bin/sh
# cli_batch_norm_test.sh - batch_norm end to end on graphs/digits_bn_mlp.json:
# pardo train updates the running statistics (state, in the checkpoint) and
# reaches 95% held out; its evaluation runs in eval mode, so its eval loss is
# what `pardo run` of the inference graph gives from the checkpoint; `pardo
# run` keeps the statistics unless --train, which updates them; 1 and 2
# parts keep each part's own statistics (not the same running mean), and
# with --sync-batch-norm 2 and 3 parts train as 1 part does.
# Usage: tests/cli_batch_norm_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-batch-norm "$@"

D=graphs/data
DATA="--data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy"
EVAL="--eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy"
TEST="--feed x=$D/digits_test_x.npy --feed y=$D/digits_test_y.npy"
G=graphs/digits_bn_mlp.json
for parts in 1 2; do
    expect "transpile $parts" 0 -- transpile $G -o "$T/t$parts.json" --backward loss --optimizer adam --parts $parts
    expect "train $parts" 0 -- train "$T/t$parts.json" $DATA $EVAL --batch-size 32 --epochs 6 --shuffle --seed 2 \
        --threads 2 --save "$T/ck$parts.safetensors"
    acc=$(sed -n 's/^eval_accuracy: \([0-9.]*\)$/\1/p' "$T/out")
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' && ok || bad "parts $parts: held-out accuracy $acc"
    eval_loss=$(sed -n 's/^eval_loss: \([0-9.]*\)$/\1/p' "$T/out")
    expect "run the checkpoint $parts" 0 -- run $G --load "$T/ck$parts.safetensors" $TEST --fetch loss --fetch bn1_mean \
        --out "$T/run$parts"
    run_loss=$(sed -n 's/^loss: float32 \[\] = \[\(.*\)\]$/\1/p' "$T/out")
    awk -v a="$run_loss" -v b="$eval_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 2e-6 + 1e-5 * b) }' && ok ||
        bad "parts $parts: eval_loss $eval_loss is not the eval-mode run's loss $run_loss"
    grep -q '"bn1_mean"' "$T/ck$parts.safetensors" && ok || bad "no running mean in the checkpoint"
done
# --sync-batch-norm: 2 and 3 parts normalise by the whole batch's statistics (the parts join at an
# all_reduce), so they train as 1 part does, the running variance included
NPY_CLOSE=${NPY_CLOSE:-build/tests/tools/npy_close}
case $NPY_CLOSE in /*) ;; *) NPY_CLOSE=$ROOT/$NPY_CLOSE ;; esac
for parts in 1 2 3; do
    sync=
    [ $parts -gt 1 ] && sync=--sync-batch-norm
    expect "transpile sync $parts" 0 -- transpile $G -o "$T/s$parts.json" --backward loss --optimizer sgd --lr 0.1 \
        --parts $parts $sync
    expect "train sync $parts" 0 -- train "$T/s$parts.json" $DATA --batch-size 50 --epochs 1 --threads 2 \
        --save "$T/s$parts.safetensors"
    expect "run sync $parts" 0 -- run $G --load "$T/s$parts.safetensors" $TEST --fetch bn1_var --fetch logits \
        --out "$T/srun$parts"
done
for parts in 2 3; do
    for v in bn1_var logits; do
        if "$NPY_CLOSE" "$T/srun$parts/$v.npy" "$T/srun1/$v.npy" 1e-4 1e-5 2>"$T/close"; then ok
        else bad "--sync-batch-norm, $parts parts: $v is not 1 part's: $(cat "$T/close")"; fi
    done
done
[ "$(grep -c '"all_reduce"' "$T/s2.json")" = 2 ] && ok || bad "the sync graph lacks its two all_reduce ops"
expect "check the sync graph" 0 -- check "$T/s2.json"
grep -q batch_norm_stats "$T/out" && ok || bad "pardo check does not list batch_norm_stats: $(head -5 "$T/out")"
# the running statistics moved from their init (0), and each part's own statistics give another mean
expect "untrained mean" 0 -- run $G $TEST --fetch bn1_mean --out "$T/init"
cmp -s "$T/init/bn1_mean.npy" "$T/run1/bn1_mean.npy" && bad "training left the running mean at its init" || ok
cmp -s "$T/run1/bn1_mean.npy" "$T/run2/bn1_mean.npy" && bad "1 and 2 parts gave the same running mean" || ok
# eval mode keeps the statistics; --train updates them
expect "eval run" 0 -- run $G --load "$T/ck1.safetensors" $TEST --fetch bn1_mean --out "$T/eval" --save "$T/e.safetensors"
cmp -s "$T/eval/bn1_mean.npy" "$T/run1/bn1_mean.npy" && ok || bad "an eval-mode run changed the running mean"
expect "train-mode run" 0 -- run $G --load "$T/ck1.safetensors" $TEST --fetch bn1_mean --out "$T/tr" --train
cmp -s "$T/tr/bn1_mean.npy" "$T/run1/bn1_mean.npy" && bad "--train left the running mean as it was" || ok
# a batch_norm the file gives no role is a forward op (it writes a temp beside its state), not an update
sed 's/"name": "bn1", "role": "forward"}/"name": "bn1"}/' $G >"$T/norole.json"
grep -q '"name": "bn1"}' "$T/norole.json" && ok || bad "sed left the role"
expect "run, no role" 0 -- run "$T/norole.json" $TEST --fetch loss
grep -q "optimize ops" "$T/err" && bad "a batch_norm without a role is taken for an update: $(cat "$T/err")" || ok
expect "transpile, no role" 0 -- transpile "$T/norole.json" -o "$T/nr.json" --backward loss --optimizer adam --parts 2
expect "train, no role" 0 -- train "$T/nr.json" $DATA $EVAL --batch-size 32 --epochs 1
cli_finish
