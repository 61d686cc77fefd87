#!/bin/sh
# cli_executor_test.sh - `--executor auto|sequential|dataflow` on `pardo run` and
# `pardo train` (SPEC section 3): a bad value is exit status 2 with a message
# naming the flag, the value and both choices; the help texts list it; and
# the dataflow executor gives the sequential executor's results byte for
# byte: every example graph of graphs/ with its data, a transpiled training
# graph and a transpiled inference graph (--parts 2), at 1 and 2 threads
# (the fetched .npy files compared with cmp), and a short `pardo train` (the
# same checkpoint bytes and the same printed figures).
# Usage: tests/cli_executor_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-executor "$@"

D=graphs/data
MLP="--feed x=$D/mlp_x.npy --feed y=$D/mlp_y.npy"
DIGITS="--feed x=$D/digits_test_x.npy --feed y=$D/digits_test_y.npy"

# ---- bad values and the help texts -------------------------------------
for cmd in run train; do
    for v in fast Dataflow ""; do
        expect "$cmd --executor '$v'" 2 "pardo $cmd: --executor expects auto, sequential or dataflow, got '$v'" -- \
            $cmd graphs/mlp.json --executor="$v"
    done
    expect "$cmd --executor with no value" 2 "pardo $cmd: --executor needs a value" -- $cmd graphs/mlp.json --executor
    expect "$cmd --help" 0 -- $cmd --help
    stdout_has "$cmd --help" "--executor auto|sequential|dataflow"
done
expect "run --executor bad, before the graph is read" 2 "got 'parallel'" -- run no-such-graph.json --executor parallel
no_file "run --executor bad writes nothing" "$T/bad"
expect "run --executor bad with --out" 2 "--executor expects" -- run graphs/mlp.json $MLP --executor x --out "$T/bad"
no_file "run --executor bad writes no --out" "$T/bad"
expect "train --executor bad with --save" 2 "--executor expects" -- train graphs/mlp.json \
    --data x=$D/mlp_x.npy --data y=$D/mlp_y.npy --batch-size 4 --executor x --save "$T/bad.safetensors"
no_file "train --executor bad writes no --save" "$T/bad.safetensors"
expect "help" 0 -- --help
stdout_has "help" "[--executor auto|sequential|dataflow]"

# ---- run: dataflow against sequential ----------------------------------
# same_run NAME ARGS...: pardo run ARGS --out DIR with each executor at 1 and 2 threads; every fetched file the same
same_run() {
    name=$1
    shift
    for t in 1 2; do
        for e in sequential dataflow; do
            rm -rf "$T/$e"
            expect "$name threads $t $e" 0 -- run "$@" --threads $t --executor $e --out "$T/$e"
            cp "$T/out" "$T/$e.stdout"
        done
        (cd "$T/sequential" && ls) >"$T/seq.files" 2>/dev/null
        (cd "$T/dataflow" && ls) >"$T/df.files" 2>/dev/null
        if [ ! -s "$T/seq.files" ] || ! cmp -s "$T/seq.files" "$T/df.files"; then
            bad "$name threads $t: other files: sequential: $(cat "$T/seq.files"); dataflow: $(cat "$T/df.files")"
            continue
        fi
        differ=""
        while read -r f; do cmp -s "$T/sequential/$f" "$T/dataflow/$f" || differ="$differ $f"; done <"$T/seq.files"
        if [ -z "$differ" ]; then ok; else bad "$name threads $t: dataflow and sequential differ in$differ"; fi
        if cmp -s "$T/sequential.stdout" "$T/dataflow.stdout"; then ok; else
            bad "$name threads $t: other printed values: $(cat "$T/sequential.stdout" "$T/dataflow.stdout")"
        fi
    done
}

# every example graph, with the data graphs/README.md runs it on; a new graph without an entry here fails
for g in graphs/*.json; do
    case $g in
        graphs/linreg.json)
            same_run "$g" "$g" --feed x=$D/linreg_x.npy --feed y=$D/linreg_y.npy --steps 20 \
                --fetch w --fetch b --fetch loss ;;
        graphs/mlp.json) same_run "$g" "$g" $MLP --fetch logits --fetch probs --fetch loss ;;
        graphs/mlp_parallel.json) same_run "$g" "$g" $MLP --fetch loss --fetch loss_parts ;;
        graphs/digits_mlp.json | graphs/digits_cnn.json | graphs/digits_bn_mlp.json) same_run "$g" "$g" $DIGITS ;;
        graphs/two_tower.json) same_run "$g" "$g" --feed x=$D/two_tower_x.npy --fetch y --fetch ha8 --fetch hb8 ;;
        *) bad "$g: no feeds known for it: add it to tests/cli_executor_test.sh" ;;
    esac
done

# transpiled graphs (--parts 2): a training graph over 5 steps, and the two towers for inference
expect "transpile mlp" 0 -- transpile graphs/mlp.json -o "$T/mlp_train.json" --backward loss --optimizer adam --parts 2
same_run "transpiled mlp" "$T/mlp_train.json" $MLP --steps 5 --fetch loss --fetch w1 --fetch b1 --fetch w2 --fetch b2
expect "transpile two_tower" 0 -- transpile graphs/two_tower.json -o "$T/two_tower_parts.json" --parts 2
same_run "transpiled two_tower" "$T/two_tower_parts.json" --feed x=$D/two_tower_x.npy --fetch y

# ---- train: dataflow against sequential --------------------------------
expect "transpile digits" 0 -- transpile graphs/digits_mlp.json -o "$T/digits.json" --backward loss --optimizer adam \
    --parts 2
for t in 1 2; do
    for e in sequential dataflow; do
        expect "train threads $t $e" 0 -- train "$T/digits.json" --data x=$D/digits_train_x.npy \
            --data y=$D/digits_train_y.npy --eval x=$D/digits_test_x.npy --eval y=$D/digits_test_y.npy \
            --batch-size 64 --epochs 2 --shuffle --seed 3 --threads $t --executor $e --save "$T/$e.safetensors" \
            --log "$T/$e.jsonl"
        grep -v "samples/s" "$T/out" >"$T/train.$e.out"
        grep -o '"epoch": [0-9]*, "loss": [^,]*, "accuracy": [^,]*, "eval_loss": [^,]*, "eval_accuracy": [^,]*, "lr": [^,]*' "$T/$e.jsonl" \
            >"$T/log.$e" 2>/dev/null
    done
    if [ -s "$T/sequential.safetensors" ] && cmp -s "$T/sequential.safetensors" "$T/dataflow.safetensors"; then ok; else
        bad "train threads $t: dataflow and sequential checkpoints differ"
    fi
    if grep -q "^loss: " "$T/train.sequential.out" && cmp -s "$T/train.sequential.out" "$T/train.dataflow.out"; then
        ok
    else
        bad "train threads $t: other figures: $(cat "$T/train.sequential.out" "$T/train.dataflow.out")"
    fi
    if [ -s "$T/log.sequential" ] && cmp -s "$T/log.sequential" "$T/log.dataflow"; then ok; else
        bad "train threads $t: other losses in the logs: $(cat "$T/sequential.jsonl" "$T/dataflow.jsonl")"
    fi
    rm -f "$T"/*.safetensors "$T"/*.jsonl
done

# ---- train: the next batch copied in by an engine op, in the trace -----
expect "train dataflow trace" 0 -- train "$T/digits.json" --data x=$D/digits_train_x.npy \
    --data y=$D/digits_train_y.npy --batch-size 64 --epochs 1 --threads 2 --executor dataflow --trace "$T/t.json"
n_copy=$(grep -o '"name":"feed_copy"' "$T/t.json" | wc -l)
n_steps=$(( (1438 + 63) / 64 ))
if [ "$n_copy" -eq "$n_steps" ]; then ok; else bad "train dataflow trace: $n_copy feed_copy events, expected $n_steps"; fi
expect "train sequential trace" 0 -- train "$T/digits.json" --data x=$D/digits_train_x.npy \
    --data y=$D/digits_train_y.npy --batch-size 64 --epochs 1 --threads 2 --executor sequential --trace "$T/t.json"
if ! grep -q '"name":"feed_copy"' "$T/t.json"; then ok; else bad "train sequential trace: a feed_copy (sequential binds the loader's batches)"; fi

cli_finish
