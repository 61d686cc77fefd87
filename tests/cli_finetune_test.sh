#!/bin/sh
# cli_finetune_test.sh - `pardo transpile --add-loss KIND:OUTPUT [--labels
# NAME]`: a loss on an inference graph's output so that it can be trained.
# A graph file without a loss gets softmax_cross_entropy and trains; the
# PyTorch export tests/fixtures/onnx/mlp.onnx (its Gemms become matmuls with
# a bias input, which have a gradient) is fine-tuned for a few epochs with
# softmax_cross_entropy and with mse, at 1 and 2 parts, and the transformer
# encoder export with softmax_cross_entropy, on
# tests/fixtures/onnx/finetune (made by its make_data.py), and its loss falls;
# the trained checkpoint runs in the model; bad uses exit 2 writing nothing.
# Usage: tests/cli_finetune_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-finetune "$@"

# the first and last epoch's loss of a --log file fall by at least a factor FACTOR
falls() { # NAME LOG FACTOR
    first=$(sed -n '1s/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$2")
    last=$(sed -n '$s/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$2")
    awk -v a="$first" -v b="$last" -v f="$3" 'BEGIN { exit !(a != "" && b != "" && b * f < a) }' && ok ||
        bad "$1: the loss went from $first to $last (expected a fall by $3x): $(cat "$2")"
}

# ---- a graph file without a loss ---------------------------------------------
D=graphs/data
grep -v '"softmax_cross_entropy"' graphs/digits_mlp.json | sed 's/"b2": {\(.*\)}},$/"b2": {\1}}/' |
    sed '/"y":  {/d' >"$T/infer.json"
# the op list lost its last entry: drop the comma of the new last op
sed -i 's/"out": \["logits"\], "name": "fc2_bias", "role": "forward"},/"out": ["logits"], "name": "fc2_bias", "role": "forward"}/' "$T/infer.json"
expect "inference graph checks" 0 -- check "$T/infer.json"
expect "add-loss on a graph file" 0 -- transpile "$T/infer.json" -o "$T/g.json" --add-loss softmax_cross_entropy:logits \
    --backward loss --optimizer adam
expect "train it" 0 -- train "$T/g.json" --data x=$D/digits_train_x.npy --data labels=$D/digits_train_y.npy \
    --batch-size 64 --epochs 3 --log "$T/g.jsonl"
falls "graph file" "$T/g.jsonl" 2
expect "--labels names the feed" 0 -- transpile "$T/infer.json" -o "$T/g2.json" --add-loss softmax_cross_entropy:logits \
    --labels digit
grep -q '"digit": {"dtype": "int64", "shape": \[-1\], "role": "feed"}' "$T/g2.json" && ok ||
    bad "no int64 [-1] feed 'digit' in $(grep digit "$T/g2.json")"

# ---- bad uses --------------------------------------------------------------------
expect "no such output" 2 "no op of block 0 writes a var 'prob'" "the graph's outputs: logits" -- \
    transpile "$T/infer.json" -o "$T/x.json" --add-loss softmax_cross_entropy:prob
no_file "no such output" "$T/x.json"
expect "a feed is no output" 2 "writes a var 'x'" -- transpile "$T/infer.json" -o "$T/x.json" --add-loss mse:x
expect "unknown kind" 2 "--add-loss expects softmax_cross_entropy:OUTPUT or mse:OUTPUT" -- \
    transpile "$T/infer.json" -o "$T/x.json" --add-loss hinge:logits
expect "no colon" 2 "--add-loss expects" -- transpile "$T/infer.json" -o "$T/x.json" --add-loss mse
expect "no output" 2 "--add-loss expects" -- transpile "$T/infer.json" -o "$T/x.json" --add-loss mse:
expect "labels taken" 2 "a var 'x' already exists" "--labels NAME" -- \
    transpile "$T/infer.json" -o "$T/x.json" --add-loss mse:logits --labels x
expect "a graph with a loss" 2 "already" -- transpile graphs/digits_mlp.json -o "$T/x.json" \
    --add-loss softmax_cross_entropy:logits
expect "--labels alone" 2 "--labels needs --add-loss" -- transpile "$T/infer.json" -o "$T/x.json" --labels t
cat >"$T/rows.json" <<'JSON'
{"pardo": 1, "blocks": [{"vars": {"x": {"dtype": "float32", "shape": [-1, 4], "role": "feed"}},
  "ops": [{"op": "reduce_sum", "in": ["x"], "out": ["s"], "attrs": {"axes": [1], "keepdims": false}}]}]}
JSON
expect "logits not 2-D" 2 "'s' has 1 dims, expected logits [N, C]" -- transpile "$T/rows.json" -o "$T/x.json" \
    --add-loss softmax_cross_entropy:s
expect "mse on rows" 0 -- transpile "$T/rows.json" -o "$T/rows_t.json" --add-loss mse:s
grep -q '"labels": {"dtype": "float32", "shape": \[-1\], "role": "feed"}' "$T/rows_t.json" && ok ||
    bad "mse's targets are not float32 [-1]: $(grep labels "$T/rows_t.json")"
no_file "bad uses" "$T/x.json"

# ---- fine-tuning the PyTorch export ----------------------------------------------
F=tests/fixtures/onnx
FT=$F/finetune
if ! "$PARDO" --version | grep -q "^ONNX: built in"; then
    echo "cli-finetune: this pardo has no ONNX support: the ONNX fine-tuning was skipped"
    cli_finish
fi
for parts in 1 2; do
    expect "add-loss sce, $parts parts" 0 -- transpile "$F/mlp.onnx" -o "$T/ft$parts.json" --parts $parts \
        --add-loss softmax_cross_entropy:y --backward loss --optimizer adam --lr 0.01
    [ -s "$T/ft$parts.safetensors" ] && ok || bad "no weights file for the fine-tuned model"
    expect "fine-tune sce, $parts parts" 0 -- train "$T/ft$parts.json" --load "$T/ft$parts.safetensors" \
        --data x=$FT/x.npy --data labels=$FT/labels.npy --batch-size 16 --epochs 8 --threads 2 \
        --log "$T/ft$parts.jsonl" --save "$T/tuned$parts.safetensors"
    falls "fine-tune sce, $parts parts" "$T/ft$parts.jsonl" 2
done
# the parts give the same training within rounding
l1=$(sed -n '$s/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$T/ft1.jsonl")
l2=$(sed -n '$s/.*"loss": \([0-9.e+-]*\),.*/\1/p' "$T/ft2.jsonl")
awk -v a="$l1" -v b="$l2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-4 * a + 1e-6) }' && ok ||
    bad "1 and 2 parts trained to different losses: $l1, $l2"
# the tuned params load into the model itself (ONNX initializer names); its output changed
expect "run the tuned model" 0 -- run "$F/mlp.onnx" --load "$T/tuned1.safetensors" --feed x=$FT/x.npy --fetch y --out "$T/tuned"
expect "run the model" 0 -- run "$F/mlp.onnx" --feed x=$FT/x.npy --fetch y --out "$T/orig"
cmp -s "$T/tuned/y.npy" "$T/orig/y.npy" && bad "the tuned model gives the original outputs" || ok
expect "add-loss mse" 0 -- transpile "$F/mlp.onnx" -o "$T/mse.json" --add-loss mse:y --labels target \
    --backward loss --optimizer adam --lr 0.01
expect "fine-tune mse" 0 -- train "$T/mse.json" --load "$T/mse.safetensors" --data x=$FT/x.npy \
    --data target=$FT/targets.npy --batch-size 16 --epochs 10 --log "$T/mse.jsonl"
falls "fine-tune mse" "$T/mse.jsonl" 2
# the transformer encoder layer (embedding, attention, layer norms) learns the first token mod 3, in 2 parts
expect "add-loss transformer" 0 -- transpile "$F/transformer.onnx" -o "$T/tr.json" --parts 2 \
    --add-loss softmax_cross_entropy:y --backward loss --optimizer adam --lr 0.003
expect "fine-tune transformer" 0 -- train "$T/tr.json" --load "$T/tr.safetensors" --data tokens=$FT/tokens.npy \
    --data labels=$FT/token_labels.npy --batch-size 16 --epochs 12 --threads 2 --log "$T/tr.jsonl"
falls "fine-tune transformer" "$T/tr.jsonl" 4
# the CNN with its BatchNormalization nodes kept: batch_norm ops, their running statistics state, which
# training updates (each batch's statistics, in 2 parts) and the tuned model then runs on
expect "add-loss cnn_bn" 0 -- transpile "$F/cnn_bn.onnx" -o "$T/cb.json" --parts 2 \
    --add-loss softmax_cross_entropy:y --backward loss --optimizer adam --lr 0.01
grep -q '"net.1.running_mean": {"dtype": "float32", "shape": \[4\], "role": "state"' "$T/cb.json" && ok ||
    bad "the running mean is no state var: $(grep running_mean "$T/cb.json" | head -2)"
expect "fine-tune cnn_bn" 0 -- train "$T/cb.json" --load "$T/cb.safetensors" --data x=$FT/images.npy \
    --data labels=$FT/image_labels.npy --batch-size 16 --epochs 10 --threads 2 --log "$T/cb.jsonl" \
    --save "$T/cbt.safetensors"
falls "fine-tune cnn_bn" "$T/cb.jsonl" 2
expect "cnn_bn running mean before" 0 -- run "$F/cnn_bn.onnx" --feed x=$F/cnn_bn_in.npy --fetch net.1.running_mean \
    --out "$T/rm0"
expect "cnn_bn running mean after" 0 -- run "$F/cnn_bn.onnx" --load "$T/cbt.safetensors" --feed x=$F/cnn_bn_in.npy \
    --fetch net.1.running_mean --out "$T/rm1"
cmp -s "$T/rm0/net.1.running_mean.npy" "$T/rm1/net.1.running_mean.npy" && bad "training left the running mean" || ok
cli_finish
