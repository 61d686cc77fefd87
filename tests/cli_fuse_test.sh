#!/bin/sh
# cli_fuse_test.sh - the fusion pass end to end: `pardo check --fused` shows
# the rewritten graph; `pardo run` and `pardo train` give the same bits with
# the pass (the default on the CPU) and with --no-fuse, for sgd, momentum
# and adam, plain and split into parts, on 1 and 2 threads.
# Usage: tests/cli_fuse_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-fuse "$@"

FEEDS="--feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy"
FETCH="--fetch loss --fetch w1 --fetch b1 --fetch w2 --fetch b2"

for opt in sgd momentum adam; do
    for parts in 0 2; do
        g="$T/$opt.$parts.json"
        pflag=""
        [ "$parts" = 0 ] || pflag="--parts $parts"
        expect "transpile $opt parts $parts" 0 -- transpile graphs/mlp.json -o "$g" --backward loss --optimizer $opt --lr 0.05 $pflag
        expect "check $opt parts $parts" 0 -- check "$g"
        stdout_has "check $opt parts $parts: unfused" "relu_grad"
        expect "check --fused $opt parts $parts" 0 -- check --fused "$g"
        if grep -q ' relu_grad \| add \| relu ' "$T/out"; then bad "check --fused $opt $parts: a fused op is left: $(cat "$T/out")"; else ok; fi
        stdout_has "check --fused $opt parts $parts" "(x, w1, b1) -> (a1)  [forward]  {\"activation\":\"relu\"}"
        [ "$parts" = 0 ] || stdout_has "check --fused $opt parts $parts: the update reads the parts" "w1@GRAD@PARTS, "
        [ "$parts" = 0 ] || stdout_has "check --fused $opt parts $parts: ... and merges them" "\"grad_merge\":\"mean\""
        for t in 1 2; do
            for mode in fused unfused; do
                flag=""
                [ "$mode" = unfused ] && flag="--no-fuse"
                rm -rf "$T/$mode"
                expect "run $opt parts $parts threads $t $mode" 0 -- run "$g" $FEEDS --steps 5 --threads $t $FETCH --out "$T/$mode" $flag
            done
            same=1
            for v in loss w1 b1 w2 b2; do cmp -s "$T/fused/$v.npy" "$T/unfused/$v.npy" || same=0; done
            if [ $same = 1 ]; then ok; else bad "run $opt parts $parts threads $t: fused and --no-fuse differ"; fi
        done
    done
done

# pardo train: the same checkpoint with and without the pass
D=graphs/data
expect "transpile digits" 0 -- transpile graphs/digits_mlp.json -o "$T/digits.json" --backward loss --optimizer adam --parts 2
for mode in fused unfused; do
    flag=""
    [ "$mode" = unfused ] && flag="--no-fuse"
    expect "train $mode" 0 -- train "$T/digits.json" --data x=$D/digits_train_x.npy --data y=$D/digits_train_y.npy \
        --eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy --batch-size 32 --epochs 2 --threads 2 \
        --save "$T/$mode.safetensors" $flag
    grep -v "samples/s" "$T/out" >"$T/train.$mode.out"
done
if cmp -s "$T/fused.safetensors" "$T/unfused.safetensors"; then ok; else bad "train: fused and --no-fuse checkpoints differ"; fi
if cmp -s "$T/train.fused.out" "$T/train.unfused.out"; then ok; else
    bad "train: fused and --no-fuse print other figures: $(cat "$T/train.fused.out" "$T/train.unfused.out")"
fi

# bad flags: exit 2
expect "check --fuse" 2 "unknown flag '--fuse'" -- check --fuse graphs/mlp.json
expect "run --no-fuse=1" 2 "unknown flag" -- run graphs/mlp.json $FEEDS --no-fuse=1

cli_finish
