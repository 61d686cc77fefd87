#!/bin/sh
# cli_onnx_test.sh - ONNX models end to end: the PyTorch exports in
# tests/fixtures/onnx (an MLP, a CNN with and without its batch norms folded,
# a transformer encoder layer with and without PyTorch's constant folding,
# a model whose ConstantOfShape / Expand shapes follow the batch at run time)
# run with `pardo run MODEL.onnx` at batch 4 and 2 (the dynamic axis) and
# match PyTorch within 1e-4 (tests/tools/npy_close, $NPY_CLOSE); `check`
# and `dot` read them; `import` writes a graph file and its weights that run
# the same; `transpile MODEL.onnx --parts 2` runs on 2 threads the same; bad
# models (truncated, foreign, an op pardo lacks) exit 2 naming the file and
# the node, writing nothing. A build without ONNX refuses .onnx with exit 2.
# Usage: tests/cli_onnx_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli-onnx "$@"
F=tests/fixtures/onnx
NPY_CLOSE=${NPY_CLOSE:-build/tests/tools/npy_close}
case $NPY_CLOSE in /*) ;; *) NPY_CLOSE=$ROOT/$NPY_CLOSE ;; esac

if ! "$PARDO" --version | grep -q "^ONNX: built in"; then
    expect "no ONNX: refused" 2 "$F/mlp.onnx" "an ONNX model" "without ONNX support" -- check "$F/mlp.onnx"
    echo "cli-onnx: this pardo has no ONNX support: only its refusal was tested"
    cli_finish
    exit $?
fi

close() { # NAME GOT WANT
    if "$NPY_CLOSE" "$2" "$3" 2>"$T/close"; then ok; else bad "$1: $(cat "$T/close")"; fi
}

input_of() { case $1 in transformer*) echo tokens ;; *) echo x ;; esac; }

# ---- run: every model, two batch sizes, against PyTorch ----------------------
for m in mlp cnn cnn_bn transformer transformer_nofold dynamic; do
    in=$(input_of $m)
    for b in "" _b2; do
        rm -rf "$T/o"
        run_pardo run "$F/$m.onnx" --feed "$in=$F/${m}_in$b.npy" --fetch y --out "$T/o"
        if [ "$rc" = 0 ]; then ok; else bad "run $m$b: exit $rc: $(cat "$T/err")"; continue; fi
        close "run $m$b" "$T/o/y.npy" "$F/${m}_out$b.npy"
    done
done
# the same on 2 threads with the dataflow executor
run_pardo run "$F/transformer.onnx" --feed tokens="$F/transformer_in.npy" --fetch y --out "$T/o2" --threads 2 \
    --executor dataflow
[ "$rc" = 0 ] && ok || bad "run transformer dataflow: $(cat "$T/err")"
close "run transformer dataflow" "$T/o2/y.npy" "$F/transformer_out.npy"

# weights in an external data file beside the model (onnx.save_model(save_as_external_data=True))
run_pardo run "$F/mlp_external.onnx" --feed x="$F/mlp_in.npy" --fetch y --out "$T/oe"
[ "$rc" = 0 ] && ok || bad "external data: $(cat "$T/err")"
close "external data" "$T/oe/y.npy" "$F/mlp_out.npy"
mkdir -p "$T/ext" && cp "$F/mlp_external.onnx" "$T/ext/"
expect "external data file missing" 2 "mlp_external.data" "external data" -- check "$T/ext/mlp_external.onnx"

# ReduceSum whose axes are a graph input: read at run time (tools/onnx_export/make_reduce_axes.py)
run_pardo run "$F/reduce_axes.onnx" --feed x="$F/reduce_axes_x.npy" --feed axes="$F/reduce_axes_axes.npy" --fetch y \
    --out "$T/ora"
[ "$rc" = 0 ] && ok || bad "run-time axes: $(cat "$T/err")"
close "run-time axes" "$T/ora/y.npy" "$F/reduce_axes_y.npy"

# LpNormalization, GlobalLpPool and LpPool, composed of pardo's ops, against NumPy's loops
# (tools/onnx_export/make_lp_ops.py); a p LpNormalization does not take is refused
run_pardo run "$F/lp_ops.onnx" --feed x="$F/lp_x.npy" --feed x1="$F/lp_x1.npy" --out "$T/lp"
[ "$rc" = 0 ] && ok || bad "Lp ops: $(cat "$T/err")"
for k in norm2 norm1 glob2 glob3 pool2 pool3 pool1d; do close "Lp op $k" "$T/lp/$k.npy" "$F/lp_$k.npy"; done
expect "LpNormalization p 3" 2 "lp_norm_p3.onnx" "LpNormalization" "attr 'p' = 3; expected 1 or 2" -- \
    check "$F/bad/lp_norm_p3.onnx"

# Conv of 1 and 3 spatial dims as conv_nd: PyTorch's Conv1d export, and Conv nodes with auto_pad SAME_UPPER, pads,
# dilations, group and a bias against torch.nn.functional (tools/onnx_export/export_conv_nd.py)
run_pardo run "$F/conv1d.onnx" --feed x="$F/conv1d_in.npy" --out "$T/c1"
[ "$rc" = 0 ] && ok || bad "Conv1d: $(cat "$T/err")"
close "Conv1d" "$T/c1/y.npy" "$F/conv1d_out.npy"
run_pardo run "$F/conv_nd.onnx" --feed x1="$F/conv_nd_x1.npy" --feed x3="$F/conv_nd_x3.npy" --out "$T/cn"
[ "$rc" = 0 ] && ok || bad "Conv 1-D and 3-D: $(cat "$T/err")"
for k in y1 y3; do close "Conv $k" "$T/cn/$k.npy" "$F/conv_nd_$k.npy"; done
expect "transpile conv1d --parts 2" 0 -- transpile "$F/conv1d.onnx" -o "$T/c1t.json" --parts 2

# an intermediate value by its ONNX name
run_pardo run "$F/transformer.onnx" --feed tokens="$F/transformer_in.npy" --fetch /emb/Gather_output_0
[ "$rc" = 0 ] && ok || bad "fetch by ONNX name: $(cat "$T/err")"
stdout_has "fetch by ONNX name" "/emb/Gather_output_0: float32 [4, 7, 32]"

# ---- check, dot ---------------------------------------------------------------
expect "check cnn_bn" 0 -- check "$F/cnn_bn.onnx"
stdout_has "check cnn_bn" "conv2d"
expect "dot mlp" 0 -- dot "$F/mlp.onnx"
stdout_has "dot mlp" "digraph"

# ---- import --------------------------------------------------------------------
expect "import mlp" 0 "mlp.safetensors" -- import "$F/mlp.onnx" -o "$T/mlp.json"
[ -s "$T/mlp.json" ] && [ -s "$T/mlp.safetensors" ] && ok || bad "import mlp: files missing"
run_pardo run "$T/mlp.json" --load "$T/mlp.safetensors" --feed x="$F/mlp_in.npy" --fetch y --out "$T/o3"
[ "$rc" = 0 ] && ok || bad "run imported mlp: $(cat "$T/err")"
close "run imported mlp" "$T/o3/y.npy" "$F/mlp_out.npy"
expect "import transformer --weights" 0 -- import "$F/transformer.onnx" -o "$T/tr.json" --weights "$T/w.safetensors"
run_pardo run "$T/tr.json" --load "$T/w.safetensors" --feed tokens="$F/transformer_in_b2.npy" --fetch y --out "$T/o4"
[ "$rc" = 0 ] && ok || bad "run imported transformer: $(cat "$T/err")"
close "run imported transformer" "$T/o4/y.npy" "$F/transformer_out_b2.npy"
expect "import of a graph file" 2 "not an ONNX model" -- import graphs/mlp.json -o "$T/g.json"
no_file "import of a graph file" "$T/g.json"
expect "import without -o" 2 "missing -o" -- import "$F/mlp.onnx"

# ---- transpile to 2 parts ---------------------------------------------------------
expect "transpile cnn --parts 2" 0 -- transpile "$F/cnn.onnx" -o "$T/cnn2.json" --parts 2
[ -s "$T/cnn2.safetensors" ] && ok || bad "transpile cnn: no weights file"
run_pardo run "$T/cnn2.json" --load "$T/cnn2.safetensors" --feed x="$F/cnn_in.npy" --fetch y --threads 2 --out "$T/o5"
[ "$rc" = 0 ] && ok || bad "run transpiled cnn: $(cat "$T/err")"
close "run transpiled cnn" "$T/o5/y.npy" "$F/cnn_out.npy"

expect "transpile transformer --parts 2" 0 -- transpile "$F/transformer.onnx" -o "$T/tr2.json" --parts 2
run_pardo run "$T/tr2.json" --load "$T/tr2.safetensors" --feed tokens="$F/transformer_in.npy" --fetch y --threads 2 \
    --out "$T/o7"
[ "$rc" = 0 ] && ok || bad "run transpiled transformer: $(cat "$T/err")"
close "run transpiled transformer" "$T/o7/y.npy" "$F/transformer_out.npy"

# ---- bad models -------------------------------------------------------------------
head -c 300 "$F/mlp.onnx" >"$T/trunc.onnx"
expect "truncated model" 2 "$T/trunc.onnx" "not a valid ONNX model" -- run "$T/trunc.onnx" --feed x="$F/mlp_in.npy" --out "$T/o6"
no_file "truncated model" "$T/o6"
expect "import truncated" 2 "$T/trunc.onnx" -- import "$T/trunc.onnx" -o "$T/t.json"
no_file "import truncated" "$T/t.json"
no_file "import truncated" "$T/t.safetensors"
sed 's/Tanh/Tank/g' "$F/mlp.onnx" >"$T/tank.onnx"
expect "unknown op type" 2 "$T/tank.onnx" "Tank" "node '/net/net.3/Tank'" "index 3" "opset 13" "not supported" "pardo maps" -- \
    check "$T/tank.onnx"
printf '\x08\x07\x12\x05hello' >"$T/foreign.onnx"
expect "foreign bytes" 2 "$T/foreign.onnx" -- check "$T/foreign.onnx"
cp "$F/mlp_in.npy" "$T/npy.onnx"
expect "a .npy named .onnx" 2 "$T/npy.onnx" "invalid JSON" -- check "$T/npy.onnx"
expect "wrong feed shape" 2 "x" -- run "$F/mlp.onnx" --feed x="$F/cnn_in.npy"
# found by make fuzz: an initializer whose dims claim 2^31 elements over 64 bytes of data is refused before
# anything is allocated (in 1 GiB of address space), and a NaN attr, which a graph file cannot hold, is exit 2
bounded check "$F/bad/lying_dims.onnx"
[ "$rc" = 2 ] && grep -q "64 bytes of raw data, expected 8589934592" "$T/err" && ok ||
    bad "lying dims: exit $rc: $(cat "$T/err")"
expect "NaN attr on import" 2 "NaN has no JSON form" -- import "$F/bad/nan_alpha.onnx" -o "$T/nan.json"
no_file "NaN attr on import" "$T/nan.json"
no_file "NaN attr on import" "$T/nan.safetensors"
# found by make fuzz: a model whose one node folds to a constant leaves block 0 with no ops; transpiling it
# read a NULL op list (UBSan) before saying there is no batch to split
expect "transpile of a graph with no ops" 2 "no feed var is read by the forward ops" -- \
    transpile "$F/bad/folded_away.onnx" -o "$T/fa.json" --parts 2
no_file "transpile of a graph with no ops" "$T/fa.json"
# a dtype an op cannot take (ONNX's AveragePool does not define uint8 either; tools/onnx_export/make_bad_dtype.py)
expect "a dtype the op does not take" 2 "avgpool_uint8.onnx" "avg_pool2d" "dtype uint8" "takes none of uint8" -- \
    check "$F/bad/avgpool_uint8.onnx"
# an op type pardo does not map, from the ONNX node tests where they are installed
N=/usr/share/libonnx-testdata/data/node
if [ -d "$N" ]; then
    expect "string input" 2 "test_strnormalizer_nostopwords_nochangecase/model.onnx" "graph input 'x'" "string" -- \
        check "$N/test_strnormalizer_nostopwords_nochangecase/model.onnx"
    expect "max pooling of uint8" 0 -- check "$N/test_maxpool_2d_uint8/model.onnx"
    expect "an op type pardo does not map" 2 "test_bernoulli/model.onnx" "Bernoulli" "is not supported" -- \
        check "$N/test_bernoulli/model.onnx"
fi

cli_finish
