#!/bin/sh
# cli_test.sh - end-to-end tests of the pardo binary: every subcommand, and
# every class of bad input (SPEC section 3): exit status 2, a message naming
# the file and the culprit, and no output file written.
# Usage: tests/cli_test.sh PATH/TO/pardo
set -u
. "$(dirname "$0")/cli_lib.sh"
cli_setup cli "$@"






G=graphs/linreg.json
LX=graphs/data/linreg_x.npy
LY=graphs/data/linreg_y.npy
MX=graphs/data/mlp_x.npy
MY=graphs/data/mlp_y.npy

# ---- happy paths -------------------------------------------------------
expect "help" 0 -- --help
stdout_has "help" "commands:"
stdout_has "help" "pardo --version"
expect "version" 0 -- --version
stdout_has "version" "pardo 0.1.0"
stdout_has "version" "matmul: own"
stdout_has "version" "matmul pick: " # off under make test (PARDO_GEMM_CACHE=off): no cache file
stdout_has "version" "CUDA: "
for c in run check ops dot; do
    expect "$c --help" 0 -- $c --help
    stdout_has "$c --help" "usage: pardo $c"
done

expect "check linreg" 0 -- check $G
stdout_has "check linreg" "params: 2 vars, 4 elements, 16 bytes"
stdout_has "check linreg" "err_sum"
expect "check mlp" 0 -- check graphs/mlp.json
stdout_has "check mlp" "logits"
stdout_has "check mlp" "float32  [-1, 10]"
stdout_has "check mlp" "params: 4 vars, 2410 elements"

expect "ops list" 0 -- ops
stdout_has "ops list" "matmul"
stdout_has "ops list" "softmax_cross_entropy"
expect "ops one" 0 -- ops matmul
stdout_has "ops one" "transpose_a"
stdout_has "ops one" "cuda kernel:"
# the CUDA kernels are in the binary exactly when pardo says CUDA is built in (ops/cuda/kernels.h's list)
run_pardo --version
if grep -q '^CUDA: built in' "$T/out"; then cuda_word="cuda kernel: yes"; else cuda_word="cuda kernel: no"; fi
for op in relu add mul exp; do
    expect "ops $op" 0 -- ops $op
    stdout_has "ops $op: $cuda_word" "$cuda_word"
done
expect "ops softsign" 0 -- ops softsign
stdout_has "ops softsign (no CUDA kernel)" "cuda kernel: no"

expect "dot" 0 -- dot graphs/mlp.json
stdout_has "dot" "digraph"
stdout_has "dot" "-> \"op0:0\""
if command -v dot >/dev/null 2>&1; then
    if dot -Tsvg "$T/out" -o "$T/g.svg" 2>"$T/dot.err" && grep -q "<svg" "$T/g.svg"; then ok; else bad "dot output does not render: $(cat "$T/dot.err")"; fi
else
    echo "cli: graphviz 'dot' not installed: skipped rendering the dot output"
fi

# linear regression: 300 steps of hand-written gradient descent recover the
# coefficients the data was made with (graphs/make_data.py: 2, -3, 0.5 and 1)
expect "run linreg" 0 -- run $G --feed x=$LX --feed y=$LY --steps 300 --fetch w --fetch b --fetch loss --out "$T/lin" --save "$T/lin.safetensors"
stdout_has "run linreg" "w: float32 [3, 1] = [2."
stdout_has "run linreg" ", -3.00"
stdout_has "run linreg" "b: float32 [1] = [0.99"
for f in w b loss; do
    if [ -s "$T/lin/$f.npy" ]; then ok; else bad "run linreg: $T/lin/$f.npy missing"; fi
done
if head -c 6 "$T/lin/w.npy" | grep -q NUMPY; then ok; else bad "w.npy lacks the NumPy magic"; fi
if [ -s "$T/lin.safetensors" ]; then ok; else bad "checkpoint not written"; fi
# resume from the checkpoint: the loss is already small after one more step
expect "run linreg --load" 0 -- run $G --feed x=$LX --feed y=$LY --load "$T/lin.safetensors" --fetch loss
stdout_has "run linreg --load" "loss: float32 [] = [0.000"
# fetched file round-trips as a feed-compatible .npy: feed the saved x back in
expect "run mlp" 0 -- run graphs/mlp.json --feed x=$MX --feed y=$MY --threads 2
stdout_has "run mlp default fetch" "probs: float32 [16, 10]"
stdout_has "run mlp default fetch" "loss: float32 []"
expect "run --steps=2 --threads=1 form" 0 -- run graphs/mlp.json --feed=x=$MX --feed=y=$MY --steps=2 --threads=1 --fetch=logits
stdout_has "run = form" "logits: float32 [16, 10]"
# temporaries: a fetched one keeps its value; fetched alone, a1 comes out of the fused matmul + bias + relu
expect "run fetches temporaries" 0 -- run graphs/mlp.json --feed x=$MX --feed y=$MY --threads 1 --fetch h1 --fetch a1
stdout_has "run fetches h1" "h1: float32 [16, 32] = [2.04594, 0.875201, -1.23675"
stdout_has "run fetches a1" "a1: float32 [16, 32] = [2.04594, 0.875201, 0, 0, 0, 1.59114"
expect "run fused a1" 0 -- run graphs/mlp.json --feed x=$MX --feed y=$MY --threads 1 --fetch a1
stdout_has "run fused a1" "a1: float32 [16, 32] = [2.04594, 0.875201, 0, 0, 0, 1.59114"
expect "run --device cuda falls back" 0 -- run graphs/mlp.json --feed x=$MX --feed y=$MY --device cuda --fetch loss
stdout_has "run --device cuda" "loss: float32 []"
# without a GPU the whole run is on the CPU: no op says it falls back (that note is for GPU runs)
if grep -q "in this GPU run" "$T/err"; then bad "a run without a GPU printed op notes: $(cat "$T/err")"; else ok; fi
# a CPU run of a CUDA build (its kernels linked in) never starts the CUDA driver: libcuda is not even opened
if [ "$cuda_word" = "cuda kernel: yes" ] && command -v strace >/dev/null 2>&1 &&
    strace -f -e trace=openat -o "$T/strace" "$PARDO" --version >/dev/null 2>&1; then
    strace -f -e trace=openat -o "$T/strace" "$PARDO" run graphs/mlp.json --feed x=$MX --feed y=$MY --fetch loss \
        >/dev/null 2>&1
    if grep -q 'libcuda\.so' "$T/strace"; then bad "a CPU run opened libcuda: $(grep 'libcuda\.so' "$T/strace" | head -1)"
    else ok; fi
else
    echo "cli: skipped the check that a CPU run leaves the CUDA driver alone (no CUDA build, or no strace)"
fi

# ---- outputs that are not regular files: written through (as cp does), never replaced ----
# through_fifo NAME TEXT ARGS...: pardo ARGS writes to the FIFO $T/fifo, which a reader empties; the reader gets
# TEXT and the FIFO stays a FIFO
through_fifo() {
    name=$1 text=$2
    shift 2
    rm -f "$T/fifo" "$T/fifo.got"
    mkfifo "$T/fifo"
    timeout 20 cat "$T/fifo" >"$T/fifo.got" &
    cat_pid=$!
    expect "$name" 0 -- "$@"
    wait $cat_pid
    if [ -p "$T/fifo" ] && grep -aq -- "$text" "$T/fifo.got"; then ok; else
        bad "$name: the FIFO was replaced or its reader got no '$text': $(ls -l "$T/fifo"; head -c 200 "$T/fifo.got" | tr -cd "[:print:]")"
    fi
}
through_fifo "run --save FIFO" "data_offsets" run $G --feed x=$LX --feed y=$LY --steps 1 --save "$T/fifo"
through_fifo "run --trace FIFO" "traceEvents" run $G --feed x=$LX --feed y=$LY --steps 1 --trace "$T/fifo"
through_fifo "transpile -o FIFO" "parallel_do" transpile graphs/mlp.json -o "$T/fifo"
# a device like /dev/null, made where we may (as root)
if mknod "$T/null" c 1 3 2>/dev/null; then
    expect "run --save DEVICE" 0 -- run $G --feed x=$LX --feed y=$LY --steps 1 --save "$T/null"
    if [ -c "$T/null" ]; then ok; else bad "--save replaced the device node: $(ls -l "$T/null")"; fi
    expect "transpile -o DEVICE" 0 -- transpile graphs/mlp.json -o "$T/null"
    if [ -c "$T/null" ]; then ok; else bad "transpile -o replaced the device node: $(ls -l "$T/null")"; fi
fi
# a symbolic link stays one; its target gets the checkpoint
mkdir -p "$T/ln"
ln -s ck.safetensors "$T/ln/link.safetensors"
expect "run --save LINK" 0 -- run $G --feed x=$LX --feed y=$LY --steps 1 --save "$T/ln/link.safetensors"
if [ -L "$T/ln/link.safetensors" ] && [ -s "$T/ln/ck.safetensors" ]; then ok; else bad "--save replaced the link: $(ls -l "$T/ln")"; fi
expect "run --load LINK" 0 -- run $G --feed x=$LX --feed y=$LY --load "$T/ln/link.safetensors" --fetch w

# ---- inputs checked from their first bytes, never read whole first ----
# expect_bounded NAME CODE WORD -- ARGS...: as expect, under bounded
expect_bounded() {
    name=$1 code=$2 word=$3
    shift 4
    bounded "$@"
    if [ "$rc" = "$code" ] && grep -qF -- "$word" "$T/err"; then ok; else bad "$name: exit $rc, expected $code and '$word': $(cat "$T/err")"; fi
}
truncate -s 2G "$T/sparse.npy"
expect_bounded "--feed /dev/zero" 2 "/dev/zero: byte 0: expected the .npy magic" -- run $G --feed x=/dev/zero --feed y=$LY --out "$T/z1"
no_file "--feed /dev/zero" "$T/z1"
expect_bounded "--feed a 2 GB sparse file" 2 "$T/sparse.npy: byte 0: expected the .npy magic" -- run $G --feed x="$T/sparse.npy" --feed y=$LY
expect_bounded "--load /dev/zero" 2 "/dev/zero: byte 8" -- run $G --feed x=$LX --feed y=$LY --load /dev/zero --save "$T/z2.st"
no_file "--load /dev/zero" "$T/z2.st"
expect_bounded "--load a 2 GB sparse file" 2 "$T/sparse.npy: byte 8" -- run $G --feed x=$LX --feed y=$LY --load "$T/sparse.npy"
rm -f "$T/sparse.npy"
# a feed from a pipe: its header first, then the data it says
cat $LX | "$PARDO" run $G --feed x=/dev/stdin --feed y=$LY --fetch loss >"$T/out" 2>"$T/err" && grep -q "^loss: float32 \[\]" "$T/out" && ok ||
    bad "--feed from a pipe: $(cat "$T/err")"
(cat $LX; printf 'x') | "$PARDO" run $G --feed x=/dev/stdin --feed y=$LY >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" = 2 ] && grep -q "expected the end of the file" "$T/err"; then ok; else bad "--feed from a pipe, a byte too many: exit $rc: $(cat "$T/err")"; fi

# ---- bad input: exit 2, file and culprit named, nothing written --------
mkdir -p "$T/g"
printf '{"pardo": 1, "blocks": [{"vars": {}, "ops": [\n  {"op": "relu", "in": ["x"] "out": ["y"]}]}]}' >"$T/g/syntax.json"
expect "malformed json" 2 "$T/g/syntax.json:2:" "invalid JSON" -- run "$T/g/syntax.json" --out "$T/o1"
no_file "malformed json" "$T/o1"
head -c 300 graphs/mlp.json >"$T/g/trunc.json"
expect "truncated json" 2 "$T/g/trunc.json:" "invalid JSON" -- check "$T/g/trunc.json"
sed 's/"ops": \[/"opz": [/' graphs/mlp.json >"$T/g/key.json"
expect "unknown key" 2 "$T/g/key.json:" "opz" -- check "$T/g/key.json"
sed 's/"op": "relu"/"op": "relux"/' graphs/mlp.json >"$T/g/op.json"
expect "unknown op" 2 "$T/g/op.json:" "relux" "block 0, op 2" "did you mean relu?" "known types:" -- run "$T/g/op.json" --feed x=$MX --feed y=$MY --out "$T/o2"
no_file "unknown op" "$T/o2"
sed 's/"in": \["z1"\]/"in": ["z9"]/' graphs/mlp.json >"$T/g/var.json"
expect "unknown var" 2 "$T/g/var.json:" "z9" "block 0, op 2" -- check "$T/g/var.json"
sed 's/"dtype": "float32", "shape": \[64, 32\]/"dtype": "float8", "shape": [64, 32]/' graphs/mlp.json >"$T/g/dtype.json"
expect "bad dtype" 2 "$T/g/dtype.json:" "w1" "float8" -- check "$T/g/dtype.json"
sed 's/"shape": \[32, 10\]/"shape": [31, 10]/' graphs/mlp.json >"$T/g/shape.json"
expect "shape mismatch" 2 "$T/g/shape.json:" "fc2" "[-1, 32]" "[31, 10]" -- check "$T/g/shape.json"
expect "missing graph file" 2 "nope.json" -- check "$T/nope.json"

expect "missing feed" 2 "$G" "missing feed 'y'" -- run $G --feed x=$LX --out "$T/o3" --save "$T/o3.safetensors"
no_file "missing feed" "$T/o3"
no_file "missing feed ckpt" "$T/o3.safetensors"
expect "missing npy" 2 "$T/none.npy" -- run $G --feed x=$T/none.npy --feed y=$LY --out "$T/o4"
no_file "missing npy" "$T/o4"
cp graphs/mlp.json "$T/foreign.npy"
expect "foreign npy" 2 "$T/foreign.npy" -- run $G --feed x=$T/foreign.npy --feed y=$LY --out "$T/o5"
no_file "foreign npy" "$T/o5"
head -c 100 $LX >"$T/trunc.npy"
expect "truncated npy" 2 "$T/trunc.npy" -- run $G --feed x=$T/trunc.npy --feed y=$LY --out "$T/o6"
no_file "truncated npy" "$T/o6"
expect "feed shape mismatch" 2 "$LY" "'x'" "[64, 1]" "[64, 3]" -- run $G --feed x=$LY --feed y=$LY
expect "feed dtype mismatch" 2 "$MY" "int64" "float32" -- run graphs/mlp.json --feed x=$MY --feed y=$MY
expect "feed unknown var" 2 "no var 'q'" -- run $G --feed q=$LX --feed x=$LX --feed y=$LY
expect "feed a param" 2 "'w' is a param" -- run $G --feed w=$LX --feed x=$LX --feed y=$LY

printf 'this is not a checkpoint at all' >"$T/garbage.safetensors"
expect "garbage checkpoint" 2 "$T/garbage.safetensors" -- run $G --feed x=$LX --feed y=$LY --load "$T/garbage.safetensors" --save "$T/o7.safetensors"
no_file "garbage checkpoint" "$T/o7.safetensors"
expect "missing checkpoint" 2 "$T/none.safetensors" -- run $G --feed x=$LX --feed y=$LY --load "$T/none.safetensors"
# a checkpoint whose entry 'w' is [3, 1] loaded into a graph whose param 'w' is [3, 3]
printf '{"pardo": 1, "blocks": [{"vars": {"w": {"dtype": "float32", "shape": [3, 3], "role": "param", "init": {"fill": "normal"}}},\n "ops": [{"op": "relu", "in": ["w"], "out": ["r"]}]}]}' >"$T/g/w33.json"
expect "checkpoint of another graph" 2 "lin.safetensors" "'w'" "[3, 1]" "[3, 3]" -- run "$T/g/w33.json" --load "$T/lin.safetensors" --out "$T/o9"
no_file "checkpoint of another graph" "$T/o9"

expect "unknown flag" 2 "unknown flag '--frobnicate'" -- run $G --frobnicate
expect "unknown command" 2 "unknown command 'walk'" -- walk
expect "bad --steps" 2 "--steps expects an integer" -- run $G --steps zero
expect "bad --threads" 2 "--threads expects an integer" -- run $G --threads 0
expect "bad --device" 2 "--device expects cpu" -- run $G --device tpu
expect "missing GRAPH" 2 "missing GRAPH" -- run
expect "bad --fetch" 2 "no var 'nope'" -- run $G --feed x=$LX --feed y=$LY --fetch nope --out "$T/o8"
no_file "bad --fetch" "$T/o8"
expect "ops unknown" 2 "unknown op 'nope'" -- ops nope
expect "ops unknown, near a known one" 2 "unknown op 'maxpool2d'; did you mean max_pool2d? (known ops:" -- ops maxpool2d
expect "--feed without =" 2 "NAME=FILE.npy" -- run $G --feed x

# a bad $PARDO_NUM_THREADS is an error where --threads does not override it (it had been passed over)
export PARDO_NUM_THREADS=abc
expect "run, bad PARDO_NUM_THREADS" 2 "PARDO_NUM_THREADS is 'abc', expected a thread count" -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
expect "train, bad PARDO_NUM_THREADS" 2 "PARDO_NUM_THREADS is 'abc'" -- train graphs/mlp.json --data x=graphs/data/mlp_x.npy --batch-size 2
expect "run, --threads over a bad PARDO_NUM_THREADS" 0 -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy --threads 1
export PARDO_NUM_THREADS=0
expect "run, PARDO_NUM_THREADS=0" 2 "expected a thread count 1..1024" -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
unset PARDO_NUM_THREADS
export PARDO_GEMM=openblas
expect "run, bad PARDO_GEMM" 2 "PARDO_GEMM is 'openblas', expected own or blas" -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
export PARDO_GEMM=own
expect "run, PARDO_GEMM=own" 0 -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
unset PARDO_GEMM
export PARDO_PIN_THREADS=yes
expect "run, bad PARDO_PIN_THREADS" 2 "PARDO_PIN_THREADS is 'yes', expected auto, on or off" -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy
for m in auto on off; do
    export PARDO_PIN_THREADS=$m
    expect "run, PARDO_PIN_THREADS=$m" 0 -- run graphs/mlp.json --feed x=graphs/data/mlp_x.npy --feed y=graphs/data/mlp_y.npy --threads 2
done
unset PARDO_PIN_THREADS

cli_finish
