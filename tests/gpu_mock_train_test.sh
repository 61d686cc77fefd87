#!/bin/sh
# gpu_mock_train_test.sh - `pardo train --device cuda` end to end on the host stand-in for the device (make
# gpu-mock-test: PATH/TO/pardo is build/gpu-mock/pardo): the digits MLP as `pardo transpile --no-parallel`
# writes it, trained on the "GPU" and on the CPU with one seed, ends at the same loss and held-out accuracy
# (within 1e-3: the stand-in's products add in double, the CPU's in float32), also on device 1 of two, each
# op the GPU run hands to the CPU is noted once, and the ops with CUDA kernels (matmul, relu,
# softmax_cross_entropy) are not; the device cache and the pinned host cache allocate nothing after the
# first steps; the digits CNN and batch-normed MLP likewise, their conv2d, pools, reshapes, batch_norm and
# adam on the GPU; the crossings are to_device / to_host ops (the placement pass); PyTorch's MLP and CNN
# exported to ONNX run on the GPU to PyTorch's outputs. Usage: tests/gpu_mock_train_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup gpu-mock-train "$@"

G=$T/digits.json
DATA="--data x=graphs/data/digits_train_x.npy --data y=graphs/data/digits_train_y.npy"
EVAL="--eval x=graphs/data/digits_test_x.npy --eval y=graphs/data/digits_test_y.npy"
expect "transpile --no-parallel" 0 -- transpile graphs/digits_mlp.json -o "$G" --backward loss --optimizer adam --no-parallel
for dev in cuda cpu; do
    # shellcheck disable=SC2086
    expect "train --device $dev" 0 -- train "$G" $DATA $EVAL --batch-size 32 --epochs 4 --shuffle --seed 1 --threads 1 --device $dev \
        --trace "$T/$dev.json"
    cp "$T/out" "$T/$dev.out"
    cp "$T/err" "$T/$dev.err"
done
if grep -q "running on the CPU" "$T/cuda.err"; then bad "the GPU run ran on the CPU: $(cat "$T/cuda.err")"; else ok; fi
# within 1e-3 relative: the CPU's float32 products round by the CPU's kernel (AVX2, AVX-512: other bits)
for key in loss eval_loss eval_accuracy; do
    g=$(sed -n "s/^$key: //p" "$T/cuda.out")
    c=$(sed -n "s/^$key: //p" "$T/cpu.out")
    if [ -n "$g" ] && awk -v g="$g" -v c="$c" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= 1e-3 * c + 1e-6) }'
    then ok; else bad "$key: '$g' on the GPU, '$c' on the CPU"; fi
done
twice=$(grep "runs on the CPU in this GPU run" "$T/cuda.err" | sort | uniq -d)
if [ -z "$twice" ]; then ok; else bad "a note came more than once: $twice"; fi
if grep -q "note: op 'matmul\|note: op 'relu'\|note: op 'softmax_cross_entropy" "$T/cuda.err"; then bad "an op with a CUDA kernel ran on the CPU: $(cat "$T/cuda.err")"; else ok; fi
if grep -q "in this GPU run" "$T/cpu.err"; then bad "the CPU run printed GPU notes: $(cat "$T/cpu.err")"; else ok; fi
# the placement pass (transpiler/place.c): the GPU run's crossings are ops of their own (x, a feed, goes to the
# GPU each step), the CPU run has none; neither is noted as an op without a CUDA kernel
n=$(grep -o '"op":"to_device","name":"[^"]*","block":0,"index":[0-9]*,"role":"forward","inputs":\[{"var":"x"' \
    "$T/cuda.json" | wc -l)
[ "$n" -ge 4 ] && ok || bad "the GPU run has $n to_device ops of x in its trace"
if grep -q '"op":"to_' "$T/cpu.json"; then bad "the CPU run has placement ops"; else ok; fi
if grep -q "note: op 'to_" "$T/cuda.err"; then bad "a placement op was noted: $(cat "$T/cuda.err")"; else ok; fi

# --device cuda:1 on a stand-in with two devices: the feed copy's pool thread selects device 1 too (feed_stage.c),
# and the run ends where the CPU's does
export PARDO_MOCK_DEVICE_COUNT=2
# shellcheck disable=SC2086
expect "train --device cuda:1" 0 -- train "$G" $DATA $EVAL --batch-size 32 --epochs 4 --shuffle --seed 1 --threads 1 \
    --device cuda:1
unset PARDO_MOCK_DEVICE_COUNT
for key in loss eval_loss eval_accuracy; do
    g=$(sed -n "s/^$key: //p" "$T/out")
    c=$(sed -n "s/^$key: //p" "$T/cpu.out")
    if [ -n "$g" ] && awk -v g="$g" -v c="$c" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= 1e-3 * c + 1e-6) }'
    then ok; else bad "cuda:1: $key: '$g' on the GPU, '$c' on the CPU"; fi
done

# the digits CNN (graphs/digits_cnn.json: reshape, conv2d, max_pool2d, flatten) and the batch-normed MLP
# (graphs/digits_bn_mlp.json: batch_norm in training mode), each with adam and the gradients, run on the "GPU"
# (their ops/cuda/ glue over tests/gpu_mock/host_launch_train.c), end at the CPU's loss and held-out accuracy, and
# none of those ops is handed to the CPU
for net in digits_cnn digits_bn_mlp; do
    C=$T/$net.json
    expect "transpile $net --no-parallel" 0 -- transpile graphs/$net.json -o "$C" --backward loss --optimizer adam --no-parallel
    for dev in cuda cpu; do
        # shellcheck disable=SC2086
        expect "train $net --device $dev" 0 -- train "$C" $DATA $EVAL --batch-size 32 --epochs 2 --shuffle --seed 1 --threads 1 --device $dev
        cp "$T/out" "$T/$net-$dev.out"
        cp "$T/err" "$T/$net-$dev.err"
    done
    for key in loss eval_loss eval_accuracy; do
        g=$(sed -n "s/^$key: //p" "$T/$net-cuda.out")
        c=$(sed -n "s/^$key: //p" "$T/$net-cpu.out")
        if [ -n "$g" ] && awk -v g="$g" -v c="$c" 'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d <= 1e-3 * c + 1e-6) }'
        then ok; else bad "$net's $key: '$g' on the GPU, '$c' on the CPU"; fi
    done
    for op in reshape conv2d conv2d_grad max_pool2d max_pool2d_grad flatten flatten_grad batch_norm batch_norm_grad adam; do
        if grep -q "note: op '$op' runs on the CPU" "$T/$net-cuda.err"; then bad "$net: $op ran on the CPU: $(cat "$T/$net-cuda.err")"; else ok; fi
    done
done

# the device cache (src/core/device_cache.h): PARDO_DEVICE_CACHE_STATS=1 prints its counters as the command ends;
# by then the executors are freed, which trims the cache, so every raw allocation has been freed raw. (Whether
# more steps allocate more is not checked here: the executor keeps its tensors' buffers across steps, so this
# loop frees no device block before the end, and the loader's timing moves its count by a block or two.)
# shellcheck disable=SC2086
PARDO_DEVICE_CACHE_STATS=1 "$PARDO" train "$G" $DATA --batch-size 32 --epochs 1 --threads 1 --device cuda \
    > "$T/out" 2> "$T/err"
line=$(sed -n 's/^pardo: device cache: \([0-9]*\) raw allocations, \([0-9]*\) raw frees, .* \([0-9]*\) bytes held, .*/\1 \2 \3/p' "$T/err")
read -r a f h <<EOT
$line
EOT
if [ -n "$line" ] && [ "$a" -gt 0 ] && [ "$f" = "$a" ] && [ "$h" = 0 ]
then ok; else bad "device cache at exit: '$line' (raw allocations, raw frees, bytes held): $(cat "$T/err")"; fi

# the pinned host cache (src/core/host_cache.h) the feed stage stages batches through: as many pinned allocations
# for 3 epochs as for 1 (none after the first batches: each block is reused once its copy's event completed),
# and all of them freed as the command ends (the stage's free trims the cache)
pinned() {
    # shellcheck disable=SC2086
    PARDO_DEVICE_CACHE_STATS=1 "$PARDO" train "$G" $DATA --batch-size 32 --epochs "$1" --threads 1 --device cuda \
        > "$T/out" 2> "$T/err"
    sed -n 's/^pardo: host cache: \([0-9]*\) pinned allocations, \([0-9]*\) pinned frees, \([0-9]*\) cache hits, .*/\1 \2 \3/p' "$T/err"
}
one=$(pinned 1)
three=$(pinned 3)
read -r a1 f1 h1 <<EOT
$one
EOT
read -r a3 f3 h3 <<EOT
$three
EOT
if [ -n "$one" ] && [ -n "$three" ] && [ "$a1" -gt 0 ] && [ "$a3" = "$a1" ] && [ "$f1" = "$a1" ] && [ "$f3" = "$a3" ] &&
    [ "$h3" -gt "$h1" ]
then ok; else bad "host cache at exit, 1 epoch: '$one', 3 epochs: '$three' (pinned allocations, frees, hits): $(cat "$T/err")"; fi

# an imported ONNX model on the GPU (PyTorch's exports, tests/fixtures/onnx): pardo run --device cuda gives
# PyTorch's outputs as the CPU run does, with its crossings placed
NPY_CLOSE=${NPY_CLOSE:-build/tests/tools/npy_close}
case $NPY_CLOSE in /*) ;; *) NPY_CLOSE=$ROOT/$NPY_CLOSE ;; esac
F=$ROOT/tests/fixtures/onnx
if "$PARDO" --version | grep -q '^ONNX: built in'; then
    for m in mlp cnn; do
        rm -rf "$T/onnx_$m"
        expect "run $m.onnx --device cuda" 0 -- run "$F/$m.onnx" --feed x="$F/${m}_in.npy" --fetch y --device cuda \
            --out "$T/onnx_$m" --trace "$T/onnx_$m.json"
        if "$NPY_CLOSE" "$T/onnx_$m/y.npy" "$F/${m}_out.npy" 2>"$T/close"; then ok; else bad "$m.onnx on the GPU: $(cat "$T/close")"; fi
        grep -q '"op":"to_device"' "$T/onnx_$m.json" && ok || bad "$m.onnx on the GPU: no to_device op in its trace"
    done
else
    echo "gpu-mock-train: the ONNX model on the GPU skipped (pardo is built without ONNX)"
fi

cli_finish
